"""The lscpu -p (+ numactl --hardware) reader, on hand-written fixtures."""

from pathlib import Path

import pytest

from numalab.cpumask import format_cpulist, parse_cpulist
from numalab.errors import TopologyError
from numalab.topology import load
from numalab.topology.lscpu import parse_numactl, read_lscpu

DATA = Path(__file__).resolve().parent / "data" / "lscpu"
HEADER = ("# The following is the parsable format, which can be fed to other\n"
          "# programs. Each different item in every column has an unique ID\n"
          "# starting usually from zero.\n")


def test_x86_two_sockets_with_sibling_numactl():
    t = read_lscpu(DATA / "2s8c2t-x86.lscpu", arch="x86")
    assert t.counts() == {"pu": 32, "core": 16, "cluster": 16, "die": 2, "package": 2, "numa": 2}
    assert format_cpulist(t.nodes[0].cpus) == "0-7,16-23"
    assert t.cpus[3].thread_siblings == (1 << 3) | (1 << 19)
    # x86: cluster = L2 sharers = the SMT pair here; LLC = the L3 column = the socket
    assert t.cpus[3].cluster_cpus == t.cpus[3].thread_siblings and t.cpus[3].cluster_source == "l2"
    assert t.cpus[3].llc_cpus == parse_cpulist("0-7,16-23")
    # picked up from the sibling .numactl file
    assert t.distances == [[10, 21], [21, 10]] and t.nodes[1].memory_bytes == 64508 << 20


def test_numactl_can_be_ignored_and_arch_defaults_to_unknown():
    t = read_lscpu(DATA / "2s8c2t-x86.lscpu", numactl=False)
    assert t.distances == [] and t.nodes[0].memory_bytes is None
    assert t.arch == "unknown" and t.cpus[0].cluster_cpus == 1


def test_arm64_cluster_column_with_colon_caches():
    t = load(str(DATA / "arm64-2n8cluster4co.lscpu"), arch="arm64")
    assert t.counts()["cluster"] == 8 and t.counts()["numa"] == 2
    assert t.cpus[5].cluster_cpus == 0xF0 and t.cpus[5].cluster == 1
    assert t.cpus[5].cluster_source == "lscpu"
    assert t.cpus[20].llc_cpus == parse_cpulist("16-31") and t.cpus[20].l2_cpus == 1 << 20


def test_offline_cpus_with_empty_fields():
    t = read_lscpu(DATA / "offline-8cpu.lscpu")
    assert format_cpulist(t.online) == "0-5" and format_cpulist(t.present) == "0-7"
    assert t.nodes[0].cpus == 0xFF
    assert t.cpus[1].thread_siblings == 0b11 and t.cpus[7].thread_siblings == 1 << 7


def test_x86_without_l2_column_clusters_are_smt_siblings(tmp_path):
    p = tmp_path / "nol2.lscpu"
    p.write_text(HEADER + "# CPU,Core,Socket,Node\n0,0,0,0\n1,0,0,0\n2,1,0,0\n3,1,0,0\n")
    t = read_lscpu(p, arch="x86")
    assert t.cpus[3].cluster_cpus == 0b1100 and t.cpus[3].cluster_source == "smt"


def test_no_node_column_means_one_node(tmp_path):
    p = tmp_path / "flat.csv"
    p.write_text(HEADER + "# CPU,Core,Socket\n0,0,0\n1,0,0\n2,1,0\n3,1,0\n")
    t = load(str(p))
    assert list(t.nodes) == [0] and t.nodes[0].cpus == 0xF and t.counts()["core"] == 2


NUMACTL = """available: 2 nodes (0-1)
node 0 cpus: 0 1
node 0 size: 100 MB
node 0 free: 50 MB
node 1 cpus: 2 3
node 1 size: 200 MB
node 1 free: 50 MB
node distances:
node   0   1
  0:  10  20
  1:  20  10
"""
LSCPU = HEADER + "# CPU,Core,Socket,Node\n0,0,0,0\n1,1,0,0\n2,2,1,1\n3,3,1,1\n"


def test_parse_numactl():
    cpus, mem, ids, rows = parse_numactl(NUMACTL, "n")
    assert cpus == {0: 0b11, 1: 0b1100} and mem == {0: 100 << 20, 1: 200 << 20}
    assert ids == [0, 1] and rows == [[10, 20], [20, 10]]


def run(tmp_path, lscpu, numactl=None):
    p = tmp_path / "m.lscpu"
    p.write_text(lscpu)
    n = None
    if numactl is not None:
        n = tmp_path / "other.txt"
        n.write_text(numactl)
    return read_lscpu(p, numactl=n)


def test_explicit_numactl_file(tmp_path):
    t = run(tmp_path, LSCPU, NUMACTL)
    assert t.distance(0, 1) == 20 and t.nodes[1].memory_bytes == 200 << 20


@pytest.mark.parametrize("lscpu, message", [
    ("0,0,0,0\n", "no column header"),
    (HEADER + "# Core,Socket\n0,0\n", "no column header"),
    (HEADER + "# CPU,Core,Wheels\n0,0,0\n", "line 4: unknown column 'Wheels'"),
    (HEADER + "# CPU,Core,Socket,Node\n0,0,0\n", "line 5: 3 fields"),
    (HEADER + "# CPU,Core,Socket,Node\n0,0,zero,0\n", "line 5: socket field 'zero'"),
    (HEADER + "# CPU,Core,Socket,Node\n0,0,0,0\n0,1,0,0\n", "line 6: CPU 0 listed twice"),
    (HEADER + "# CPU,Core,Socket,Node\n0,0,0,0\n1,0,0,1\n", "line 6: CPU 1 is in node 1"),
    (HEADER + "# CPU,Core,Online\n0,0,maybe\n", "not Y or N"),
    (HEADER + "# CPU,Core,Node,Node\n0,0,0,0\n", "appears twice"),
    (HEADER + "# CPU,Core\n", "no CPU lines"),
])
def test_bad_lscpu(tmp_path, lscpu, message):
    with pytest.raises(TopologyError, match=message) as e:
        run(tmp_path, lscpu)
    assert "m.lscpu" in str(e.value)


@pytest.mark.parametrize("numactl, message", [
    (NUMACTL.replace("  1:  20  10", "  1:  20"), "line 11: distance table is not square"),
    (NUMACTL.replace("  1:  20  10\n", ""), "not square"),
    (NUMACTL.replace("node 1 cpus: 2 3", "node 1 cpus: 2 x"), "line 5: cannot read"),
    (NUMACTL.replace("node 1 cpus: 2 3", "node 1 cpus: 2"), "node 1: numactl lists CPUs"),
    (NUMACTL.replace("100 MB", "100 parsecs"), "unknown size unit"),
])
def test_bad_numactl(tmp_path, numactl, message):
    with pytest.raises(TopologyError, match=message) as e:
        run(tmp_path, LSCPU, numactl)
    assert "other.txt" in str(e.value)


def test_not_utf8_and_unknown_option(tmp_path):
    p = tmp_path / "b.lscpu"
    p.write_bytes(b"# CPU\n\xff\n")
    with pytest.raises(TopologyError, match="not UTF-8"):
        read_lscpu(p)
    with pytest.raises(TopologyError, match="unknown option"):
        read_lscpu(DATA / "offline-8cpu.lscpu", colour="red")


def test_mutated_files_raise_only_topology_errors():
    """Seeded random damage: a Topology or a TopologyError, nothing else."""
    import random

    from numalab.topology.lscpu import parse_lscpu
    rng = random.Random(7)
    texts = [(DATA / "2s8c2t-x86.lscpu").read_text(), (DATA / "arm64-2n8cluster4co.lscpu").read_text()]
    numactl = (DATA / "2s8c2t-x86.numactl").read_text()
    alphabet = "0123456789,:#-YN xab\n"

    def damage(s):
        s = list(s)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(s))
            s[i:i + rng.randint(0, 3)] = rng.choice(alphabet) * rng.randint(0, 2)
        return "".join(s)

    for k in range(300):
        try:
            parse_lscpu(damage(rng.choice(texts)), "f", damage(numactl) if k % 2 else None, "n")
        except TopologyError:
            pass
