"""The sysfs/procfs snapshot reader, on small synthetic trees and on real dumps."""

from __future__ import annotations

import os
import tarfile
import time
from pathlib import Path

import pytest

from numalab.cpumask import mask_of, parse_cpulist
from numalab.datasets import hwloc_dir
from numalab.errors import TopologyError
from numalab.topology import load
from numalab.topology.sysfs import arch_from_cpuinfo, parse_interrupts, read_dir, read_tar

X86_CPUINFO = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nflags\t\t: fpu\n"
ARM64_CPUINFO = "processor\t: 0\nBogoMIPS\t: 200.00\nCPU implementer\t: 0x48\n" \
                "CPU architecture: 8\n"


def write_tree(base: Path, files: dict[str, str | bytes], links: dict[str, str] = ()) -> Path:
    for rel, data in files.items():
        p = base / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
    for rel, target in dict(links).items():
        p = base / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, p)
    return base


def machine(ncpu=4, threads=2, l2=2, cpuinfo=X86_CPUINFO, nodes=((0, "0-3", 4096),),
            distances=None, cluster=None, extra=None) -> dict[str, str | bytes]:
    """A small dump: ``ncpu`` CPUs, SMT pairs of ``threads``, L2 shared by
    ``l2`` CPUs, given nodes (id, cpulist, MemTotal kB or None)."""
    cpu = "sys/devices/system/cpu"
    f: dict[str, str | bytes] = {
        f"{cpu}/possible": f"0-{ncpu - 1}\n", f"{cpu}/present": f"0-{ncpu - 1}\n",
        f"{cpu}/online": f"0-{ncpu - 1}\n", "proc/cpuinfo": cpuinfo,
        "proc/version": "Linux version 6.8.0-test (x@y) #1 SMP\n",
    }
    for c in range(ncpu):
        t = f"{cpu}/cpu{c}/topology"
        sib = c - c % threads
        f[f"{t}/thread_siblings_list"] = f"{sib}-{sib + threads - 1}\n" if threads > 1 else f"{c}\n"
        f[f"{t}/core_id"] = f"{c // threads}\n"
        f[f"{t}/physical_package_id"] = "0\n"
        f[f"{t}/core_siblings_list"] = f"0-{ncpu - 1}\n"
        if cluster:
            f[f"{t}/cluster_cpus_list"] = cluster[c]
        if l2:
            first = c - c % l2
            f[f"{cpu}/cpu{c}/cache/index2/level"] = "2\n"
            f[f"{cpu}/cpu{c}/cache/index2/type"] = "Unified\n"
            f[f"{cpu}/cpu{c}/cache/index2/shared_cpu_list"] = f"{first}-{first + l2 - 1}\n"
            f[f"{cpu}/cpu{c}/cache/index0/level"] = "1\n"
            f[f"{cpu}/cpu{c}/cache/index0/type"] = "Instruction\n"
            f[f"{cpu}/cpu{c}/cache/index0/shared_cpu_list"] = f"0-{ncpu - 1}\n"
    node = "sys/devices/system/node"
    for i, (nid, cl, mem) in enumerate(nodes):
        f[f"{node}/node{nid}/cpulist"] = cl + "\n"
        if mem is not None:
            f[f"{node}/node{nid}/meminfo"] = (f"Node {nid} MemTotal:  {mem} kB\n"
                                              f"Node {nid} MemFree: 1 kB\n")
        if distances is not None:
            f[f"{node}/node{nid}/distance"] = " ".join(map(str, distances[i])) + "\n"
    f.update(extra or {})
    return f


def dump(tmp_path, files, links=(), name="m1") -> Path:
    return write_tree(tmp_path / name, files, links)


# -- cluster fallback -----------------------------------------------------------

def test_x86_cluster_from_l2(tmp_path):
    topo = read_dir(dump(tmp_path, machine(ncpu=8, threads=2, l2=4, nodes=((0, "0-7", 1),))))
    assert topo.arch == "x86"
    for c in topo.cpus.values():
        assert c.cluster_source == "l2"
        assert c.cluster_cpus == c.l2_cpus == (0xF << (c.id // 4 * 4))
    assert topo.counts()["cluster"] == 2 and topo.counts()["core"] == 4
    assert any("cluster" in n for n in topo.meta["notes"])


def test_x86_cluster_without_l2_falls_back_to_smt(tmp_path):
    topo = read_dir(dump(tmp_path, machine(l2=0)))
    assert {c.cluster_source for c in topo.cpus.values()} == {"smt"}
    assert all(c.cluster_cpus == c.thread_siblings for c in topo.cpus.values())


def test_arm64_cluster_is_the_cpu_alone(tmp_path):
    topo = read_dir(dump(tmp_path, machine(l2=4, cpuinfo=ARM64_CPUINFO)))
    assert topo.arch == "arm64"
    for c in topo.cpus.values():
        assert c.cluster_source == "self" and c.cluster_cpus == 1 << c.id
        assert c.l2_cpus == 0xF          # the L2 is still read, just not used
    assert topo.counts()["cluster"] == 4


def test_cluster_files_win(tmp_path):
    topo = read_dir(dump(tmp_path, machine(cluster=["0-1\n", "0-1\n", "2-3\n", "2-3\n"],
                                           threads=1)))
    assert {c.cluster_source for c in topo.cpus.values()} == {"sysfs"}
    assert topo.cpus[3].cluster_cpus == 0b1100
    assert not any("cluster" in n for n in topo.meta["notes"])


# -- nodes ------------------------------------------------------------------------

def test_missing_node_dir(tmp_path):
    topo = read_dir(dump(tmp_path, machine(nodes=())))
    assert topo.node_ids == [0] and topo.nodes[0].cpus == 0xF
    assert topo.distances == []
    assert all(c.node == 0 for c in topo.cpus.values())
    assert any("no node folders" in n for n in topo.meta["notes"])


def test_memoryless_and_cpuless_nodes_sparse_ids(tmp_path):
    nodes = ((0, "0-3", None), (2, "", 8192), (5, "", 0))
    dist = [[10, 20, 30], [20, 10, 30], [30, 30, 10]]
    topo = read_dir(dump(tmp_path, machine(nodes=nodes, distances=dist)))
    assert topo.node_ids == [0, 2, 5]
    assert topo.nodes[0].memory_bytes is None          # memory-less
    assert topo.nodes[2].cpus == 0 and topo.nodes[2].memory_bytes == 8192 * 1024
    assert topo.distance(2, 5) == 30 and topo.distance(5, 5) == 10


def test_bad_distance_row(tmp_path):
    nodes = tuple((i, f"{i}", 1) for i in range(4))
    dist = [[10, 20, 20, 20], [20, 10, 20], [20, 20, 10, 20], [20, 20, 20, 10]]
    with pytest.raises(TopologyError) as e:
        read_dir(dump(tmp_path, machine(nodes=nodes, distances=dist)))
    assert e.value.path.endswith("m1/sys/devices/system/node/node1/distance")
    assert e.value.problem.startswith("has 3 entries, expected 4: ")


def test_overlapping_node_masks_use_cpu_node_link(tmp_path):
    files = machine(nodes=((0, "0-3", 1), (1, "0-3", 1)))
    for c, n in ((0, 0), (1, 0), (2, 1), (3, 0)):            # 'cpuN/nodeM' entries
        files[f"sys/devices/system/cpu/cpu{c}/node{n}/.keep"] = ""
    topo = read_dir(dump(tmp_path, files))
    assert topo.nodes[0].cpus == 0b1011 and topo.nodes[1].cpus == 0b0100
    assert topo.cpus[2].node == 1
    assert any("overlap" in n for n in topo.meta["notes"])


# -- CPU masks -------------------------------------------------------------------

def test_bad_cpulist(tmp_path):
    files = machine()
    files["sys/devices/system/cpu/online"] = "0-\n"
    with pytest.raises(TopologyError) as e:
        read_dir(dump(tmp_path, files))
    assert e.value.path.endswith("m1/sys/devices/system/cpu/online")
    assert "bad cpulist region '0-'" in str(e.value)


def test_bad_hexmask_names_file(tmp_path):
    files = machine()
    del files["sys/devices/system/node/node0/cpulist"]
    files["sys/devices/system/node/node0/cpumap"] = "zz\n"
    with pytest.raises(TopologyError, match=r"node0/cpumap: bad hex mask chunk"):
        read_dir(dump(tmp_path, files))


def test_non_utf8(tmp_path):
    files = machine()
    files["sys/devices/system/cpu/cpu1/topology/core_id"] = b"\xff\xfe1\n"
    with pytest.raises(TopologyError) as e:
        read_dir(dump(tmp_path, files))
    assert e.value.path.endswith("cpu1/topology/core_id")
    assert "not UTF-8" in e.value.problem


def test_not_an_integer(tmp_path):
    files = machine()
    files["sys/devices/system/cpu/cpu1/topology/core_id"] = "one\n"
    with pytest.raises(TopologyError, match="core_id: not an integer"):
        read_dir(dump(tmp_path, files))


def test_masks_derived_when_absent_and_offline_cpu(tmp_path):
    files = machine()
    for k in ("possible", "present", "online"):
        del files[f"sys/devices/system/cpu/{k}"]
    # cpu3 is offline and, as in old dumps, has no topology folder
    for k in [k for k in files if k.startswith("sys/devices/system/cpu/cpu3/")]:
        del files[k]
    files["sys/devices/system/cpu/cpu3/online"] = "0\n"
    files["sys/devices/system/cpu/cpu2/online"] = "1\n"
    topo = read_dir(dump(tmp_path, files))
    assert topo.possible == topo.present == 0xF
    assert topo.online == 0b0111
    assert sorted(topo.cpus) == [0, 1, 2]
    assert sum("derived" in n or "= the cpuN" in n for n in topo.meta["notes"]) >= 2


def test_online_cpu_without_topology_folder(tmp_path):
    files = {k: v for k, v in machine().items()
             if not k.startswith("sys/devices/system/cpu/cpu3/topology/")}
    topo = read_dir(dump(tmp_path, files))
    c3 = topo.cpus[3]
    assert c3.thread_siblings == c3.package_cpus == 1 << 3
    assert any("without a topology folder" in n for n in topo.meta["notes"])


def test_nul_padded_files(tmp_path):
    files = machine()
    files["sys/devices/system/cpu/online"] = b"0-3\n\0"
    files["sys/devices/system/cpu/cpu0/topology/thread_siblings_list"] = b"0-1\n\0"
    assert read_dir(dump(tmp_path, files)).online == 0xF


# -- layouts and sources -------------------------------------------------------------

def test_dir_forms_and_tar_agree(tmp_path):
    base = dump(tmp_path, machine(), name="box")
    direct = read_dir(base)
    parent = read_dir(tmp_path)
    tb = tmp_path.parent / f"{tmp_path.name}-box.tar.bz2"
    with tarfile.open(tb, "w:bz2") as tf:
        tf.add(base, arcname="box-renamed")
    try:
        from_tar = read_tar(tb)
        via_load = load(tb)
    finally:
        tb.unlink()
    assert direct.meta["name"] == parent.meta["name"] == "box"
    assert from_tar.meta["name"] == "box-renamed"
    assert from_tar.meta["kernel"] == "6.8.0-test"
    keep = ("cpus", "counts", "nodes", "distances", "arch")
    for t in (parent, from_tar, via_load):
        assert {k: t.to_dict()[k] for k in keep} == {k: direct.to_dict()[k] for k in keep}


def test_not_a_dump(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(TopologyError, match="not an hwloc-gather-topology dump"):
        read_dir(tmp_path / "empty")


def test_io_pci_blkmq_irqs(tmp_path):
    dev = "sys/devices/pci0000:00/0000:00:04.0"
    files = machine(extra={
        f"{dev}/class": "0x010802\n", f"{dev}/numa_node": "0\n", f"{dev}/vendor": "0x8086\n",
        f"{dev}/device": "0x0a54\n", f"{dev}/msi_irqs/24": "msix\n",
        f"{dev}/msi_irqs/25": "msix\n", "sys/drivers/nvme/.keep": "",
        "sys/devices/virtual/block/nvme0n1/mq/0/cpu_list": "0, 1\n",
        "sys/devices/virtual/block/nvme0n1/mq/1/cpu_list": "2, 3\n",
        "proc/interrupts": "           CPU0       CPU1       CPU2       CPU3\n"
                           " 24:          5          0          0          1  PCI-MSIX-0000:00:04.0"
                           "   0-edge      nvme0q0\n"
                           "NMI:          0          0          0          0   "
                           "Non-maskable interrupts\n",
        "proc/irq/24/smp_affinity_list": "0-1\n",
        "proc/irq/24/effective_affinity_list": "1\n",
        "proc/irq/25/smp_affinity": "c\n",
    })
    links = {
        "m1/sys/bus/pci/devices/0000:00:04.0": "../../../devices/pci0000:00/0000:00:04.0",
        f"m1/{dev}/driver": "../../../drivers/nvme",
        "m1/sys/block/nvme0n1": "../devices/virtual/block/nvme0n1",
    }
    write_tree(tmp_path, {f"m1/{k}": v for k, v in files.items()}, links)
    topo = read_dir(tmp_path / "m1")
    (pci,) = topo.pci
    assert (pci.address, pci.class_code, pci.numa_node, pci.msi_vectors, pci.vendor,
            pci.driver) == ("0000:00:04.0", 0x010802, 0, 2, 0x8086, "nvme")
    assert topo.blk_mq == {"nvme0n1": [0b0011, 0b1100]}
    irqs = {i.irq: i for i in topo.irqs}
    assert irqs["24"].counts == (5, 0, 0, 1) and irqs["24"].name == "nvme0q0"
    assert irqs["24"].smp_affinity == 0b11 and irqs["24"].effective_affinity == 0b10
    assert irqs["25"].smp_affinity == 0b1100 and irqs["25"].counts == ()
    assert irqs["NMI"].name == "Non-maskable interrupts"
    assert topo.meta["interrupt_cpus"] == [0, 1, 2, 3]


def test_pci_found_under_sys_devices_without_bus_links(tmp_path):
    dev = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"
    topo = read_dir(dump(tmp_path, machine(extra={f"{dev}/class": "0x020000\n",
                                                  f"{dev}/numa_node": "-1\n"})))
    # the bridge 0000:00:01.0 is a PCI function too (this dump kept no class for it)
    assert [(p.address, p.class_code, p.numa_node) for p in topo.pci] == \
        [("0000:00:01.0", 0, -1), ("0000:01:00.0", 0x020000, -1)]


def test_bad_interrupts_header():
    with pytest.raises(TopologyError, match="bad header column"):
        parse_interrupts("  CPU0 XPU1\n", "x/proc/interrupts")


@pytest.mark.parametrize("text, arch", [
    (X86_CPUINFO, "x86"), (ARM64_CPUINFO, "arm64"),
    ("Processor\t: ARMv7 Processor rev 1 (v7l)\nCPU architecture: 7\n", "arm"),
    ("vendor_id       : IBM/S390\n# processors    : 20\n", "s390"),
    ("processor  : 0\nvendor     : GenuineIntel\narch       : IA-64\n", "ia64"),
    ("processor\t: 0\ncpu\t\t: POWER9\ntimebase\t: 512000000\n", "powerpc"),
    ("", "unknown"),
])
def test_arch_from_cpuinfo(text, arch):
    assert arch_from_cpuinfo(text) == arch


# -- real dumps -------------------------------------------------------------------

LINUX = hwloc_dir() / "linux"
needs_shared = pytest.mark.skipif(not LINUX.is_dir(), reason="data/hwloc/linux is missing from the checkout")


@needs_shared
def test_real_arm_clusters_of_four():
    topo = read_tar(LINUX / "128arm-2pa2n8cluster4co.tar.bz2")
    assert topo.arch == "arm64" and len(topo.cpus) == 128
    assert {c.cluster_cpus.bit_count() for c in topo.cpus.values()} == {4}
    assert {c.cluster_source for c in topo.cpus.values()} == {"sysfs"}
    assert topo.counts()["cluster"] == 32
    assert topo.distances[0] == [10, 16, 32, 33]
    assert topo.meta["kernel"].startswith("5.15.0")


@needs_shared
def test_real_ia64_64_nodes():
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        topo = read_tar(LINUX / "256ia64-64n2s2c.tar.bz2")
        best = min(best, time.perf_counter() - t0)
    assert topo.arch == "ia64"
    assert len(topo.nodes) == 64 and len(topo.cpus) == 256
    assert len(topo.distances) == 64 and all(len(r) == 64 for r in topo.distances)
    assert all(topo.distances[i][i] == 10 for i in range(64))
    assert all(topo.nodes[n].cpus.bit_count() == 4 for n in topo.nodes)
    assert best < 1.0, f"reading took {best:.2f} s"


@needs_shared
def test_real_s390_and_old_x86():
    s390 = read_tar(LINUX / "20s390-2g6s4c.tar.bz2")
    assert s390.arch == "s390" and s390.meta["name"] == "20s390-2g2g2s4co"
    assert s390.name == "20s390-2g6s4c"
    assert s390.possible == parse_cpulist("0-63") and s390.online == parse_cpulist("0-19")
    old = read_tar(LINUX / "16em64t-4s2c2t.tar.bz2")
    assert old.counts()["pu"] == 16 and old.counts()["core"] == 8
    assert {c.cluster_source for c in old.cpus.values()} <= {"l2", "smt"}


@needs_shared
def test_real_cpuless_gpu_nodes():
    topo = read_tar(LINUX / "nvidiagpunumanodes.tar.bz2")
    assert topo.arch == "powerpc"
    assert [n for n in topo.node_ids if topo.nodes[n].cpus == 0] == list(range(250, 256))
    # the node lists CPUs the dump's trimmed cpu folder no longer has online
    assert topo.nodes[8].cpus & topo.online == parse_cpulist("88-103")
    assert topo.cpus[88].node == 8


@needs_shared
def test_real_buggy_numa_loads():
    topo = read_tar(LINUX / "8em64t-2s2ca2c-buggynuma.tar.bz2")
    assert all(topo.nodes[n].cpus == mask_of([n]) for n in topo.node_ids)
    assert any("overlap" in n for n in topo.meta["notes"])


def test_error_in_tarball_names_member(tmp_path):
    files = machine()
    files["sys/devices/system/cpu/online"] = "0-\n"
    base = dump(tmp_path, files, name="box")
    tb = tmp_path / "box.tar.bz2"
    with tarfile.open(tb, "w:bz2") as tf:
        tf.add(base, arcname="box")
    with pytest.raises(TopologyError) as e:
        load(tb)
    assert e.value.path == f"{tb}:box/sys/devices/system/cpu/online"
    assert "bad cpulist region '0-'" in e.value.problem


# -- quirks of real dumps that hwloc reads: read, each with a note ----------------------

NODE = "sys/devices/system/node"
CPU = "sys/devices/system/cpu"


def _notes(topo, piece):
    return [n for n in topo.meta["notes"] if piece in n]


def test_empty_cpu_online_file_is_online(tmp_path):
    """An Itanium Superdome dump: no cpu/online (old kernel) and cpu0/online
    empty. hwloc's look_sysfscpu() keeps a CPU whose file reads 0 bytes."""
    files = machine()
    del files[f"{CPU}/online"]
    files[f"{CPU}/cpu0/online"] = ""
    files[f"{CPU}/cpu1/online"] = "1\n"
    files[f"{CPU}/cpu2/online"] = "0\n"          # a real offline CPU stays offline
    files[f"{CPU}/cpu3/online"] = b"\0"           # NUL padding alone: no digit either
    topo = read_dir(dump(tmp_path, files))
    assert topo.online == 0b1011 and sorted(topo.cpus) == [0, 1, 3]
    assert _notes(topo, "empty cpuN/online file for CPU(s) 0,3")


def test_no_online_cpu_is_refused(tmp_path):
    files = machine()
    del files[f"{CPU}/online"]
    for c in range(4):
        files[f"{CPU}/cpu{c}/online"] = "0\n"
    with pytest.raises(TopologyError, match="no online CPU"):
        read_dir(dump(tmp_path, files))


def test_distance_row_per_possible_node_picks_the_right_columns(tmp_path):
    """node1 offline in the middle: the rows list possible nodes 0, 1, 2.
    hwloc keeps the first two entries (10 15 / 30 25); the kernel's own
    columns for nodes 0 and 2 are the first and the third."""
    files = machine(nodes=((0, "0-1", 1), (2, "2-3", 1)),
                    distances=[[10, 15, 30], [30, 25, 10]])
    files[f"{NODE}/online"] = "0,2\n"
    files[f"{NODE}/possible"] = "0-2\n"
    topo = read_dir(dump(tmp_path, files))
    assert topo.node_ids == [0, 2]
    assert topo.distances == [[10, 30], [30, 10]]
    assert _notes(topo, "one per possible node (node/possible 0-2)")


def test_distance_row_longer_without_possible_file_uses_node_ids(tmp_path):
    """The dump in the issue: one node left, its row '10 20', and no
    node/possible to say more: entry i is node i."""
    files = machine(distances=[[10, 20]])
    topo = read_dir(dump(tmp_path, files))
    assert topo.node_ids == [0] and topo.distances == [[10]]
    assert _notes(topo, "one per node id 0-1")


def test_online_node_without_folder_sparse_ids(tmp_path):
    files = machine(nodes=((0, "0-1", 1), (2, "2-3", 1)),
                    distances=[[10, 21, 31], [31, 22, 10]])
    files[f"{NODE}/online"] = "0-2\n"
    files[f"{NODE}/possible"] = "0-3\n"
    topo = read_dir(dump(tmp_path, files))
    assert topo.node_ids == [0, 2] and topo.distances == [[10, 31], [31, 10]]
    assert _notes(topo, "node/online lists node(s) 1 that have no folder")
    assert _notes(topo, "one per online node")


def test_offline_node_folder_is_not_read(tmp_path):
    """A folder that node/online does not list is an offline node: hwloc's
    list_sysfsnode() takes its nodes from node/online."""
    files = machine(nodes=((0, "0-3", 1), (1, "", 1)), distances=[[10], [10]])
    files[f"{NODE}/online"] = "0\n"
    topo = read_dir(dump(tmp_path, files))
    assert topo.node_ids == [0] and topo.distances == [[10]]
    assert _notes(topo, "node folder(s) 1 not in node/online (0)")


def test_rows_of_different_lengths_are_refused(tmp_path):
    files = machine(nodes=((0, "0-1", 1), (1, "2-3", 1)), distances=[[10, 20, 30], [20, 10]])
    with pytest.raises(TopologyError) as e:
        read_dir(dump(tmp_path, files))
    assert e.value.path.endswith("node/node0/distance")
    assert e.value.problem.startswith("has 3 entries, expected 2")


def test_missing_distance_file_drops_the_matrix(tmp_path):
    files = machine(nodes=((0, "0", 1), (1, "1", 1), (2, "2-3", 1)),
                    distances=[[10, 30, 40], [30, 10, 40], [40, 40, 10]])
    del files[f"{NODE}/node2/distance"]
    topo = read_dir(dump(tmp_path, files))
    assert topo.distances == [] and topo.distance(0, 2) == 20
    assert _notes(topo, "distance file missing or empty for node(s) 2")


def test_empty_number_files_read_as_missing(tmp_path):
    files = machine()
    files[f"{CPU}/cpu1/topology/physical_package_id"] = "\n"
    del files[f"{CPU}/cpu1/topology/thread_siblings_list"]
    files[f"{CPU}/cpu1/topology/thread_siblings"] = ""        # the hex form, empty
    files["sys/bus/pci/devices/0000:00:01.0/numa_node"] = ""
    files["sys/bus/pci/devices/0000:00:01.0/class"] = "0x010802\n"
    topo = read_dir(dump(tmp_path, files))
    assert topo.cpus[1].package == 0 and topo.cpus[1].thread_siblings == 1 << 1
    assert [p.numa_node for p in topo.pci] == [-1]
    assert _notes(topo, "3 empty file(s) where the kernel prints a number or a hex mask")


def test_missing_topology_files_are_noted(tmp_path):
    files = machine()
    for c in (2, 3):
        del files[f"{CPU}/cpu{c}/topology/thread_siblings_list"]
        del files[f"{CPU}/cpu{c}/topology/core_id"]
    topo = read_dir(dump(tmp_path, files))
    assert topo.cpus[2].thread_siblings == 1 << 2 and topo.cpus[2].core == 0
    assert _notes(topo, "core_id for CPU(s) 2-3; thread_siblings for CPU(s) 2-3")
    assert not _notes(read_dir(dump(tmp_path, machine(), name="m2")), "topology files missing")


@needs_shared
def test_real_ps3_topology_files_missing_noted():
    topo = read_tar(LINUX / "2ps3-2t.tar.bz2")
    assert _notes(topo, "physical_package_id for CPU(s) 0-1")


def test_show_prints_and_exports_the_notes(tmp_path, capsys):
    from numalab.cli import main

    files = machine(distances=[[10, 20]])              # a row with a possible node's entry
    path = str(dump(tmp_path, files))
    assert main(["show", path]) == 0
    text = capsys.readouterr().out
    assert "  note: node distance rows have 2 entries for 1 node(s) read" in text
    assert main(["show", "--json", path]) == 0
    import json
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any("one per node id 0-1" in n for n in notes)


def test_huge_node_id_in_a_note_builds_no_mask(tmp_path):
    """Found by fuzzing: a node99999999999 folder (a legal name) once made a
    note build a 12 GB mask to print the node list."""
    files = machine(nodes=((0, "0-3", 1), (99999999999, "", 1)))
    files[f"{NODE}/node0/distance"] = "10 20\n"
    topo = read_dir(dump(tmp_path, files))
    assert topo.node_ids == [0, 99999999999] and topo.distances == []
    assert _notes(topo, "distance file missing or empty for node(s) 99999999999")
