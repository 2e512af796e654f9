"""group_cpus_evenly() per kernel version: what real kernels did, and what
changed from the first port.

The acceptance facts come from real kernels booted in QEMU (issue 13): a
7.2 guest's blk-mq map, the CPUs that carry six dedicated IRQs on the
patch-004 example shape, and the order of two equal clusters on a 12-CPU
3-node guest. The per-version replay against each kernel's C is in
tests/test_group_cpus.py and tests/test_sort.py.
"""

from __future__ import annotations

import pytest

from numalab.cpumask import format_cpulist
from numalab.kernel import versions
from numalab.kernel.lib.group_cpus import group_cpus_evenly, spread_devices
from numalab.models.irq.blkmq import blk_mq_map_queues
from numalab.models.irq.load import irq_load
from numalab.topology import load
from numalab.topology.model import CPU, Node, Topology

# The first port: lib/group_cpus.c of the cluster-path merge (136114e0abf0)
# with the older stored lib/sort.c (072cf06e35eb). No released kernel pairs
# them; the kernel-C harness reproduces all 859 of the first harness's
# results by compiling 7.2's group_cpus.c with 6.1's sort.c (README there).
FIRST_PORT = versions.KernelText("first-port", "single-pop", True, True, True,
                                 "torvalds/linux 136114e0abf0 + lib/sort.c 072cf06e35eb")


@pytest.fixture
def first_port(monkeypatch):
    monkeypatch.setitem(versions.SOURCES, FIRST_PORT.version, FIRST_PORT)
    return FIRST_PORT.version


# -- versions ------------------------------------------------------------------------------

def test_release_strings_resolve_to_modelled_versions():
    assert versions.parse_release("7.2.13+deb14-amd64") == "7.2"
    assert versions.parse_release("6.12.100+deb12-amd64") == "6.12"
    assert versions.resolve("linux-image-6.1.0-31-amd64") == "6.1"
    assert versions.resolve("6.12") == "6.12"
    assert versions.resolve(None) == versions.NEWEST == versions.KNOWN[-1] == "7.2"
    for bad in ("6.6", "5.15.0-1", "seven", ""):
        with pytest.raises(versions.UnknownKernelError, match="modelled kernels: 6.1, 6.12, 7.2"):
            versions.resolve(bad)


def test_texts_differ_where_the_sources_do():
    t = {k: versions.text(k) for k in versions.KNOWN}
    assert [t[k].heapsort for k in versions.KNOWN] == ["single-pop", "double-pop", "double-pop"]
    assert [t[k].cluster_path for k in versions.KNOWN] == [False, False, True]
    assert [t[k].nummasks for k in versions.KNOWN] == [False, False, True]
    assert [t[k].zero_check for k in versions.KNOWN] == [False, True, True]


def test_default_is_the_newest_kernel():
    t = load("numa:2 core:24 pu:2")
    g = group_cpus_evenly(62, t)
    assert g.kernel == "7.2" and list(g) == list(group_cpus_evenly(62, t, kernel="7.2"))
    assert list(g) != list(group_cpus_evenly(62, t, kernel="6.12"))


# -- fact 1: a 7.2 guest's blk-mq map --------------------------------------------------------

def test_7_2_blk_mq_map_of_a_16_cpu_smt_guest():
    # -smp 16,sockets=2,cores=4,threads=2, two NUMA nodes, 6 queues:
    # /sys/block/nvme0n1/mq/{0..5}/cpu_list of a 7.2 guest
    t = load("numa:2 core:4 pu:2")
    g = group_cpus_evenly(6, t, kernel="7.2")
    assert [format_cpulist(m) for m in g] == ["8-10", "11-13", "14-15", "0-2", "3-5", "6-7"]
    mq = blk_mq_map_queues(6, t)
    assert [format_cpulist(sum(1 << c for c, q in mq.items() if q == h)) for h in range(6)] == \
           ["8-10", "11-13", "14-15", "0-2", "3-5", "6-7"]


# -- fact 2: the patch-004 example shape on 7.2 ------------------------------------------------

def _six_dedicated(topo, kernel):
    devs = spread_devices(62, topo, 6, "mainline", kernel=kernel)
    load_ = irq_load(devs, topo.possible)
    return format_cpulist(sum(1 << c for c, d in zip(load_.cpus, load_.dedicated) if d == 6))


@pytest.mark.parametrize("shape", ["numa:2 core:24 pu:2", "numa:2 cluster:24 core:2 pu:1"])
def test_7_2_stacks_six_dedicated_irqs_on_these_28_cpus(shape, first_port):
    # 96 vCPUs, 2 nodes, 24 clusters of 2 per node (an x86 guest's cluster is its
    # L2: the SMT pair), 6 NVMe of 62 I/O queues; a 7.2 guest's masks
    t = load(shape)
    assert _six_dedicated(t, "7.2") == "0-1,4-5,38-49,52-53,86-95"
    # the first port's sort put the same 28 elsewhere
    assert _six_dedicated(t, first_port) == "0-1,36-49,84-95"
    # without the cluster path the last 14 CPUs of each node take them
    assert _six_dedicated(t, "6.1") == _six_dedicated(t, "6.12") == "34-47,82-95"


# -- fact 3: two equal clusters of a 12-CPU 3-node guest ----------------------------------------

def _guest(node_sizes, smt=2):
    """An x86 guest whose CPUs are numbered node by node, SMT pairs
    adjacent, each pair its own cluster (L2)."""
    cpus, nodes, c = {}, {}, 0
    for n, size in enumerate(node_sizes):
        for _ in range(size):
            core = ((1 << smt) - 1) << (c - c % smt)
            cpus[c] = CPU(id=c, node=n, thread_siblings=core, cluster_cpus=core)
            nodes[n] = nodes.get(n, 0) | 1 << c
            c += 1
    every = (1 << c) - 1
    return Topology(name=f"guest {node_sizes}", arch="x86", possible=every, present=every,
                    online=every, cpus=cpus, nodes={n: Node(id=n, cpus=m) for n, m in nodes.items()})


def _first_group(masks, cpus):
    return min(i for i, m in enumerate(masks) if m & cpus)


@pytest.mark.parametrize("sizes", [(6, 4, 2), (6, 2, 4)])
@pytest.mark.parametrize("groups", range(5, 13))
def test_7_2_puts_cluster_4_5_before_2_3(sizes, groups, first_port):
    # node 0 = CPUs 0-5: three equal clusters; with 3 or more groups for node 0
    # the cluster path sorts them, and 7.2's heapsort orders 3 equal keys 2,1,0
    t = _guest(sizes)
    g72 = group_cpus_evenly(groups, t, kernel="7.2")
    assert _first_group(g72, 0b110000) < _first_group(g72, 0b1100) < _first_group(g72, 0b11)
    old = group_cpus_evenly(groups, t, kernel=first_port)
    assert _first_group(old, 0b1100) < _first_group(old, 0b110000) < _first_group(old, 0b11)
    # 6.1 and 6.12 have no cluster path: node 0's CPUs in id order
    for k in ("6.1", "6.12"):
        g = group_cpus_evenly(groups, t, kernel=k)
        assert _first_group(g, 0b11) < _first_group(g, 0b1100) < _first_group(g, 0b110000)


# -- 6.1 and the first port's results ----------------------------------------------------------

def test_6_1_sorts_like_the_first_port(first_port):
    # same heapsort: wherever the cluster path is not taken, the first port's
    # masks are 6.1's (node order of equal nodes included)
    for shape, groups in [("numa:2 core:4 pu:2", 4), ("numa:4 core:3 pu:1", 6),
                          ("numa:2 core:24 pu:2", 3), ("pack:2 numa:2 core:4 pu:1", 4)]:
        t = load(shape)
        assert list(group_cpus_evenly(groups, t, kernel="6.1")) == \
               list(group_cpus_evenly(groups, t, kernel=first_port))
    t = load("numa:2 core:4 pu:2")
    assert [hex(m) for m in group_cpus_evenly(4, t, kernel="6.1")] == \
           ["0xf00", "0xf000", "0xf", "0xf0"]
    # two equal keys: both heapsorts swap them, so 6.12 agrees here
    assert [hex(m) for m in group_cpus_evenly(4, t, kernel="6.12")] == \
           ["0xf00", "0xf000", "0xf", "0xf0"]


def test_first_port_expectations_that_moved(first_port):
    # tests/test_blkmq.py's single-node case: 4 one-CPU clusters
    t = load("numa:1 core:4 pu:1")
    assert list(group_cpus_evenly(6, t, kernel=first_port))[:4] == [0b10, 0b100, 0b1000, 0b1]
    assert list(group_cpus_evenly(6, t, kernel="7.2"))[:4] == [0b10, 0b1000, 0b100, 0b1]


def test_6_x_has_no_nummasks_and_warns_on_short_groupings():
    t = load("numa:1 core:4 pu:1")
    for k in ("6.1", "6.12"):
        g = group_cpus_evenly(6, t, kernel=k)
        assert g.nummasks == 6 and g.warnings == 1        # WARN_ON(nr_present + nr_others < numgrps)
        assert [m.bit_count() for m in g] == [1, 1, 1, 1, 0, 0]
    g = group_cpus_evenly(6, t, kernel="7.2")
    assert g.nummasks == 4 and g.warnings == 0
