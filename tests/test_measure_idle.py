"""Chapter 4's measured inputs: a real build's switch rate, a contended bitmap."""

import json
import os
import shutil

import pytest

from numalab.measure import bitops, idle_inputs_of, idle_rate
from numalab.validate import ParameterError


def test_derive_maps_counts_to_model_inputs():
    d = idle_rate.derive(cpu_s=2.0, voluntary=1000, involuntary=5, wall_s=1.0, cpus=4)
    assert d["run_mean_us"] == pytest.approx(2000.0)       # 2 s of CPU over 1000 runs
    assert d["voluntary_per_cpu_s"] == pytest.approx(500.0)
    assert d["switches_per_cpu_per_s"] == pytest.approx(250.0)
    assert d["load"] == pytest.approx(0.5)
    assert idle_rate.derive(1.0, 0, 0, 1.0, 1)["run_mean_us"] is None


def test_sources_are_deterministic(tmp_path):
    a = idle_rate.write_sources(tmp_path / "a", files=3, funcs=2)
    b = idle_rate.write_sources(tmp_path / "b", files=3, funcs=2)
    for name in ("u0.c", "u2.c", "Makefile"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    with pytest.raises(ParameterError):
        idle_rate.write_sources(tmp_path / "c", files=0)


@pytest.mark.skipif(not (shutil.which("make") and (shutil.which("cc") or shutil.which("gcc"))),
                    reason="needs make and a C compiler")
def test_measured_build_counts_its_processes():
    r = idle_rate.run_idle_rate(files=2)
    assert r["cpu_s"] > 0 and r["wall_s"] > 0
    # every compiler process waits for its children at least once
    assert r["voluntary"] >= 1 and r["run_mean_us"] > 0
    assert 0 < r["load"] <= 1


def test_too_few_cpus_say_what_cannot_be_measured():
    ok, cannot = bitops.curve_or_reason(2)
    assert not ok and any("curve" in c for c in cannot)
    assert bitops.curve_or_reason(bitops.MIN_CPUS_FOR_CURVE) == (True, [])


@pytest.fixture
def lib():
    try:
        return bitops.library()
    except bitops.BitopsUnavailable as e:
        pytest.skip(str(e))


def test_bitops_record(lib):
    ncpu = len(os.sched_getaffinity(0))
    r = bitops.run_bitops(quick=True, max_threads=2)
    assert [row["threads"] for row in r["flips"]] == list(range(1, min(2, ncpu) + 1))
    assert all(row["shared_flips_per_s"] > 0 for row in r["flips"])
    assert (r["curve"] is None) == (ncpu < bitops.MIN_CPUS_FOR_CURVE)
    assert (r["cannot"] == []) == (ncpu >= bitops.MIN_CPUS_FOR_CURVE)
    assert len(os.sched_getaffinity(0)) == ncpu             # the caller is not left pinned
    if ncpu > 1:
        assert r["handoff"] and all(h["ns"] > 0 for h in r["handoff"])
    json.dumps(r)                                           # storable as is


def test_bad_cpu_is_an_error(lib):
    with pytest.raises(bitops.BitopsUnavailable):
        bitops.flips_per_second([10 ** 5], 10)


def test_collect_bench_stores_idle_inputs(monkeypatch, tmp_path):
    """`numalab collect --bench` puts the record next to the atomics one, and
    a dump read back exposes it to chapter 4."""
    import numalab.measure.atomics as atomics
    import numalab.measure as measure
    from numalab.cli import main
    from numalab.topology import load

    monkeypatch.setattr(atomics, "run_atomics", lambda quick, progress, **kw: {
        "kind": "atomics", "seconds": 0, "latency": {"cpus": [0], "round_trip_ns": [[None]]}})
    monkeypatch.setattr(measure, "run_idle_inputs",
                        lambda quick: {"kind": "idle-inputs", "quick": quick})
    out = tmp_path / "m.tar.bz2"
    assert main(["collect", "--bench", "--quick", "-o", str(out)]) == 0
    rec = idle_inputs_of(load(str(out)))
    assert rec == {"kind": "idle-inputs", "quick": True}


def test_bench_target_is_registered():
    from numalab.measure.bench import targets
    assert "idle-inputs" in targets()


def test_chapter_inputs_are_the_quiet_five_runs():
    """Chapter 4 takes the collected dump's record with the most runs: the
    quiet 2026-11-25 set (five runs, load average below 1 around them), with
    the loaded runs of the same day kept beside it for comparison only."""
    from numalab import datasets as ds
    from numalab.measure import load_span, loaded_sets, pick_idle_inputs
    own = ds.load_datasets([p for p in ds.project_datasets() if "/collected/" in p])
    name, rec = pick_idle_inputs({k: idle_inputs_of(t) for k, t in own.items() if idle_inputs_of(t)})
    assert name.endswith("20261125") and rec["runs"] == 5
    lo, hi = load_span(rec)
    assert hi < 1.0 <= rec["summary"]["run_mean_us"]["low"]
    loaded = loaded_sets(rec)
    assert [s["runs"] for s in loaded] == [1, 5]
    assert min(s["load_span"][0] for s in loaded) > 5 * hi
