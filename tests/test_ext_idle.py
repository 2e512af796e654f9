"""The port of kernel/sched/ext_idle.c: selection order and access accounting."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numalab.cpumask import cpus as bits
from numalab.kernel.sched.ext_idle import (
    EBUSY,
    NUMA_NO_NODE,
    SCX_PICK_IDLE_CORE,
    SCX_PICK_IDLE_IN_NODE,
    CostModel,
    IdleMasks,
    __scx_update_idle,
    for_each_node_numadist,
    idle_cpumask,
    node_visit_order,
    numadist_walk_lookups,
    pick_idle_cpu_from_online_nodes,
    scx_idle_test_and_clear_cpu,
    scx_pick_idle_cpu,
    scx_select_cpu_dfl,
    validate_node,
)
from numalab.topology.synthetic import from_synthetic

RING4 = [[10, 20, 30, 20], [20, 10, 20, 30], [30, 20, 10, 20], [20, 30, 20, 10]]
FAR4 = [[10, 40, 30, 20], [40, 10, 20, 30], [30, 20, 10, 40], [20, 30, 40, 10]]


def topo(text, distances=None, numbering="linear"):
    return from_synthetic(text, distances=distances, numbering=numbering)


def busy(m, *cpus):
    """Make CPUs busy the way the kernel does: each leaves idle on itself."""
    for c in cpus:
        m.this_cpu = c
        __scx_update_idle(m, c, False)


def idle(m, *cpus):
    for c in cpus:
        m.this_cpu = c
        __scx_update_idle(m, c, True)


@pytest.mark.parametrize("per_node", [False, True])
def test_prev_cpu_chosen_when_idle(per_node):
    m = IdleMasks(topo("numa:2 core:4"), per_node=per_node)   # no SMT
    for prev in range(8):
        m2 = IdleMasks(m.topo, per_node=per_node)
        assert scx_select_cpu_dfl(m2, prev) == prev
        assert not m2.idle_cpus() >> prev & 1          # claimed
    busy(m, *[c for c in range(8) if c != 6])
    assert scx_select_cpu_dfl(m, 6) == 6


@pytest.mark.parametrize("per_node", [False, True])
def test_full_idle_core_preferred_over_partially_idle_prev(per_node):
    # 4 cores x 2 threads, linear numbering: core k = CPUs 2k, 2k+1
    m = IdleMasks(topo("numa:1 l3:1 core:4 pu:2"), per_node=per_node)
    busy(m, 1)                       # prev_cpu 0 is idle, its sibling is not
    cpu = scx_select_cpu_dfl(m, 0)
    assert cpu >= 2, "a CPU of a wholly idle core, not prev_cpu"
    # the pick took a whole idle core: its sibling is still idle
    assert m.idle_cpus() >> (cpu ^ 1) & 1
    # with SCX_PICK_IDLE_CORE and no whole idle core left: -EBUSY, prev stays idle
    busy(m, 2, 4, 6)
    assert scx_select_cpu_dfl(m, 0, flags=SCX_PICK_IDLE_CORE) == -EBUSY
    # without the flag, prev_cpu itself comes next
    assert scx_select_cpu_dfl(m, 0) == 0


def test_prev_sibling_before_rest_of_llc():
    m = IdleMasks(topo("numa:1 l3:1 core:4 pu:2"))
    busy(m, 0, 2, 4, 6)              # no whole idle core; prev_cpu 0 busy
    assert scx_select_cpu_dfl(m, 0) == 1


@pytest.mark.parametrize("per_node", [False, True])
@pytest.mark.parametrize("text", ["pack:2 numa:1 l3:1 core:4", "pack:2 numa:1 core:4"])
def test_same_node_before_remote(per_node, text):
    # with an LLC per node (LLC step) and without LLC info (flat: NUMA step)
    m = IdleMasks(topo(text), per_node=per_node)
    busy(m, 0, 1, 2)                 # node 0: only CPU 3 idle; node 1 all idle
    assert scx_select_cpu_dfl(m, 0) == 3
    busy(m, 3)
    assert m.cpu_node[scx_select_cpu_dfl(m, 0)] == 1


def test_flat_topology_steps():
    m = IdleMasks(topo("pack:2 numa:1 l3:1 core:4"))
    assert m.topo_llc and not m.topo_numa        # LLC == node: NUMA step redundant
    m = IdleMasks(topo("pack:2 numa:1 core:4"))
    assert not m.topo_llc and m.topo_numa        # no LLC info: NUMA step on
    m = IdleMasks(topo("pack:2 numa:1 core:4"), per_node=True)
    assert not m.topo_numa                       # per-node masks: never


def test_per_node_search_by_increasing_distance():
    t = topo("numa:4 core:2", distances=FAR4)
    assert node_visit_order(t, 0) == [3, 2, 1]
    m = IdleMasks(t, per_node=True)
    busy(m, 0, 1)                    # node 0 full
    picks = [scx_pick_idle_cpu(m, (1 << 8) - 1, 0, 0) for _ in range(6)]
    assert [m.cpu_node[c] for c in picks] == [3, 3, 2, 2, 1, 1]
    assert scx_pick_idle_cpu(m, (1 << 8) - 1, 0, 0) == -EBUSY


def test_flat_mode_has_no_node_order():
    m = IdleMasks(topo("numa:4 core:2", distances=FAR4))
    busy(m, 0, 1)
    # the global mask is one pool: the next pick is simply the next idle bit
    # after this CPU's previous pick (cpumask_any_and_distribute)
    assert scx_pick_idle_cpu(m, 0xFF, NUMA_NO_NODE, 0) == 2


def test_ties_go_to_lowest_node_id():
    t = topo("numa:4 core:1", distances=RING4)
    assert node_visit_order(t, 0) == [1, 3, 2]
    assert node_visit_order(t, 2) == [1, 3, 0]


@pytest.mark.parametrize("flags", [SCX_PICK_IDLE_IN_NODE, SCX_PICK_IDLE_IN_NODE | SCX_PICK_IDLE_CORE])
def test_in_node_never_returns_another_nodes_cpu(flags):
    m = IdleMasks(topo("numa:4 core:2 pu:2", distances=RING4), per_node=True)
    busy(m, *bits(m.topo.nodes[0].cpus))
    assert scx_pick_idle_cpu(m, m.possible, 0, flags) == -EBUSY
    assert scx_select_cpu_dfl(m, 0, flags=flags) == -EBUSY
    assert m.stats.walks == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), min_size=16, max_size=16), st.integers(0, 15),
       st.sampled_from([SCX_PICK_IDLE_IN_NODE, SCX_PICK_IDLE_IN_NODE | SCX_PICK_IDLE_CORE]))
def test_in_node_property(idle_state, prev, flags):
    m = IdleMasks(topo("numa:4 core:2 pu:2", distances=RING4), per_node=True)
    busy(m, *[c for c, i in enumerate(idle_state) if not i])
    cpu = scx_select_cpu_dfl(m, prev, flags=flags)
    assert cpu == -EBUSY or m.cpu_node[cpu] == m.cpu_node[prev]
    if cpu >= 0:
        assert idle_state[cpu]


@pytest.mark.parametrize("per_node", [False, True])
def test_failed_pick_returns_ebusy(per_node):
    m = IdleMasks(topo("numa:2 core:2 pu:2"), per_node=per_node)
    busy(m, *range(8))
    assert scx_select_cpu_dfl(m, 3) == -EBUSY == -16
    assert scx_pick_idle_cpu(m, 0xFF, m.cpu_node[0] if per_node else NUMA_NO_NODE, 0) == -EBUSY
    # an empty allowed mask fails too
    m2 = IdleMasks(m.topo, per_node=per_node)
    assert scx_select_cpu_dfl(m2, 3, cpus_allowed=0) == -EBUSY


def test_affinity_respected():
    m = IdleMasks(topo("numa:2 core:2 pu:2"), per_node=True)
    for _ in range(3):
        c = scx_select_cpu_dfl(m, 0, cpus_allowed=0b1010_0000)
        assert c in (5, 7, -EBUSY)
    assert not m.idle_cpus() & 0b1010_0000


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["sel", "idle", "busy"]), st.integers(0, 15)),
                max_size=40), st.booleans())
def test_smt_mask_holds_only_wholly_idle_cores(ops, per_node):
    m = IdleMasks(topo("numa:2 core:4 pu:2", numbering="smt-apart"), per_node=per_node)
    running = set()
    for op, c in ops:
        if op == "sel":
            before = m.idle_cpus()
            got = scx_select_cpu_dfl(m, c)
            if got >= 0:
                assert before >> got & 1 and got not in running
                running.add(got)
                busy(m, got)
        elif op == "idle" and c in running:
            running.discard(c)
            idle(m, c)
        elif op == "busy" and c not in running and m.idle_cpus() >> c & 1:
            m.this_cpu = c
            assert scx_idle_test_and_clear_cpu(m, c)
            running.add(c)
            busy(m, c)
        idle_now = m.idle_cpus()
        assert idle_now == ((1 << 16) - 1) & ~sum(1 << r for r in running)
        for core_cpu in bits(m.idle_cores()):
            sib = m.smt_mask[core_cpu]
            assert idle_now & sib == sib


def test_test_and_clear_reads_before_writing_smt():
    m = IdleMasks(topo("numa:1 core:2 pu:2"))          # cores {0,1} {2,3}
    busy(m, 1)                                          # core 0 out of the smt mask
    m.reset_stats()
    m.this_cpu = 0
    assert scx_idle_test_and_clear_cpu(m, 0)
    assert m.stats.writes == 1                          # only the cpu mask
    m.reset_stats()
    m.this_cpu = 2
    assert scx_idle_test_and_clear_cpu(m, 2)            # core 1 wholly idle
    assert m.stats.writes == 2                          # smt andnot + cpu mask


def test_per_node_update_touches_only_its_node():
    t = topo("pack:2 numa:1 core:4 pu:2", numbering="smt-apart")
    m = IdleMasks(t, per_node=True)
    for c in bits(t.nodes[1].cpus):
        busy(m, c)
        idle(m, c)
    for n, s in m.node_masks.items():
        written = [ln.writer for mk in (s.cpu, s.smt) for ln in mk.lines]
        if n == 0:
            assert written == [-1, -1]
        else:
            assert all(m.cpu_node[w] == 1 for w in written)
    assert m.stats.cross_node_writes == 0


def test_flat_mask_lines_bounce_between_nodes():
    t = topo("pack:2 numa:1 core:4")
    m = IdleMasks(t)
    busy(m, 0, 4, 1, 5)
    assert m.stats.cross_node_writes == 3                 # 0->4, 4->1, 1->5
    # the first write fetches the line from node 0's memory (it is allocated there)
    assert (m.stats.write_local, m.stats.write_remote) == (1, 3)
    m2 = IdleMasks(t, per_node=True)
    busy(m2, 0, 4, 1, 5)
    assert m2.stats.cross_node_writes == 0


def test_words_and_lines_of_a_large_mask():
    t = topo("pack:2 numa:1 core:512")                    # 1024 CPUs, no SMT
    m = IdleMasks(t)
    assert (m.nwords, m.nlines) == (16, 2)
    busy(m, *range(1023))
    m.reset_stats()
    m.this_cpu = 0
    # one idle CPU at the far end: the scan reads every word from CPU 1 on
    assert scx_pick_idle_cpu(m, (1 << 1024) - 1, NUMA_NO_NODE, 0) == 1023
    assert m.stats.words_read == 16
    assert m.stats.line_reads == 2


def test_cost_model_remote_and_queueing():
    t = topo("pack:2 numa:1 core:2", distances=[[10, 30], [30, 10]])
    m = IdleMasks(t, cost=CostModel(local_ns=10, remote_factor=2, word_ns=0))
    busy(m, 0)
    m.now = 1000.0
    busy(m, 2)                                            # remote: 10 * 30/10 * 2
    assert m.now == pytest.approx(1060)
    m.now = 1000.0                                        # a request before that transfer ends
    busy(m, 3)                                            # waits 60, then local 10
    assert m.stats.wait_ns == pytest.approx(60)
    assert m.now == pytest.approx(1070)


def test_measured_latency_matrix_replaces_formula():
    t = topo("pack:2 numa:1 core:2")
    m = IdleMasks(t, cost=CostModel(latency_ns=[[7, 99], [99, 7]], word_ns=0))
    busy(m, 0)
    m.now = 1000.0
    busy(m, 2)
    assert m.now == pytest.approx(1099)
    with pytest.raises(ValueError):
        IdleMasks(t, cost=CostModel(latency_ns=[[1]]))


def test_node_walk_counts_quadratic_lookups():
    t = topo("numa:8 core:1")
    m = IdleMasks(t, per_node=True)
    assert list(for_each_node_numadist(m, 0, 0xFE)) == list(range(1, 8))
    assert m.stats.dist_lookups == 7 * 8 // 2 == numadist_walk_lookups(8)
    busy(m, *range(8))
    for order, expect in (("walk", 28), ("cached", 0)):
        mm = IdleMasks(t, per_node=True, node_order=order)
        busy(mm, *range(8))
        mm.reset_stats()
        assert pick_idle_cpu_from_online_nodes(mm, 0xFF, 0, 0) == -EBUSY
        assert mm.stats.dist_lookups == expect


def test_cached_order_picks_like_the_walk():
    t = topo("numa:4 core:2", distances=FAR4)
    res = {}
    for order in ("walk", "cached"):
        m = IdleMasks(t, per_node=True, node_order=order)
        busy(m, 0, 1, 6)
        res[order] = [scx_pick_idle_cpu(m, 0xFF, 0, 0) for _ in range(6)]
    assert res["walk"] == res["cached"]


def test_validate_node():
    t = topo("numa:2 core:2")
    flat, per = IdleMasks(t), IdleMasks(t, per_node=True)
    assert validate_node(flat, 0) == -95               # per-node tracking disabled
    assert validate_node(per, NUMA_NO_NODE) == -2
    assert validate_node(per, 5) == -22 and validate_node(per, -3) == -22
    assert validate_node(per, 1) == 1
    assert idle_cpumask(per, 1).cpu.bits == t.nodes[1].cpus
