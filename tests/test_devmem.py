"""The devmem scenario of the percpu_ref patch and its calibration."""


import pytest

from numalab.models import devmem as D
from numalab.models.refcount import Latencies, percpu_expected, relation, simulate
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
    fitted = df[df["role"] == "fitted"]
    assert (fitted["error"].abs() < 1.5).all(), fitted


def test_unfitted_throughput_is_near_the_seed(cal):
    topo = D.seed_topology()
    tx = D.SEED_KPERF[("before", "tx")]
    shared = D.ceiling(topo, tx["app_cpu"], tx["net_cpu"], "shared", cal)
    percpu = D.ceiling(topo, tx["app_cpu"], tx["net_cpu"], "percpu", cal)
    mean, spread = D.SEED_THROUGHPUT["before"]
    assert mean - 2 * spread < shared < mean + 3 * spread
    assert percpu > 1.5 * shared


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
    assert got.loc["slow", "latencies"] == "measured"
    assert got.loc["slow", "refcount_ceiling_gbytes_per_s"] < \
        got.loc["plain", "refcount_ceiling_gbytes_per_s"]


def test_percpu_memory():
    m = D.percpu_memory_bytes(256, bindings=2)
    assert m["percpu_bytes"] == 8 * 256 * 2 and m["refcount_t_bytes"] == 8


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

    from numalab import atomics
    from numalab.cli import main

    try:
        atomics.library()
    except atomics.BenchUnavailable as e:
        pytest.skip(str(e))
    assert main(["collect", "--bench", "--quick", "-o", str(tmp_path / "b.tar.bz2")]) == 0
    meta = load(str(tmp_path / "b.tar.bz2")).meta
    assert meta["bench"]["kind"] == "atomics" and meta["bench"]["increments"]
    capsys.readouterr()
    assert main(["bench", "atomics", "--quick", "--max-threads", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [r["threads"] for r in result["increments"]] == [1]
    assert main(["bench", "atomics", "--max-threads", "0"]) == 2
