"""The port of the scheduler's NUMA hop masks and node-distance walks."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numalab.cpumask import mask_of, parse_cpulist
from numalab.kernel.sched.topology import (
    NUMA_NO_NODE, for_each_node_numadist, for_each_numa_hop_mask, nearest_node_nodemask,
    node_distance, numa_hop_order, numa_nearest_node, sched_init_numa,
    sched_numa_find_closest, sched_numa_find_nth_cpu, sched_numa_hop_mask)
from numalab.topology.model import CPU, Node, Topology


def machine(node_cpus, distances=None, online=None, name="test"):
    """A topology from ``{node: cpulist}``; every CPU online unless told."""
    nodes, cpus = {}, {}
    for n, lst in node_cpus.items():
        m = parse_cpulist(lst)
        nodes[n] = Node(n, m, 1 << 30)
        for c in range(m.bit_length()):
            if m >> c & 1:
                cpus[c] = CPU(id=c, node=n, thread_siblings=1 << c)
    allcpus = mask_of(cpus)
    return Topology(name=name, possible=allcpus, present=allcpus,
                    online=allcpus if online is None else online,
                    cpus=cpus, nodes=nodes, distances=distances or []).validate(allow_asymmetric=True)


RING = [[10, 20, 30, 20],
        [20, 10, 20, 30],
        [30, 20, 10, 20],
        [20, 30, 20, 10]]


def ring():
    return machine({0: "0-1", 1: "2-3", 2: "4-5", 3: "6-7"}, RING)


# -- hand-checked cases ------------------------------------------------------

def test_ring_levels_and_masks():
    # The 4-node ring from the comment above build_balance_mask() in
    # kernel/sched/topology.c: node 0 reaches 1 and 3 in one hop, 2 in two.
    s = sched_init_numa(ring())
    assert s.distances == [10, 20, 30]
    assert s.levels == 3 and s.max_distance == 30
    assert [sched_numa_hop_mask(s, 0, h) for h in range(3)] == [0x03, 0xCF, 0xFF]
    assert [sched_numa_hop_mask(s, 2, h) for h in range(3)] == [0x30, 0xFC, 0xFF]
    assert sched_numa_hop_mask(s, 0, 3) is None          # -EINVAL past the last level
    assert sched_numa_hop_mask(s, 4, 0) is None          # -EINVAL past nr_node_ids
    assert list(for_each_numa_hop_mask(s, 1)) == [0x0C, 0x3F, 0xFF]
    assert s.warnings == []


def test_ring_numadist_and_hop_order():
    t = ring()
    assert list(for_each_node_numadist(t, 0)) == [0, 1, 3, 2]
    assert list(for_each_node_numadist(t, 3)) == [3, 0, 2, 1]
    assert numa_hop_order(t, 0) == [[0], [1, 3], [2]]
    assert numa_hop_order(t, 1) == [[1], [0, 2], [3]]
    # the sched_ext caller clears the start node first: it is then never visited
    assert list(for_each_node_numadist(t, 0, unvisited=0b1110)) == [1, 3, 2]


def test_two_nodes_without_matrix_use_10_20():
    t = machine({0: "0-3", 1: "4-7"})
    assert node_distance(t, 0, 1) == 20 and node_distance(t, 1, 1) == 10
    s = sched_init_numa(t)
    assert s.distances == [10, 20]
    assert list(for_each_numa_hop_mask(s, 1)) == [0xF0, 0xFF]
    assert list(for_each_node_numadist(t, 1)) == [1, 0]


def test_single_node():
    t = machine({0: "0-3"})
    s = sched_init_numa(t)
    assert s.distances == [10]
    assert list(for_each_numa_hop_mask(s, 0)) == [0xF]
    assert list(for_each_node_numadist(t, 0)) == [0]
    assert numa_hop_order(t, 0) == [[0]]


def test_ties_go_to_the_lowest_node_id():
    # nodes 1, 2, 3 are all at 21 from node 0; 2 and 3 are at 11 from each other
    d = [[10, 21, 21, 21],
         [21, 10, 21, 21],
         [21, 21, 10, 11],
         [21, 21, 11, 10]]
    t = machine({0: "0", 1: "1", 2: "2", 3: "3"}, d)
    assert list(for_each_node_numadist(t, 0)) == [0, 1, 2, 3]
    assert list(for_each_node_numadist(t, 3)) == [3, 2, 0, 1]
    assert nearest_node_nodemask(t, 0, 0b1110) == 1
    s = sched_init_numa(t)
    assert s.distances == [10, 11, 21]
    # node 0 gains nothing at distance 11: its hop 1 mask equals its hop 0 mask
    assert list(for_each_numa_hop_mask(s, 0)) == [0b0001, 0b0001, 0b1111]
    assert list(for_each_numa_hop_mask(s, 2)) == [0b0100, 0b1100, 0b1111]


def test_patch_example_numadist_order():
    # The asymmetric-looking 4-node table from the for_each_node_numadist()
    # series' example: from node 0 the order is 0, 2, 3, 1.
    d = [[10, 51, 31, 41], [51, 10, 21, 61], [31, 21, 10, 11], [41, 61, 11, 10]]
    t = machine({0: "0", 1: "1", 2: "2", 3: "3"}, d)
    assert list(for_each_node_numadist(t, 0)) == [0, 2, 3, 1]
    assert numa_hop_order(t, 0) == [[0], [2], [3], [1]]


def test_cpuless_node():
    # node 2 is memory only: it adds no distance level and has no hop masks,
    # but the node walk (which is about memory too) still visits it.
    d = [[10, 20, 15],
         [20, 10, 25],
         [15, 25, 10]]
    t = machine({0: "0-1", 1: "2-3", 2: ""}, d)
    s = sched_init_numa(t)
    assert s.distances == [10, 20]            # 15 and 25 involve node 2 only
    assert sched_numa_hop_mask(s, 2, 0) is None
    assert list(for_each_numa_hop_mask(s, 2)) == []
    assert list(for_each_numa_hop_mask(s, 0)) == [0b0011, 0b1111]
    assert list(for_each_node_numadist(t, 0)) == [0, 2, 1]
    assert list(for_each_node_numadist(t, 2)) == [2, 0, 1]
    # cpumask_local_spread() from a CPU-less node starts at its nearest CPU node
    assert numa_nearest_node(t, 2, s.cpu_nodes) == 0
    assert [sched_numa_find_nth_cpu(s, t, 0xF, i, 2) for i in range(5)] == [0, 1, 2, 3, None]


def test_offline_cpus_leave_the_masks_and_an_all_offline_node_leaves_n_cpu():
    # node 1's CPUs are all offline, node 0 has CPU 1 offline
    t = machine({0: "0-1", 1: "2-3", 2: "4-5"},
                [[10, 20, 30], [20, 10, 20], [30, 20, 10]], online=0b110001)
    s = sched_init_numa(t)
    assert s.distances == [10, 30]             # 20 came only from node 1
    assert list(for_each_numa_hop_mask(s, 0)) == [0b000001, 0b110001]
    assert sched_numa_hop_mask(s, 1, 0) is None


def test_offline_node_argument_removes_that_node():
    s = sched_init_numa(ring(), offline_node=2)
    assert s.distances == [10, 20, 30]          # 1-3 are still 30 apart
    assert sched_numa_hop_mask(s, 2, 0) is None
    assert list(for_each_numa_hop_mask(s, 0)) == [0x03, 0xCF, 0xCF]


def test_asymmetric_distances_use_the_row_of_the_start_node():
    d = [[10, 15, 30],
         [30, 10, 30],
         [30, 30, 10]]
    t = machine({0: "0", 1: "1", 2: "2"}, d)
    s = sched_init_numa(t)
    assert s.distances == [10, 15, 30]
    assert "Node-distance not symmetric" in s.warnings
    # node 0 reaches node 1 at 15; node 1 reaches node 0 only at 30
    assert list(for_each_numa_hop_mask(s, 0)) == [0b001, 0b011, 0b111]
    assert list(for_each_numa_hop_mask(s, 1)) == [0b010, 0b010, 0b111]
    assert list(for_each_node_numadist(t, 1)) == [1, 0, 2]   # tie at 30: lower id


def test_invalid_distance_leaves_no_levels():
    t = machine({0: "0", 1: "1"}, [[10, 300], [300, 10]])
    s = sched_init_numa(t)
    assert s.levels == 0 and s.warnings == ["Invalid distance value range"]
    assert list(for_each_numa_hop_mask(s, 0)) == []


def test_numa_no_node_yields_the_online_mask_once():
    s = sched_init_numa(ring())
    assert list(for_each_numa_hop_mask(s, NUMA_NO_NODE)) == [0xFF]


def test_sparse_node_ids():
    t = machine({0: "0-1", 4: "2-3"}, [[10, 32], [32, 10]])
    s = sched_init_numa(t)
    assert s.nr_node_ids == 5
    assert sched_numa_hop_mask(s, 4, 0) == 0b1100
    assert sched_numa_hop_mask(s, 2, 0) is None       # below nr_node_ids, no node
    assert list(for_each_node_numadist(t, 4)) == [4, 0]


def test_find_closest_and_nth_cpu_on_the_ring():
    t, s = ring(), sched_init_numa(ring())
    assert sched_numa_find_closest(s, t, 0xF0, 0) == 6      # node 3 (hop 1) before node 2
    assert sched_numa_find_closest(s, t, 0x30, 0) == 4
    assert sched_numa_find_closest(s, t, 0, 0) is None
    order = [sched_numa_find_nth_cpu(s, t, 0xFF, i, 0) for i in range(9)]
    assert order == [0, 1, 2, 3, 6, 7, 4, 5, None]
    assert [sched_numa_find_nth_cpu(s, t, 0b01010101, i, 2) for i in range(4)] == [4, 2, 6, 0]


# -- invariants on random machines -------------------------------------------

@st.composite
def random_machine(draw):
    n = draw(st.integers(1, 7))
    vals = st.integers(11, 60)
    d = [[10] * n for _ in range(n)]
    for i, j in itertools.combinations(range(n), 2):
        d[i][j] = d[j][i] = draw(vals)
    sizes = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    node_cpus, c = {}, 0
    for i, k in enumerate(sizes):
        node_cpus[i] = f"{c}-{c + k - 1}" if k else ""
        c += k
    return machine(node_cpus, d)


@settings(max_examples=150, deadline=None)
@given(random_machine())
def test_hop_masks_grow_and_end_with_every_online_cpu(t):
    s = sched_init_numa(t)
    assert s.distances == sorted(set(s.distances))
    all_cpus = 0
    for n in t.nodes.values():
        all_cpus |= n.cpus
    for node in t.node_ids:
        masks = list(for_each_numa_hop_mask(s, node))
        if not t.nodes[node].cpus:
            assert masks == []
            continue
        assert len(masks) == s.levels
        assert masks[0] == t.nodes[node].cpus          # hop 0 is the node itself
        for a, b in zip(masks, masks[1:]):
            assert a & ~b == 0                         # each hop contains the last
        assert masks[-1] == all_cpus
        # and each hop holds exactly the nodes within that distance
        for h, m in enumerate(masks):
            want = 0
            for k in t.node_ids:
                if node_distance(t, node, k) <= s.distances[h]:
                    want |= t.nodes[k].cpus
            assert m == want


@settings(max_examples=150, deadline=None)
@given(random_machine())
def test_numadist_visits_each_node_once_in_non_decreasing_distance(t):
    for node in t.node_ids:
        walk = list(for_each_node_numadist(t, node))
        assert sorted(walk) == t.node_ids
        assert walk[0] == node
        dist = [node_distance(t, node, n) for n in walk]
        assert dist == sorted(dist)
        # ties are broken by node id
        assert walk == sorted(walk, key=lambda n: (node_distance(t, node, n), n))
        groups = numa_hop_order(t, node)
        assert [n for g in groups for n in g] == walk
        assert len(groups) == len(set(dist))


@settings(max_examples=100, deadline=None)
@given(random_machine(), st.data())
def test_nth_cpu_lists_every_cpu_once_in_hop_order(t, data):
    s = sched_init_numa(t)
    cpu_nodes = [n for n in t.node_ids if t.nodes[n].cpus]
    if not cpu_nodes:
        return
    node = data.draw(st.sampled_from(t.node_ids))
    allowed = t.online
    seq = []
    for i in range(allowed.bit_count() + 1):
        seq.append(sched_numa_find_nth_cpu(s, t, allowed, i, node))
    assert seq[-1] is None
    assert sorted(seq[:-1]) == sorted(c for c in t.cpus)
    start = numa_nearest_node(t, node, s.cpu_nodes)
    dist = [node_distance(t, start, t.cpu_to_node(c)) for c in seq[:-1]]
    assert dist == sorted(dist)


def test_unknown_start_node_in_numadist_uses_default_distances():
    # x86's __node_distance() answers 20 for a node outside the table
    t = ring()
    assert list(for_each_node_numadist(t, 9)) == [0, 1, 2, 3]


@pytest.mark.parametrize("node", [0, 1, 2, 3])
def test_ring_hop_order_matches_the_kernel_masks(node):
    t, s = ring(), sched_init_numa(ring())
    masks = list(for_each_numa_hop_mask(s, node))
    groups = numa_hop_order(t, node)
    covered = 0
    for g, m in zip(groups, masks):
        for n in g:
            covered |= t.nodes[n].cpus
        assert covered == m
