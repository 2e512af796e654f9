"""The synthetic reader and the machine descriptions in data/machines/."""

from pathlib import Path

import pytest

from numalab.cpumask import format_cpulist, parse_cpulist, weight
from numalab.errors import TopologyError
from numalab.topology import load
from numalab.topology.synthetic import from_synthetic, parse_levels, read_description

MACHINES = Path(__file__).resolve().parent.parent / "data" / "machines"


def cpulists(t):
    return [format_cpulist(t.nodes[n].cpus) for n in t.node_ids]


def test_levels_aliases_and_implicit_pu():
    assert parse_levels("Socket:2 NUMANode:1 L3Cache:1 core:4") == [
        ("package", 2), ("numa", 1), ("l3", 1), ("core", 4), ("pu", 1)]


def test_linear_numbering_counts_and_siblings():
    t = from_synthetic("pack:2 numa:1 core:8 pu:2")     # x86 by default: cluster = SMT pair
    assert t.counts() == {"pu": 32, "core": 16, "cluster": 16, "die": 2, "package": 2, "numa": 2}
    assert cpulists(t) == ["0-15", "16-31"]
    assert t.cpus[5].thread_siblings == 0b110000      # CPUs 4,5 share a core
    assert t.cpus[17].package == 1 and t.cpus[17].core == 0
    assert t.distances == [[10, 20], [20, 10]]
    assert t.nodes[0].memory_bytes == 16 << 30


def test_smt_apart_numbering_matches_x86():
    t = from_synthetic("pack:2 numa:1 core:64 pu:2", numbering="smt-apart")
    assert cpulists(t) == ["0-63,128-191", "64-127,192-255"]
    assert t.cpus[3].thread_siblings == (1 << 3) | (1 << 131)
    assert len(t.cores()) == 128


def test_numa_at_any_depth_and_missing_package():
    t = from_synthetic("numa:2 core:4 pu:2")
    assert t.counts()["package"] == 1 and t.counts()["numa"] == 2
    t = from_synthetic("pack:1 l3:2 numa:1 core:3 pu:1")    # two nodes inside one package
    assert cpulists(t) == ["0-2", "3-5"]
    assert t.cpus[0].llc_cpus == 0b111


def test_cluster_rules():
    t = from_synthetic("numa:2 cluster:24 core:2 pu:1")
    assert len(t.clusters()) == 48 and t.cpus[0].cluster_source == "synthetic"
    assert t.cpus[95].cluster_cpus == 0b11 << 94
    x86 = from_synthetic("pack:1 l2:4 core:2 pu:2", arch="x86")   # L2 shared by 2 cores
    assert x86.cpus[0].cluster_cpus == 0xF and x86.cpus[0].cluster_source == "l2"
    arm = from_synthetic("pack:1 l2:4 core:2 pu:2", arch="arm64")
    assert arm.cpus[0].cluster_cpus == 1 and arm.cpus[0].cluster_source == "self"
    # x86 without an l2 level: match_l2c() falls back to the SMT siblings
    bare = from_synthetic("pack:1 core:4 pu:2", arch="x86")
    assert bare.cpus[2].cluster_cpus == 0b1100 and bare.cpus[2].cluster_source == "smt"
    assert from_synthetic("pack:1 core:4 pu:2", arch="ia64").cpus[2].cluster_cpus == 0b100


def test_possible_extra_and_distances():
    t = from_synthetic("numa:2 core:4", possible_extra=4,
                       distances=[[10, 21], [21, 10]], memory=[1 << 30, 2 << 30])
    assert format_cpulist(t.possible) == "0-11" and format_cpulist(t.present) == "0-7"
    assert len(t.cpus) == 8 and t.nr_cpu_ids == 12
    assert t.distance(0, 1) == 21 and t.nodes[1].memory_bytes == 2 << 30


@pytest.mark.parametrize("text, message", [
    ("pack:2 blob:3 pu:2", "unknown level"),
    ("pack:0 pu:2", "at least 1"),
    ("pack:x pu:2", "not an integer"),
    ("pack:2 pu:2 core:2", "pu must be the last"),
    ("core:2 core:2", "appears twice"),
    ("core:2 pack:2", "out of order"),
    ("core:2 numa:2 pu:1", "numa must be above core"),
    ("numa:2(memory=1GB) pu:1", "not supported"),
    ("", "empty"),
])
def test_bad_strings(text, message):
    with pytest.raises(TopologyError, match=message.replace("(", r"\(")):
        from_synthetic(text)


@pytest.mark.parametrize("dist, message", [
    ([[10, 20, 20], [20, 10, 20]], "not 2x2"),
    ([[10, 21], [22, 10]], "not symmetric"),
    ([[10, 0], [0, 10]], "node0->node1 is 0"),
    ([[11, 20], [20, 10]], "not 10"),
    ([[10, "far"], ["far", 10]], "not an integer"),
])
def test_bad_distances(dist, message):
    with pytest.raises(TopologyError, match=message):
        from_synthetic("numa:2 core:2", distances=dist)


def test_bad_options():
    with pytest.raises(TopologyError, match="numbering"):
        from_synthetic("numa:2 core:2", numbering="random")
    with pytest.raises(TopologyError, match="possible_extra"):
        from_synthetic("numa:2 core:2", possible_extra=-1)


def test_load_dispatches_synthetic_strings():
    t = load("synthetic:pack:2 core:2 pu:1")
    assert t.counts()["package"] == 2


# -- .toml descriptions -------------------------------------------------------

def write(tmp_path, text, name="m.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_description_keys(tmp_path):
    p = write(tmp_path, 'name = "box"\nsynthetic = "pack:2 numa:1 core:2 pu:2"\n'
                        'numbering = "smt-apart"\ndistances = [[10, 21], [21, 10]]\n'
                        'memory_gib = 4\npossible_extra = 2\nsource = "here"\nnote = "n"\n')
    t = read_description(p)
    assert t.name == "box" and cpulists(t) == ["0-1,4-5", "2-3,6-7"]
    assert t.distance(1, 0) == 21 and t.nodes[0].memory_bytes == 4 << 30
    assert weight(t.possible) == 10 and t.meta["facts_source"] == "here"
    assert read_description(p, numbering="linear").nodes[0].cpus == 0xF   # options override


@pytest.mark.parametrize("text, message", [
    ('synthetic = "core:2"\nsynthtic = "x"\n', "unknown key 'synthtic'"),
    ('name = "x"\n', "missing key 'synthetic'"),
    ('synthetic = 3\n', "wrong type"),
    ('synthetic = "core:2\n', "not valid TOML"),
    ('synthetic = "numa:2 core:2"\ndistances = [[10, 20]]\n', "not 2x2"),
    ('synthetic = "core:2"\nmemory_gib = ["a"]\n', "memory_gib"),
])
def test_bad_descriptions(tmp_path, text, message):
    with pytest.raises(TopologyError, match=message) as e:
        read_description(write(tmp_path, text))
    assert "m.toml" in str(e.value)


def test_description_not_utf8(tmp_path):
    p = tmp_path / "b.toml"
    p.write_bytes(b'synthetic = "\xff"\n')
    with pytest.raises(TopologyError, match="not UTF-8"):
        read_description(p)


# -- the seed machines ------------------------------------------------------------

def machine(name):
    return load(str(MACHINES / f"{name}.toml"))


def test_every_description_loads_and_cites_its_source():
    files = sorted(MACHINES.glob("*.toml"))
    assert len(files) >= 5
    for f in files:
        t = load(str(f))
        assert t.meta["facts_source"].strip() and t.meta["note"].strip(), f.name
        assert "Assumed" in t.meta["note"], f.name


def test_epyc_9a64_published_node_lists():
    t = machine("epyc-9a64")
    assert len(t.cpus) == 256 and len(t.nodes) == 2
    assert cpulists(t) == ["0-63,128-191", "64-127,192-255"]
    # x86 cluster = L2 sharers = the SMT pair
    assert t.cpus[0].cluster_cpus == t.cpus[0].thread_siblings == (1 | 1 << 128)


def test_hyperv_96vcpu():
    t = machine("hyperv-96vcpu")
    assert len(t.cpus) == 96 and len(t.nodes) == 2
    clusters = t.clusters()
    assert len(clusters) == 48 and {weight(m) for m in clusters} == {2}


def test_irq_example_96():
    t = machine("irq-example-96")
    assert len(t.cpus) == 96 and len(t.nodes) == 2
    assert len(t.clusters()) == 48 and {weight(m) for m in t.clusters()} == {2}
    per_node = t.to_dict()["nodes"]
    assert [n["clusters"] for n in per_node] == [24, 24]


def test_dgx_b200():
    t = machine("dgx-b200")
    assert len(t.cpus) == 224 and len(t.cores()) == 112 and len(t.nodes) == 2
    assert t.nodes[0].cpus == parse_cpulist("0-55,112-167")


def test_dgx_1():
    t = machine("dgx-1")
    assert len(t.cores()) == 40 and len(t.nodes) == 2 and len(t.cpus) == 80
