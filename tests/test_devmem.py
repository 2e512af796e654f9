"""The devmem scenario of the percpu_ref patch and its calibration."""


import pytest

from numalab.models.refcount import devmem as D
from numalab.models.refcount.sim import Latencies, percpu_expected, relation, simulate
from numalab.topology import load



@pytest.fixture(scope="module")
def cal():
    return D.calibrate()


def test_summary_is_the_cover_letters():
    s = D.seed_summary()
    assert round(s[("before", "tx")]["app_idle"], 2) == 34.44
    assert round(s[("after", "tx")]["app_idle"], 2) == 87.13
    assert round(s[("before", "rx")]["app_idle"], 2) == 5.38
    assert round(s[("after", "rx")]["app_idle"], 2) == 9.73
    assert 47 < s[("after", "tx")]["gbytes_per_s"] < 49.5


def test_fragments():
    assert D.fragments(4 << 20) == (1024, 4096.0)
    assert D.fragments(4097) == (2, 4097 / 2)
    with pytest.raises(ValueError):
        D.fragments(0)


def test_calibration_fits_and_is_deterministic(cal):
    assert cal == D.calibrate()
    assert 10 < cal.transfer_ns < 200          # a cache-line transfer, not a disk seek
    assert 0 < cal.app_work_ns < cal.net_work_ns
    df = D.reproduce(cal)
    # the figures the fit used are reproduced (idle, percentage points)
    targets = df[df["fit_target"]]
    assert len(targets) == 5 and (targets["role"] == "fitted").all()
    assert (targets["comparison"] == "fit quality").all()
    assert (targets["error"].abs() < 1.5).all(), targets


def test_reproduce_labels_what_the_fit_forces(cal):
    df = D.reproduce(cal).set_index(["quantity", "phase"])
    cap = df.loc[("throughput, picked run = fit load (GB/s)", "before")]
    ceil = df.loc[("CPU/counter ceiling, no link limit (GB/s)", "before"), "model"]
    # the row shows the ceiling when it is below the link, else the assumed link rate, labelled so
    if cap["role"] == "assumed":
        assert cap["model"] < ceil and cap["comparison"].startswith("assumed (the link rate")
        assert cap["error"] != cap["error"]          # no error against an assumption
    else:
        assert cap["role"] == "fitted" and cap["comparison"].startswith("forced by the fit")
        assert cap["model"] == pytest.approx(ceil)
    assert not cap["fit_target"]
    # compared with the picked run's load the fit saw, not the 5-run mean
    assert cap["seed"] == pytest.approx(sum(D.SEED_KPERF[("before", "tx")]["gbps"]) / 8)
    assert cap["seed"] != D.SEED_THROUGHPUT["before"][0]
    net = df.loc[("TX net CPU idle (%)", "before")]
    assert net["role"] == "predicted" and net["comparison"] == "same-run consistency check"
    assert df.loc[("throughput (GB/s)", "after"), "role"] == "assumed"
    assert "predicted" not in set(df[df["comparison"].str.startswith("fit quality")]["role"])
    assert set(df[df["comparison"].str.startswith("forced")]["role"]) <= {"fitted"}


def test_ceiling_follows_the_calibration_load():
    """The reason the cap is fit quality: refit at another matched load and
    the modelled refcount_t ceiling moves with that load."""
    df = D.ceiling_follows_load([0.6, 1.0], duration_ns=2.5e5)
    ratio = df["ceiling_gbytes_per_s"] / df["calibration_gbytes_per_s"]
    assert ((ratio - 1).abs() < 0.1).all(), df
    assert df["ceiling_gbytes_per_s"].iloc[0] < 0.75 * df["ceiling_gbytes_per_s"].iloc[1]
    assert (df["line_busy_share"] > 0.9).all()


def test_per_flow_idle_is_a_same_run_check(cal):
    """Its mean was fitted: labelled a same-run check, never "predicted"."""
    df = D.per_flow_idle(cal)
    tx = D.SEED_KPERF[("before", "tx")]
    assert df["published_idle"].tolist() == tx["app_idle"]
    assert (df["role"] == "same-run check (mean fitted)").all()
    # the null model keeps the published mean busy share
    assert df["proportional_idle"].mean() == pytest.approx(df["published_idle"].mean())
    # the slowest flow is the idlest, in the model as in the patch
    slow = df["gbit_per_s"].idxmin()
    assert df["model_idle"].idxmax() == slow == df["published_idle"].idxmax()


def test_percpu_formula_agrees_with_the_simulation():
    t = load("pack:1 numa:1 core:4 pu:1")
    lat = Latencies()
    sim = simulate(t, [0, 1, 2, 3], "percpu", work_ns=100, ops_per_item=1, rate_per_cpu=4e6,
                   duration_ns=2e6, lat=lat, seed=1)
    exp = percpu_expected(100, 1, 4e6, lat)
    assert sim["busy"] == pytest.approx(exp["busy"], rel=0.05)
    sat = simulate(t, [0], "percpu", work_ns=100, ops_per_item=1, duration_ns=2e5, lat=lat)
    assert sat["items_per_s"] == pytest.approx(percpu_expected(100, 1, None, lat)["items_per_s"],
                                               rel=0.02)


def test_fractional_ops_average_out():
    t = load("pack:1 numa:1 core:2 pu:1")
    r = simulate(t, [0, 1], "percpu", work_ns=50, ops_per_item=0.25, duration_ns=1e6, seed=2)
    assert r["ops_per_s"] / r["items_per_s"] == pytest.approx(0.25, abs=0.02)


def test_placements_relations():
    t = load("pack:2 numa:1 l3:2 core:4 pu:2")
    app, net = D.placement(t, 2, "same core")
    assert [relation(t, a, n) for a, n in zip(app, net)] == ["smt", "smt"]
    app, net = D.placement(t, 2, "same LLC")
    assert [relation(t, a, n) for a, n in zip(app, net)] == ["cluster", "cluster"]
    app, net = D.placement(t, 2, "cross-node")
    assert [relation(t, a, n) for a, n in zip(app, net)] == ["remote", "remote"]
    app, net = D.placement(t, 4, "spread")
    assert {t.cpus[c].node for c in app} == {0, 1}
    assert D.placement(t, 9, "same node") is None
    assert D.placement(load("pack:1 numa:1 core:4 pu:1"), 1, "cross-node") is None
    with pytest.raises(ValueError):
        D.placement(t, 1, "elsewhere")


def test_distance_and_message_size_lower_the_ceiling(cal):
    t = load("pack:2 numa:1 l3:2 core:8 pu:1")
    near = D.ceiling(t, *D.placement(t, 4, "same LLC"), "shared", cal, duration_ns=2e5)
    far = D.ceiling(t, *D.placement(t, 4, "cross-node"), "shared", cal, duration_ns=2e5)
    assert far < 0.8 * near
    df = D.sweep_message_sizes(t, cal, [1024, 4 << 20], *D.placement(t, 4, "same LLC"),
                               duration_ns=2e5)
    ref = df[df["counter"] == "refcount_t"].set_index("message_bytes")["ceiling_gbytes_per_s"]
    assert ref[1024] < 0.5 * ref[4 << 20]          # 4x the references per byte


def test_sweep_flows_shape_and_direction(cal):
    t = load("pack:2 numa:1 l3:2 core:4 pu:1")
    df = D.sweep_flows(t, cal, [1, 4], kinds=("same LLC", "spread"), duration_ns=1e5)
    assert set(df["counter"]) == {"refcount_t", "percpu_ref"}
    four = df[(df["flows"] == 4) & (df["placement"] == "same LLC")].set_index("counter")
    assert four.loc["percpu_ref", "ceiling_gbytes_per_s"] > four.loc["refcount_t",
                                                                     "ceiling_gbytes_per_s"]


def test_machine_ceilings_use_a_dumps_benchmark(cal):
    t = load("pack:2 numa:1 l3:2 core:4 pu:1")
    measured = load("pack:2 numa:1 l3:2 core:4 pu:1")
    # a machine whose measured transfers are 4x slower than the fit
    cpus = sorted(measured.cpus)
    rt = 8 * cal.transfer_ns
    measured.meta["bench"] = {"latency": {"cpus": cpus, "round_trip_ns": [
        [None if a == b else rt for b in cpus] for a in cpus]}}
    df = D.machine_ceilings({"plain": t, "slow": measured}, cal, flows=2, kinds=("same LLC",))
    got = df.set_index("machine")
    assert got.loc["slow", "latencies"].startswith("measured")
    assert got.loc["slow", "refcount_ceiling_gbytes_per_s"] < \
        got.loc["plain", "refcount_ceiling_gbytes_per_s"]


def test_percpu_memory():
    m = D.percpu_memory_bytes(256, bindings=2)
    assert m["percpu_bytes"] == 8 * 256 * 2 and m["refcount_t_bytes"] == 8
    assert m["percpu_ref_total_bytes"] == m["percpu_bytes"] + 2 * (
        D.PERCPU_REF_DATA_BYTES + D.PERCPU_REF_BYTES)


def test_conversion_cost_scales_with_possible_cpus():
    small = D.conversion_cost(8, 100.0, (1.0, 30.0))
    big = D.conversion_cost(512, 100.0, (1.0, 30.0))
    assert big["sum_us"] == pytest.approx(64 * small["sum_us"])
    assert big["percpu_bytes"] == 64 * small["percpu_bytes"]
    assert big["release_delay_ms"] == (1.0, 30.0)
    with pytest.raises(ValueError):
        D.conversion_cost(8, 100.0, (30.0, 1.0))
    with pytest.raises(ValueError):
        D.conversion_cost(0, 100.0, (1.0, 2.0))


# -- the benchmark's way into a dump and back (collect --bench, sysfs reader) ------

def test_dump_with_bench_json_reaches_meta(tmp_path):
    import json

    from numalab.collect import collect

    bench = {"kind": "atomics", "latency": {"cpus": [0], "round_trip_ns": [[None]]},
             "increments": []}
    out = collect("/", tmp_path / "m.tar.bz2",
                  extra_files={"bench.json": json.dumps(bench).encode()})
    topo = load(str(out))
    assert topo.meta["bench"] == bench
    plain = collect("/", tmp_path / "p.tar.bz2")
    assert "bench" not in load(str(plain)).meta


def test_collect_bench_and_bench_atomics_cli(tmp_path, capsys):
    import json

    from numalab.measure import atomics
    from numalab.cli import main

    try:
        atomics.library()
    except atomics.BenchUnavailable as e:
        pytest.skip(str(e))
    assert main(["collect", "--bench", "--quick", "-o", str(tmp_path / "b.tar.bz2")]) == 0
    meta = load(str(tmp_path / "b.tar.bz2")).meta
    assert meta["bench"]["kind"] == "atomics" and meta["bench"]["refops"]["rows"]
    capsys.readouterr()
    assert main(["bench", "atomics", "--quick", "--max-threads", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert {r["threads"] for r in result["refops"]["rows"]} == {1}
    assert main(["bench", "atomics", "--max-threads", "0"]) == 2


# -- what the chapter says about Linux 7.2's code (numalab.kernel.facts) -------------

import os
import re
from pathlib import Path

from numalab.kernel import facts as KF


def test_kernel_facts_state_the_orderings_the_chapter_states():
    r = KF.load("devmem-7.2")
    assert r["source"]["kernel"] == "7.2"
    # unbind: erase from the xarray, wait for RCU readers, then kill
    KF.in_order(r, "unbind.erase", "unbind.sync", "unbind.kill")
    # lookup: xa_load and the tryget inside one RCU read-side section
    KF.in_order(r, "lookup.rcu_lock", "lookup.xa_load", "lookup.get", "lookup.rcu_unlock")
    # the free: detach, then percpu_ref_exit, then kfree; the bind error path likewise
    KF.in_order(r, "free.detach", "free.exit", "free.kfree")
    KF.in_order(r, "bind.init", "bind.detach", "bind.exit")
    KF.in_order(r, "release.init_work", "release.schedule_work")
    KF.in_order(r, "prc.switch_get", "prc.switch_hurry")
    KF.in_order(r, "prc.confirm_exit", "prc.confirm_put")
    KF.in_order(r, "prc.kill_switch", "prc.kill_put")
    f = r["facts"]
    assert f["pr.tryget_atomic"].name == "atomic_long_add_unless"
    assert f["pr.tryget_live_atomic"].name == "atomic_long_inc_not_zero"
    assert f["get.tryget"].name == "percpu_ref_tryget" and f["binding.ref"].type == "struct percpu_ref"
    with pytest.raises(KF.FactError):
        KF.in_order(r, "unbind.kill", "unbind.erase")
    with pytest.raises(KF.FactError):
        KF.in_order(r, "unbind.erase", "lookup.xa_load")


_C = """struct thing {
\tint a;
\tstruct percpu_ref ref;
};

void put(struct thing *t);

static inline void
put(struct thing *t)
{
\tpercpu_ref_put(&t->ref);
}

void unbind(struct thing *t)
{
\txa_erase(&xa, t->id);
\t/* wait */
\tsynchronize_net();
\tpercpu_ref_kill(&t->ref);
}
"""


def test_kernel_facts_checker_finds_and_refuses():
    F = KF.Fact
    assert KF.find(_C, F("m", "member", "x.h", "thing", "ref", 0, "struct percpu_ref")) == 3
    assert KF.find(_C, F("c", "call", "x.h", "put", "percpu_ref_put", 0)) == 11
    assert KF.find(_C, F("n", "no_comment", "x.h", "put", "", 0)) == 8
    assert KF.find(_C, F("k", "call", "x.h", "unbind", "percpu_ref_kill", 0)) == 19
    assert KF.find(_C, F("k", "no_comment", "x.h", "unbind", "percpu_ref_kill", 0)) == 19
    # a comment right above the call, or anywhere in the function, is seen
    assert KF.find(_C, F("s", "no_comment", "x.h", "unbind", "synchronize_net", 0)) is None
    assert KF.find(_C, F("u", "no_comment", "x.h", "unbind", "", 0)) is None
    assert KF.find(_C, F("g", "call", "x.h", "put", "percpu_ref_get", 0)) is None
    assert KF.find(_C, F("p", "phrase", "x.h", "unbind", "WAIT", 0)) == 17
    assert KF.find(_C, F("d", "discarded_call", "x.h", "unbind", "synchronize_net", 0)) == 18
    assert KF.find("int f(void)\n{\n\tif (!g(x))\n\t\treturn 1;\n}\n",
                   F("d", "discarded_call", "x.c", "f", "g", 0)) is None


def test_kernel_facts_hold_in_the_7_2_tree():
    """Runs whenever a 7.2 tree is found: $NUMALAB_LINUX_7_2, the lab cache's
    facts tree (python -m numalab.kernel.facts --unpack 7.2) or a lab build tree."""
    tree = KF.find_tree("7.2")
    if tree is None:
        pytest.skip("no Linux 7.2 tree: set NUMALAB_LINUX_7_2 or run "
                    "python -m numalab.kernel.facts --unpack 7.2")
    assert "PATCHLEVEL = 2" in (tree / "Makefile").read_text()
    assert KF.check_tree(tree) == []
    # and the check can fail: a fact moved by one line is reported
    moved = dict(KF.load())
    f = moved["facts"]["unbind.kill"]
    moved["facts"] = {"unbind.kill": KF.Fact(**{**f.__dict__, "line": f.line + 1})}
    assert len(KF.check_tree(tree, moved)) == 1


def _seed_002():
    from numalab.datasets import repo_root
    for base in (repo_root().parent, repo_root().parent.parent):
        p = base / "shared" / "seeds" / "002_21e9fc63aae7b5a5.txt"
        if p.is_file():
            return p.read_text()
    pytest.skip("the patch texts (shared/seeds) are not beside this checkout")


def test_patch_before_and_after_are_what_the_chapter_says():
    """Before = the patch's base (its removed lines), after = its added lines;
    7.2 merged the calls but none of the added comments (the record's
    no_comment facts)."""
    text = _seed_002()
    diff = text[text.index("diff --git"):text.index("base-commit:")]
    removed = "\n".join(x for x in diff.splitlines() if x.startswith("-") and not x.startswith("---"))
    added = "\n".join(x for x in diff.splitlines() if x.startswith("+") and not x.startswith("+++"))
    for call in ("refcount_inc_not_zero", "refcount_dec_and_test", "refcount_set"):
        assert call + "(" in removed
    for call in ("percpu_ref_tryget", "percpu_ref_put", "percpu_ref_kill", "percpu_ref_init",
                 "percpu_ref_exit"):
        assert call + "(" in added
    assert "base-commit: ab084f0b8d6d" in text
    # the comments the review asked to drop: four blocks in the patch
    assert len(re.findall(r"^\+\s*/\*", added, re.M)) == 4
    assert "work_struct *work" in added          # the rename 7.2 did not take
    r = KF.load("devmem-7.2")
    assert r["facts"]["get_net_iov.discarded"].kind == "discarded_call"
    for fid in ("release.no_comment", "free.no_comment", "put.no_comment",
                "unbind.kill_no_comment", "free.keeps_wq"):
        assert fid in r["facts"]


def test_seed_picked_runs_and_the_per_cpu_split():
    r = D.seed_picked_runs()
    b, a = r["before"], r["after"]
    assert b["picked_gbytes_per_s"] == pytest.approx(48.15, abs=0.01)
    assert 0.8 < b["sds_above_mean"] < 1.0          # (48.15 - 45.31) / 3.17
    # one net CPU nearly saturated, the other three about three quarters idle
    assert b["busiest_net_cpu"] == 56 and b["net_idle"][56] == 17.06
    assert all(74 < b["net_idle"][c] < 77 for c in (57, 58, 59))
    assert a["busiest_net_cpu"] == 56 and a["net_idle_low"] == 6.22


def test_held_out_verdicts_fail_the_model(cal):
    """The model's held-out tests: it fails the net-CPU idle by far more
    than the tolerance; a model that met every test would pass them."""
    import pandas as pd
    rep = D.reproduce(cal)
    v = D.held_out_verdicts(rep, 3.0, 2.0, {"m": (0, 6)})
    assert v.set_index("test").loc["TX net-CPU idle before the patch", "verdict"] == "failed"
    good = pd.DataFrame([{"quantity": "TX net CPU idle (%)", "phase": "before", "seed": 61.0,
                          "model": 59.0}])
    assert set(D.held_out_verdicts(good, 1.0, 2.0, {"m": (6, 6)})["verdict"]) == {"passed"}
    def r(w, arm, hold, lo, hi):
        return {"threads": 2, "work_ns": w, "arm": arm, "role": "predicted", "hold_share": hold,
                "model_low": lo, "model_high": hi, "measured_low": 11.0, "measured_high": 13.0}
    # window 0 meets the first configuration, window 1 the second: no single window meets both
    bc = pd.DataFrame([r(40, "refcount_t get", 0.0, 10.0, 12.0), r(40, "refcount_t get", 1.0, 20.0, 22.0),
                       r(150, "refcount_t put", 0.0, 1.0, 2.0), r(150, "refcount_t put", 1.0, 12.0, 14.0),
                       r(150, "percpu add", 0.0, 1.0, 2.0)])
    assert D.bench_inside(bc) == (1, 2)
    met = D.bench_met(bc)
    assert (met["inside"], met["total"], met["share"]) == (1, 2, 0.0)
    assert met["met"] == [(40.0, "refcount_t get")]
    bc.loc[0, ["model_low", "model_high"]] = [1.0, 2.0]
    bc.loc[1, ["model_low", "model_high"]] = [12.0, 12.5]
    assert D.bench_inside(bc) == (2, 2)
    assert D.bench_met(bc)["share"] == 1.0 and D.bench_met(bc)["inside"] == 2


def test_verdicts_separate_same_run_checks_from_held_out_tests(cal):
    """The two tests on the fit's own run are consistency checks, the
    benchmark's run sets are the held-out tests (a group of a split set says
    so), and the criterion says what tolerance the net-CPU check would need."""
    v = D.held_out_verdicts(D.reproduce(cal), 3.0, 2.0, {"quiet": (1, 6)})
    assert v["kind"].tolist() == ["same-run consistency check"] * 2 + ["held-out test"]
    assert "would pass only with a tolerance of" in v.loc[0, "criterion"]
    # a group of a set split after the fact (by the ratio it is tested on) is labelled as such
    g = D.held_out_verdicts(D.reproduce(cal), 3.0, 2.0, {"q": (1, 6), "s, fast with work": (1, 9),
                                                         "s, slow with work": (0, 9)})
    assert g["kind"].tolist()[2:] == ["held-out test"] + [
        "held-out test, one group of a run set split after the fact"] * 2
    # each row says its own role: the per-flow check's mean was fitted, the benchmark is predicted
    assert "mean fitted" in v.loc[1, "role"] and v.loc[2, "role"] == "predicted vs measured"


def test_real_tree_check_runs_when_a_tree_is_found(tmp_path, monkeypatch):
    """find_tree: the env var wins (and must name a 7.2 tree); else the lab
    cache's facts tree; else None."""
    monkeypatch.delenv("NUMALAB_LINUX_7_2", raising=False)
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path))
    assert KF.find_tree("7.2") is None
    t = tmp_path / "facts" / "linux-source-7.2"
    t.mkdir(parents=True)
    (t / "Makefile").write_text("VERSION = 7\nPATCHLEVEL = 2\n")
    assert KF.find_tree("7.2") == t
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "Makefile").write_text("VERSION = 6\nPATCHLEVEL = 1\n")
    monkeypatch.setenv("NUMALAB_LINUX_7_2", str(tmp_path / "other"))
    with pytest.raises(KF.FactError, match="not a Linux 7.2 tree"):
        KF.find_tree("7.2")


def test_the_kill_order_and_the_checks_the_chapter_states_are_recorded():
    """Review 3: the kill sets DEAD, switches (ATOMIC, its own reference, the
    callback) and only then puts the initial reference; the fragments' puts
    run in skb_release_data() after its last-user test."""
    from numalab.kernel import facts as KF
    K = KF.load("devmem-7.2")
    KF.in_order(K, "prc.kill_sets_dead", "prc.kill_switch", "prc.kill_put")
    KF.in_order(K, "prc.switch_sets_atomic", "prc.switch_own_get", "prc.switch_hurry")
    KF.in_order(K, "skb.release_data_last_user", "skb.release_data_frag_unref")
    assert K["facts"]["rcl.saturate_set"].file == "lib/refcount.c"


def test_a_phrase_is_found_inside_its_scope_not_first_in_the_file():
    from numalab.kernel import facts as KF
    text = ("static void a(void)\n{\n\tx |= FLAG;\n}\n\n/* b's comment */\n"
            "static void b(void)\n{\n\ty = 1;\n\tx |= FLAG;\n}\n")
    f = KF.Fact(id="t", kind="phrase", file="f.c", scope="b", name="x |= FLAG;", line=10)
    assert KF.find(text, f) == 10
    assert KF.find(text, KF.Fact(id="t", kind="phrase", file="f.c", scope="b", name="b's comment",
                                 line=6)) == 6
    assert KF.find(text, KF.Fact(id="t", kind="phrase", file="f.c", scope="", name="x |= FLAG;",
                                 line=3)) == 3
