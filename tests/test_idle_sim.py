"""The flat versus per-node idle-mask simulation."""

from dataclasses import replace

import pytest

from numalab.kernel.sched.ext_idle import SCX_PICK_IDLE_IN_NODE
from numalab.models.idle.sim import (
    published_check,
    SEED_AFTER_S,
    SEED_BEFORE_S,
    SimParams,
    compare,
    dgx1,
    dgx_b200,
    latency_from_bench,
    machine,
    node_walk_table,
    sensitivity,
    simulate,
)

SMALL = dict(duration_ms=1.0, warmup_ms=0.2)


def test_same_seed_same_numbers():
    t = machine(2, 8, 2)
    a = simulate(t, seed=3, **SMALL).to_dict()
    b = simulate(t, seed=3, **SMALL).to_dict()
    c = simulate(t, seed=4, **SMALL).to_dict()
    assert a == b
    assert a != c


def test_counts_are_consistent():
    # two tasks per CPU: a wakeup can find every CPU busy (with one per CPU it never can)
    r = simulate(machine(2, 8, 2), load=0.45, tasks_per_cpu=2, **SMALL)
    assert r.decisions > 100
    assert 0 < r.failed_picks < r.decisions           # high load: some wakeups find no idle CPU
    assert r.idle_exit == r.decisions - r.failed_picks
    t = r.total
    assert t.writes == t.write_hits + t.write_local + t.write_remote
    assert t.line_reads == t.read_hits + t.read_local + t.read_remote
    assert 0 < r.utilisation <= 1


def test_in_node_per_node_has_no_cross_node_write_flat_has_many():
    t = machine(2, 8, 2)
    flat = simulate(t, per_node=False, pick_flags=SCX_PICK_IDLE_IN_NODE, **SMALL)
    node = simulate(t, per_node=True, pick_flags=SCX_PICK_IDLE_IN_NODE, **SMALL)
    assert node.total.cross_node_writes == 0
    assert node.picks_outside_node == 0
    assert flat.total.cross_node_writes > 0.2 * flat.total.writes


def test_per_node_updates_stay_local_and_spills_are_the_exception():
    t = machine(2, 8, 2)
    flat = simulate(t, per_node=False, **SMALL)
    node = simulate(t, per_node=True, **SMALL)
    # __scx_update_idle() runs on the CPU itself and writes only its node's masks;
    # a cross-node write there can only follow a remote waker's spill
    assert node.update.cross_node_writes < 0.25 * flat.update.cross_node_writes
    assert node.total.cross_node_writes < 0.25 * flat.total.cross_node_writes
    assert node.total.write_remote < flat.total.write_remote


def test_one_node_modes_are_identical_in_choices():
    t = machine(1, 8, 2)
    flat = simulate(t, per_node=False, **SMALL)
    node = simulate(t, per_node=True, **SMALL)
    assert flat.decisions == node.decisions
    assert flat.failed_picks == node.failed_picks
    assert flat.total.cross_node_writes == node.total.cross_node_writes == 0


def test_cached_node_order_removes_lookups():
    t = machine(4, 4, 2, distances=[[10, 20, 30, 20], [20, 10, 20, 30],
                                    [30, 20, 10, 20], [20, 30, 20, 10]])
    walk = simulate(t, per_node=True, load=0.95, **SMALL)
    cached = simulate(t, per_node=True, load=0.95, node_order="cached", **SMALL)
    assert walk.total.walks > 0 and walk.total.dist_lookups >= walk.total.walks * 3
    assert cached.total.dist_lookups == 0


def test_node_walk_table():
    df = node_walk_table(machine(4, 1, 1, distances=[[10, 20, 30, 20], [20, 10, 20, 30],
                                                     [30, 20, 10, 20], [20, 30, 20, 10]]))
    assert df.loc[0, "order"] == [1, 3, 2]
    assert df.loc[0, "distances"] == [20, 20, 30]
    assert set(df["walk_lookups"]) == {6}


def test_bad_params_are_input_errors():
    from numalab.errors import NumalabError
    for bad in (dict(load=0), dict(load=1.5), dict(run_mean_us=-1), dict(node_order="x")):
        with pytest.raises(NumalabError):
            simulate(machine(1, 2, 1), **bad)


def test_latency_from_bench_forms():
    t = machine(2, 2, 1)                                  # CPUs 0,1 node 0; 2,3 node 1
    t.meta["bench"] = {"latency_ns": [[0, 40, 120, 130], [40, 0, 125, 120],
                                      [120, 125, 0, 45], [130, 120, 45, 0]]}
    lat = latency_from_bench(t)
    assert lat[0][0] == pytest.approx(40) and lat[1][1] == pytest.approx(45)
    assert lat[0][1] == pytest.approx(123.75)
    t.meta["bench"] = {"latency_ns": [[30, 90], [90, 30]]}
    assert latency_from_bench(t) == [[30.0, 90.0], [90.0, 30.0]]
    t.meta.pop("bench")
    assert latency_from_bench(t) is None


def test_hand_set_rate_at_its_own_settings():
    """run_mean_us = 49 was set by hand (10 ms runs, one seed) so that the
    (1+f) gain on the DGX B200 is close to the cover letter's: this checks it
    still is at those settings only (chapter 4's 1 ms rows miss it, and the
    chapter says so), the mechanism behind it, and pins the held-out DGX-1
    check the chapter reports: the latest
    posting (v9 to v11, merged) claims 1.5-3 % there, and at the same rate
    the model predicts far less by either definition -- it fails the check."""
    from numalab.published import idle_dgx1
    b = compare(dgx_b200(), SimParams())
    d = compare(dgx1(), SimParams())
    measured = 100 * (1 - SEED_AFTER_S / SEED_BEFORE_S)
    assert not b["saturated"] and not d["saturated"]
    assert abs(b["gain_pct"] - measured) < 2.0, b["gain_pct"]
    low = 100 * idle_dgx1()["speedup_low"]
    assert d["gain_pct"] < low / 3 and d["gain_thr_pct"] < low / 3, d
    assert published_check(d["gain_thr_pct"], low, 100 * idle_dgx1()["speedup_high"]) == "below"
    # the mechanism: cross-node writes on the flat mask, not on per-node masks
    assert b["per_node"].total.cross_node_writes < 0.3 * b["flat"].total.cross_node_writes
    assert b["flat"].total.wait_ns > 3 * d["flat"].total.wait_ns * 224 / 80


def test_sensitivity_frame():
    df = sensitivity({"small": machine(2, 8, 2)}, SimParams(**SMALL),
                     sweep={"local_ns": [20.0, 80.0]})
    assert list(df.columns[:3]) == ["machine", "param", "value"]
    assert len(df) == 2
    lo, hi = df["f_flat"]
    assert hi > lo                                         # dearer lines, more overhead


def test_cli_idle_json_and_errors(capsys):
    import json

    from numalab.cli import main
    assert main(["idle", "pack:2 numa:1 core:2 pu:2", "--per-node", "--duration", "0.5",
                 "--seed", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mode"] == "per-node" and out["cpus"] == 8 and out["decisions"] > 0
    assert main(["idle", "pack:2 numa:1 core:2 pu:2", "--duration", "0.5", "--compare"]) == 0
    assert "predicted build time" in capsys.readouterr().out
    assert main(["idle", "dgx-1", "--load", "1.5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "load" in err


def test_latency_from_atomics_bench_record():
    """The round trips that `numalab bench atomics` stores feed the cost model (halved)."""
    from numalab.models.idle.sim import latency_from_bench
    from numalab.topology import load

    t = load("numa:2 core:2 pu:1")
    t.meta["bench"] = {"latency": {"cpus": [0, 1, 2, 3], "round_trip_ns": [
        [None, 100, 300, 300], [100, None, 300, 300], [300, 300, None, 100], [300, 300, 100, None]]}}
    assert latency_from_bench(t) == [[50.0, 150.0], [150.0, 50.0]]


# -- issue 16: saturation, the read-guard alternative, SCX_WAKE_SYNC, layout ---------

def test_saturation_is_reported_instead_of_a_gain():
    """Dear transfers on a big machine saturate the flat mask's line: no gain is given."""
    c = compare(dgx_b200(), SimParams(duration_ms=1.0, warmup_ms=0.3, local_ns=150.0))
    assert c["saturated"] and c["busy_flat"] >= 0.95
    assert c["gain_pct"] != c["gain_pct"] and c["gain_thr_pct"] != c["gain_thr_pct"]   # nan
    small = compare(machine(2, 2, 2), SimParams(**SMALL))
    assert not small["saturated"] and small["gain_thr_pct"] == small["gain_thr_pct"]


def test_read_guarded_exit_removes_writes():
    p = SimParams(**SMALL)
    kern = simulate(machine(2, 4, 2), p, seed=3)
    guard = simulate(machine(2, 4, 2), replace(p, guard_exit=True), seed=3)
    # timing shifts the event order a little; per wakeup the guarded exit stores less
    assert guard.total.writes / guard.decisions < 0.8 * kern.total.writes / kern.decisions


def test_sync_wakeups_pick_the_waker_and_claim_it():
    # wakers on the other node: prev_cpu shares no LLC with them, so the sync
    # branch returns the waker's own CPU; 7.2 claims it first
    # (scx_idle_test_and_clear_cpu(cpu), kernel/sched/ext/idle.c:558), a store
    p = SimParams(**SMALL, sync_frac=1.0, waker_local=0.0)
    r = simulate(machine(2, 4, 2), p, seed=1)
    assert r.sync_wakeups == r.decisions > 0
    assert 0 < r.sync_waker_picks <= r.decisions
    none = simulate(machine(2, 4, 2), replace(p, sync_frac=0.0), seed=1)
    assert none.sync_wakeups == none.sync_waker_picks == 0
    # every waker pick made at least one store to an idle mask
    assert r.select.writes >= r.sync_waker_picks


def test_load_one_has_no_idle_transitions():
    r = simulate(machine(2, 2, 2), SimParams(**{**SMALL, "load": 1.0}), seed=0)
    assert r.idle_enter == 0 and r.work_ns > 0
    assert r.decisions <= len(machine(2, 2, 2).cpus)    # only the first wakeups


def test_no_walk_is_counted_without_another_node():
    r = simulate(machine(1, 4, 2), SimParams(**{**SMALL, "load": 0.95}), per_node=True, seed=0)
    assert r.total.walks == 0 and r.total.dist_lookups == 0


def test_shared_line_layout_puts_both_masks_in_one_line():
    from numalab.kernel.sched.ext_idle import IdleMasks
    m = IdleMasks(machine(2, 4, 2), layout="shared-line")
    assert m.shares_line and list(m.lines()) == ["global.cpu+smt"]
    assert m.global_masks.cpu.lines is m.global_masks.smt.lines
    big = IdleMasks(machine(2, 80, 2), layout="shared-line")   # 320 CPUs: 40 bytes each
    assert not big.shares_line


def test_remote_copies_cost_local_writers():
    """Per-node masks under load: remote walkers leave copies that local writers invalidate."""
    r = simulate(machine(2, 4, 2), SimParams(**{**SMALL, "load": 0.95}), per_node=True, seed=0)
    assert r.total.walks > 0 and r.total.remote_copy_invalidations > 0


def test_ia64_cannot_run_sched_ext():
    from numalab.models.idle.sim import sched_ext_capable
    t = machine(2, 2, 1).replace(arch="ia64")
    ok, why = sched_ext_capable(t)
    assert not ok and "IA-64" in why
    assert compare(t, SimParams(**SMALL))["capable"] is False


def test_smt_active_uses_online_siblings():
    from numalab.kernel.sched.ext_idle import IdleMasks
    t = machine(1, 2, 2)
    first_threads = sum(1 << c for c in (0, 1))          # second threads offline
    t = t.replace(online=first_threads)
    assert not IdleMasks(t).smt_active
    assert IdleMasks(machine(1, 2, 2)).smt_active


# -- issue 25: seeds for every row, the result cache ------------------------------

def test_over_seeds_and_seed_sensitivity_report_every_seed():
    from numalab.models.idle.sim import over_seeds, seed_sensitivity
    t, p = machine(2, 4, 2), SimParams(**SMALL)
    o = over_seeds(t, p, range(5))
    assert o["n"] == 5 and len(o["thr"]) == 5 - o["saturated"]
    assert o["low"] <= o["median"] <= o["high"]
    assert o["runs"][2]["gain_thr_pct"] == compare(t, p, 2)["gain_thr_pct"]
    with pytest.raises(Exception, match="at least 5 seeds"):
        over_seeds(t, p, range(3))
    df = seed_sensitivity({"small": t}, p, {"local_ns": [20.0, 80.0]}, range(5))
    assert list(df["seeds"]) == [5, 5] and (df["gain low %"] <= df["gain high %"]).all()


def test_cache_returns_the_same_numbers(tmp_path, monkeypatch):
    import numalab.models.idle.sim as S
    monkeypatch.setattr(S, "_MEMO", None)
    monkeypatch.setattr(S, "_CACHE_DIR", None)
    t, p = machine(2, 2, 2), SimParams(**SMALL)
    plain = simulate(t, p, seed=4).to_dict()
    assert S.enable_cache(tmp_path) == tmp_path
    first = simulate(t, p, seed=4)
    assert first.to_dict() == plain and len(list(tmp_path.glob("*.pickle"))) == 1
    S._MEMO.clear()                                   # a new process: read from disk
    again = simulate(t, p, seed=4)
    assert again is not first and again.to_dict() == plain
    assert simulate(t, p, seed=5).to_dict() != plain  # another seed is another entry


def test_workload_ranges_extremes_and_sync_rows():
    """The shared workload sweep (chapter 4's headline and evidence table):
    one row per input end and mode, extremes taken over every row and seed,
    and the all-sync per-node row picked out."""
    from numalab.models.idle.workload import COUNTS, WORKLOAD_ENDS, workload_ranges
    t = machine(2, 4, 2)
    wr = workload_ranges(t, SimParams(duration_ms=0.3, warmup_ms=0.1), range(5))
    assert len(wr.rows) == 2 * 2 * len(WORKLOAD_ENDS)
    pn = [r for r in wr.rows if r["idle masks"] == "per-node"]
    fl = [r for r in wr.rows if r["idle masks"] == "flat"]
    assert wr.pernode_walks == (min(r["walks"].low for r in pn), max(r["walks"].high for r in pn))
    assert wr.flat_cross_min == min(r["cross_node_writes"].low for r in fl)
    assert all(r["walks"].high == 0 for r in fl)          # flat masks never walk
    sync = next(r for r in pn if r["input"] == "sync_frac" and r["value"] == 1.0)
    assert set(wr.sync_all) == set(COUNTS) and wr.sync_all["walks"] is sync["walks"]
