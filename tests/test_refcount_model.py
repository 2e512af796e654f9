"""The shared-line versus per-CPU counter model."""

import pytest

from numalab.models.refcount.sim import Latencies, relation, simulate, sweep_flows, transfer_ns
from numalab.topology.model import CPU, Node, Topology


def box(nodes=2, per_node=8, smt=False, distance=21):
    cpus = {}
    for i in range(nodes * per_node):
        n = i // per_node
        sib = (0b11 << (i & ~1)) if smt else (1 << i)
        cpus[i] = CPU(i, node=n, thread_siblings=sib, cluster_cpus=sib,
                      llc_cpus=((1 << per_node) - 1) << (n * per_node))
    d = [[10 if a == b else distance for b in range(nodes)] for a in range(nodes)]
    return Topology("box", cpus=cpus, nodes={n: Node(n, ((1 << per_node) - 1) << (n * per_node))
                                              for n in range(nodes)}, distances=d)


def test_relations_and_costs():
    t = box(smt=True)
    lat = Latencies()
    assert [relation(t, 0, b) for b in (0, 1, 2, 8)] == ["self", "smt", "cluster", "remote"]
    assert transfer_ns(t, 0, 8, lat) == pytest.approx(lat.remote_ns * 21 / 20)
    far = box(distance=32)
    assert transfer_ns(far, 0, 8, lat) > transfer_ns(t, 0, 8, lat)


def test_percpu_scales_and_shared_saturates():
    t = box()
    one = simulate(t, [0], "shared")["items_per_s"]
    shared8 = simulate(t, list(range(8)), "shared")["items_per_s"]
    percpu8 = simulate(t, list(range(8)), "percpu")["items_per_s"]
    assert percpu8 == pytest.approx(8 * one, rel=0.05)       # no sharing: linear
    assert shared8 < 0.6 * percpu8                              # the line caps throughput


def test_cross_node_is_worse_than_same_node():
    t = box()
    same = simulate(t, [0, 1, 2, 3], "shared")
    cross = simulate(t, [0, 8, 1, 9], "shared")
    assert cross["mean_op_ns"] > same["mean_op_ns"]
    assert cross["items_per_s"] < same["items_per_s"]


def test_matched_load_idle_direction():
    # same offered load on both counters: the shared one burns far more CPU
    t = box()
    kw = dict(rate_per_cpu=1.0e6, work_ns=150, duration_ns=1e6, seed=3)  # 8M items/s
    s = simulate(t, list(range(8)), "shared", **kw)
    p = simulate(t, list(range(8)), "percpu", **kw)
    assert p["items_per_s"] == pytest.approx(s["items_per_s"], rel=0.1)
    assert s["busy"] > 1.5 * p["busy"] and s["busy"] - p["busy"] > 0.1


def test_deterministic_for_a_seed():
    t = box()
    a = simulate(t, [0, 1, 8], "shared", rate_per_cpu=2e6, seed=7)
    b = simulate(t, [0, 1, 8], "shared", rate_per_cpu=2e6, seed=7)
    assert a == b


def test_from_round_trips_uses_measured_classes():
    t = box(smt=True)
    bench = {"latency": {"cpus": [0, 1, 2], "round_trip_ns": [[None, 40, 100], [40, None, 100],
                                                              [100, 100, None]]}}
    lat = Latencies.from_round_trips(bench, t)
    assert lat.smt_ns == 20 and lat.cluster_ns == 50 and lat.remote_ns == Latencies().remote_ns


def test_sweep_shape():
    df = sweep_flows(box(), {"same node": list(range(8)), "spread": [0, 8, 1, 9]}, [1, 2, 4],
                     duration_ns=2e5)
    assert set(df["mode"]) == {"shared", "percpu"}
    assert len(df) == 2 * 3 + 2 * 3


@pytest.mark.parametrize("bad", [dict(cpus=[]), dict(cpus=[0, 0]), dict(cpus=[0], mode="x")])
def test_bad_arguments(bad):
    args = dict(cpus=[0], mode="shared") | bad
    with pytest.raises(ValueError):
        simulate(box(), args["cpus"], args["mode"])


def test_hold_window_batches_operations():
    """A hand-off window lets the holder go on at local cost: more operations
    per second on the shared line, never fewer; 0 is the one-transfer model."""
    t = box()
    kw = dict(work_ns=40, ops_per_item=1, duration_ns=2e5, seed=1)
    base = simulate(t, [0, 1], "shared", **kw)
    assert simulate(t, [0, 1], "shared", hold_ns=0.0, **kw) == base
    wide = simulate(t, [0, 1], "shared", hold_ns=Latencies().cluster_ns, **kw)
    assert wide["ops_per_s"] > 1.3 * base["ops_per_s"]
    assert wide["mean_op_ns"] < base["mean_op_ns"]


def test_local_cost_per_cpu():
    t = box()
    cheap = simulate(t, [0], "percpu", work_ns=10, ops_per_item=1, local_ns=[1.0], duration_ns=1e5)
    dear = simulate(t, [0], "percpu", work_ns=10, ops_per_item=1, local_ns=[20.0], duration_ns=1e5)
    assert cheap["items_per_s"] == pytest.approx(1e9 / 11, rel=0.02)
    assert dear["items_per_s"] == pytest.approx(1e9 / 30, rel=0.02)
    with pytest.raises(ValueError):
        simulate(t, [0, 1], "shared", local_ns=[1.0])


def test_bench_comparison_labels_and_inputs():
    """One-thread rows reproduce the benchmark by construction (fitted); the
    two-thread rows are predictions, one per hand-off window."""
    from numalab.models.refcount.sim import bench_comparison
    t = box(nodes=1, per_node=2)

    def row(n, work, counter, op, mops, ns):
        return {"threads": n, "work_ns": work, "counter": counter, "op": op,
                "ops_per_s": {"median": mops * 1e6, "low": mops * 0.9e6, "high": mops * 1.1e6,
                              "n": 10},
                "accepted": [{"ops_per_s": mops * 1e6, "overlap": 1.0}] * 10, "rejected": [],
                "ns_per_op_per_thread": ns}
    bench = {"latency": {"cpus": [0, 1], "round_trip_ns": [[None, 200.0], [200.0, None]]},
             "refops": {"cpus_used": [0, 1], "rows": [
                 row(1, 0, "refcount_t", "get", 200, 5.0), row(1, 40, "refcount_t", "get", 22, 45.0),
                 row(2, 40, "refcount_t", "get", 20, 100.0)]}}
    df = bench_comparison(t, bench, hold_shares=(0.0, 1.0), duration_ns=1e5)
    one = df[df["threads"] == 1]
    assert (one["role"] == "fitted").all()
    assert one["model"].values == pytest.approx(one["measured"].values, rel=0.05)
    two = df[df["threads"] == 2].set_index("hold_share")
    assert set(two["role"]) == {"predicted"}
    # no window: a transfer of 100 ns per operation caps the line at 10 M/s
    assert two.loc[0.0, "model"] < 10.5
    assert two.loc[1.0, "model"] > two.loc[0.0, "model"]
    # the local cost comes from the zero-work row, not the assumed 2 ns
    assert (df["local"] == "measured").all() and (df["runs"] == 1).all()
    # one run: the measured range is its trials' range
    assert two["measured_low"].iloc[0] == pytest.approx(18.0)
    # without zero-work rows the local cost is assumed: the given fallback, or the model's default
    nozero = {**bench, "refops": {**bench["refops"], "rows": bench["refops"]["rows"][1:]}}
    a = bench_comparison(t, nozero, hold_shares=(0.0,), duration_ns=1e5)
    b = bench_comparison(t, nozero, hold_shares=(0.0,), duration_ns=1e5, fallback_local_ns=30.0)
    assert set(a["local"]) == set(b["local"]) == {"assumed"}
    # a dearer local cost leaves less fitted work per one-thread operation: the predictions differ
    assert a[a.threads == 2]["model"].iloc[0] != pytest.approx(b[b.threads == 2]["model"].iloc[0])
    with pytest.raises(ValueError):
        bench_comparison(t, {"latency": bench["latency"]})


def _two_cpu_bench():
    def row(n, work, mops, ns):
        return {"threads": n, "work_ns": work, "counter": "refcount_t", "op": "get",
                "ops_per_s": {"median": mops * 1e6, "low": mops * 0.9e6, "high": mops * 1.1e6,
                              "n": 10},
                "accepted": [{"ops_per_s": mops * 1e6, "overlap": 1.0}] * 10, "rejected": [],
                "ns_per_op_per_thread": ns}
    return {"latency": {"cpus": [0, 1], "round_trip_ns": [[None, 200.0], [200.0, None]]},
            "refops": {"cpus_used": [0, 1], "rows": [row(1, 0, 200, 5.0), row(1, 40, 22, 45.0),
                                                     row(2, 40, 20, 100.0)]}}


def test_bench_comparison_cached_is_the_comparison_computed_once(tmp_path, monkeypatch):
    """The cache gives the table bench_comparison gives, reads it from disk in
    a new process (the memo cleared), and computes again for other inputs."""
    from numalab.models.refcount import sim
    t, bench = box(nodes=1, per_node=2), _two_cpu_bench()
    kw = dict(hold_shares=(0.0, 1.0), duration_ns=1e4, seeds=(0, 1, 2, 3, 4))
    direct = sim.bench_comparison(t, bench, **kw)
    calls = []
    real = sim.bench_comparison
    monkeypatch.setattr(sim, "bench_comparison", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(sim, "_BENCH_MEMO", {})
    first = sim.bench_comparison_cached(t, bench, cache_dir=tmp_path, **kw)
    assert first.equals(direct) and len(calls) == 1 and len(list(tmp_path.glob("*.pickle"))) == 1
    monkeypatch.setattr(sim, "_BENCH_MEMO", {})          # as a new process would
    again = sim.bench_comparison_cached(t, bench, cache_dir=tmp_path, **kw)
    assert again.equals(direct) and len(calls) == 1
    sim.bench_comparison_cached(t, bench, cache_dir=tmp_path, **{**kw, "seeds": (1, 2, 3, 4, 5)})
    assert len(calls) == 2 and len(list(tmp_path.glob("*.pickle"))) == 2
    changed = {**bench, "latency": {**bench["latency"], "round_trip_ns": [[None, 300.0], [300.0, None]]}}
    sim.bench_comparison_cached(t, changed, cache_dir=tmp_path, **kw)
    assert len(calls) == 3


def test_held_out_tests_split_a_set_by_its_groups():
    import pandas as pd
    from numalab.models.refcount import devmem as D
    t, bench = box(nodes=1, per_node=2), _two_cpu_bench()
    rec = {**bench, "runs": [bench, bench, bench]}
    one = box(nodes=1, per_node=1)
    sets = {"quiet": (t, rec), "loaded": (t, rec), "single": (one, rec)}
    none = pd.DataFrame(columns=["record", "group", "run"])
    assert list(D.held_out_tests(sets, ["quiet", "single"], none)) == ["quiet"]
    groups = pd.DataFrame({"record": ["quiet"] * 3, "group": ["fast", "slow", "slow"], "run": [1, 2, 3]})
    tabs = D.held_out_tests(sets, ["quiet"], groups)
    assert list(tabs) == ["quiet, fast", "quiet, slow"]
    assert set(tabs["quiet, fast"]["runs"]) == {1} and set(tabs["quiet, slow"]["runs"]) == {2}
    wide = D.held_out_table(tabs["quiet, fast"])
    assert not any("_" in c for c in wide.columns) and (wide["role"] == "measured vs predicted").all()
