"""The port of Linux 7.2's kernel/sched/ext/idle.c: selection order, access
accounting, and the lab's real 7.2 kernel as the oracle."""

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


# -- Linux 7.2 (kernel/sched/ext/idle.c): the WAKE_SYNC claim, the idle->idle refresh, replay

from numalab.kernel.sched.ext_idle import (  # noqa: E402
    SCX_WAKE_SYNC,
    ReplayError,
    idle_to_idle,
    idle_to_task,
    pick_task_idle,
    replay,
    task_to_idle,
)


def _sync_setup(per_node):
    # 2 nodes x 2 cores x 2 threads, linear: node0 = CPUs 0-3, node1 = 4-7
    m = IdleMasks(topo("numa:2 core:2 pu:2"), per_node=per_node)
    busy(m, 0, 1)                   # prev_cpu 0's core is busy
    return m


@pytest.mark.parametrize("per_node", [False, True])
def test_wake_sync_claims_the_wakers_cpu(per_node):
    """7.2 idle.c:556-559: the waker's CPU is claimed with
    scx_idle_test_and_clear_cpu() before it is returned."""
    m = _sync_setup(per_node)
    m.this_cpu = 4                  # waker on node 1: shares no LLC with prev_cpu 0
    assert m.idle_cpus() >> 4 & 1   # (its bit is set: nothing ran there yet)
    m.sites = {}
    assert scx_select_cpu_dfl(m, 0, SCX_WAKE_SYNC) == 4
    assert not m.idle_cpus() >> 4 & 1, "the waker's bit is cleared by the claim"
    assert m.sites[("scx_idle_test_and_clear_cpu", "cpumask_test_and_clear_cpu", "cpu")] == [0, 1]
    assert m.stats.sync_waker_picks == 1


@pytest.mark.parametrize("per_node", [False, True])
def test_wake_sync_claim_stores_even_when_the_waker_is_busy(per_node):
    m = _sync_setup(per_node)
    busy(m, 4)                      # the waker runs a task: its bit is already clear
    m.this_cpu = 4
    w0 = m.stats.writes
    assert scx_select_cpu_dfl(m, 0, SCX_WAKE_SYNC) == 4     # returned either way
    assert m.stats.writes > w0, "a locked test-and-clear takes the line even on a clear bit"


def test_wake_sync_prefers_an_idle_prev_cpu_in_the_wakers_llc():
    m = IdleMasks(topo("numa:2 l3:1 core:2 pu:2"))
    m.this_cpu = 1                  # waker shares prev_cpu 0's LLC (node 0)
    assert scx_select_cpu_dfl(m, 0, SCX_WAKE_SYNC) == 0


def test_idle_to_idle_refresh_rewrites_the_masks():
    """pick_task_idle() with the idle task as rq->curr: update_builtin_idle(cpu, true)."""
    m = IdleMasks(topo("numa:1 core:2 pu:2"))      # everything idle, curr_idle all True
    m.sites = {}
    m.this_cpu = 0
    w0 = m.stats.writes
    idle_to_idle(m, 0)
    assert m.stats.writes - w0 == 2                  # assign_cpu + cpumask_or of the core
    assert m.sites[("update_builtin_idle", "assign_cpu", "cpu")] == [0, 1]
    assert m.sites[("update_builtin_idle", "cpumask_or", "smt")] == [0, 1]   # a store op
    assert m.idle_cpus() >> 0 & 1 and m.idle_cores() >> 0 & 1


def test_pick_task_idle_writes_nothing_when_a_task_was_running():
    m = IdleMasks(topo("numa:1 core:2 pu:2"))
    m.this_cpu = 0
    idle_to_task(m, 0)
    assert m.curr_idle[0] is False
    w0 = m.stats.writes
    pick_task_idle(m, 0)                             # rq->curr is a task: no update
    assert m.stats.writes == w0 and not m.idle_cpus() & 1
    task_to_idle(m, 0)                               # set_next_task_idle() writes
    assert m.stats.writes > w0 and m.idle_cpus() & 1 and m.curr_idle[0]


@pytest.mark.parametrize("per_node", [False, True])
def test_replay_equals_the_direct_calls(per_node):
    t = topo("numa:2 core:2 pu:2")
    events = [{"op": "exit", "cpu": 2}, {"op": "select", "prev_cpu": 2, "waker": 2},
              {"op": "exit", "cpu": 3}, {"op": "enter", "cpu": 2},
              {"op": "refresh", "cpu": 5},
              {"op": "select", "prev_cpu": 0, "waker": 4, "wake_flags": SCX_WAKE_SYNC}]
    r = replay(t, events, per_node=per_node, busy=[0])
    m = IdleMasks(t, per_node=per_node)
    m.this_cpu = 0
    idle_to_task(m, 0)
    m.reset_stats()
    picks = []
    for c, fn in ((2, idle_to_task),):
        m.this_cpu = c
        fn(m, c)
    m.this_cpu = 2
    picks.append(scx_select_cpu_dfl(m, 2))
    for c, fn in ((3, idle_to_task), (2, task_to_idle), (5, idle_to_idle)):
        m.this_cpu = c
        fn(m, c)
    m.this_cpu = 4
    picks.append(scx_select_cpu_dfl(m, 0, SCX_WAKE_SYNC))
    assert r["picks"] == picks
    assert r["line_writes"] == m.stats.writes
    assert r["transitions"] == {"enter": 1, "exit": 2, "refresh": 1}
    assert r["sites"]["scx_idle_test_and_clear_cpu / cpumask_test_and_clear_cpu / cpu"]["writes"] == 2
    assert r["sites"]["update_builtin_idle / assign_cpu / cpu"]["writes"] == 4


def test_replay_reports_picks_that_differ_from_the_record():
    t = topo("numa:2 core:2 pu:2")
    r = replay(t, [{"op": "select", "prev_cpu": 0, "waker": 0, "pick": 0},
                   {"op": "select", "prev_cpu": 6, "waker": 0, "pick": 1}])
    assert r["recorded_picks"] == 2
    assert r["mismatches"] == [{"index": 1, "recorded": 1, "port": 6}]
    assert r["landed"] == {"prev_cpu": 2} and r["cross_node_picks"] == 0


def test_replay_refuses_what_it_cannot_run():
    t = topo("numa:1 core:2")
    with pytest.raises(ReplayError, match="op 'wake'"):
        replay(t, [{"op": "wake", "cpu": 0}])
    with pytest.raises(ReplayError, match="lacks the field 'waker'"):
        replay(t, [{"op": "select", "prev_cpu": 0}])
    with pytest.raises(ReplayError, match="CPU 9"):
        replay(t, [{"op": "enter", "cpu": 9}])


def test_replay_from_recorded_masks_and_an_exiting_waker():
    """Each select can start from the kernel's recorded masks; an exiting waker
    (PF_EXITING, 7.2 idle.c:551) skips the waker-CPU branch."""
    t = topo("numa:2 core:2 pu:2")            # node0 = 0-3, node1 = 4-7
    only5 = {-1: (1 << 5, 0)}                 # flat: only CPU 5 idle, no idle core
    sync = {"op": "select", "prev_cpu": 0, "waker": 4, "wake_flags": SCX_WAKE_SYNC,
            "masks": only5}
    r = replay(t, [sync, {**sync, "exiting": True}])
    assert r["picks"] == [4, 5]               # the waker's CPU; exiting: the idle CPU 5
    assert r["claims"][0] == [(4, False)]     # the waker's CPU is claimed (it was not idle)
    assert (5, True) in r["claims"][1]
    with pytest.raises(ReplayError, match="node 3"):
        replay(t, [{**sync, "masks": {3: (0, 0)}}], per_node=True)


# -- the oracle: Linux 7.2 in the lab (data/lab/lab-7.2-scx-*, numalab.lab.scx) -------

from pathlib import Path  # noqa: E402

SCX_DUMPS = sorted((Path(__file__).resolve().parents[1] / "data" / "lab" / "scx").glob("lab-7.2-scx-*.tar.bz2"))


def test_the_oracle_has_two_shapes_in_both_modes():
    names = {p.name for p in SCX_DUMPS}
    for shape in ("16cpu-2n", "12cpu-4n-uneven"):
        assert {f"lab-7.2-scx-flat-{shape}.tar.bz2", f"lab-7.2-scx-pernode-{shape}.tar.bz2"} <= names


@pytest.mark.parametrize("path", SCX_DUMPS, ids=[p.name for p in SCX_DUMPS])
def test_port_equals_the_lab_kernel(path):
    """From every recorded select's entry state (masks, local DSQs, the
    distribute cursors, the waker's PF_EXITING), the 7.2 port returns the
    kernel's CPU and makes the kernel's claims, in order -- the WAKE_SYNC
    claim of the waker's CPU included. Only selects during which another
    vCPU stored to the masks (a race the port does not model) may differ."""
    from numalab.lab.scx import port_masks, port_pick, read_scx
    from numalab.topology import load
    r = read_scx(path)
    m = port_masks(r, load(path))
    differ, raced = [], 0
    for s in r.selects:
        pp = port_pick(m, s)
        if not (pp.same_ret and pp.same_claims):
            if s.concurrent_stores:
                raced += 1
            else:
                differ.append((s.seq, s.ret, s.claims, pp.ret, pp.claims))
    assert r.selects and not differ, differ[:3]
    assert raced <= 0.01 * len(r.selects)
    sync_waker = sum(1 for s in r.selects for *_, site in s.claims if site.endswith("+0x2ac"))
    assert sync_waker > 0, "the kernel's WAKE_SYNC waker claims are in the record"
