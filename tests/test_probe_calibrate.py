"""Calibration of the probe model on the patches' published probe times."""

import numpy as np
import pytest

from numalab.models.probe.calibrate import (NVME_FIT, PUBLISHED, catalogue, fit_nvme,
                                            reproduce, seed_machine)

# Per-probe tolerances on |model / published - 1|. The two published runs of
# the same mainline configuration differ by up to 9 % on one drive (49.5 vs
# 54.0 ms), so NVMe cannot be pinned tighter than a few percent; the platform
# driver's two runs differ by 30 % with no change in its path.
TOL = {"nvme": 0.11, "mlx5_core": 0.02, "usb": 0.10, "intel_rapl_msr": 0.20}


def test_seed_machine_is_the_published_one():
    t = seed_machine()
    assert len(t.cpus) == 256
    assert t.cpumask_of_node(0) == ((1 << 64) - 1) | (((1 << 64) - 1) << 128)


@pytest.fixture(scope="module")
def fit():
    return fit_nvme(bootstrap=12)


def test_nvme_fit(fit):
    assert fit.rounds == NVME_FIT["rounds"]
    assert fit.cpu_ms == pytest.approx(NVME_FIT["cpu_ms"], abs=max(3 * fit.cpu_err, 0.1))
    assert fit.wait_ms == pytest.approx(NVME_FIT["wait_ms"], abs=max(3 * fit.wait_err, 0.1))
    # 4.4 % with the tick-granular CPU-intensive check (2.2 % when it was
    # checked continuously, a fit that rested on that idealisation)
    assert fit.rel_rms < 0.05
    assert 0 < fit.cpu_err < 2 and 0 < fit.wait_err < 2
    assert np.isfinite(fit.bootstrap["cpu_std"]) and fit.bootstrap["cpu_std"] > 0
    # the alone cost is the mean of the six after-values
    after = [ns / 1e6 for k in (("fix", "after"), ("series", "after"))
             for drv, _, ns in PUBLISHED[k] if drv == "nvme"]
    assert fit.cpu_ms + fit.wait_ms == pytest.approx(np.mean(after), rel=0.04)
    # the split is identified: the mainline slowdown needs ~half the time on CPU
    assert 0.3 < fit.cpu_share < 0.7


def test_reproduced_tables_within_tolerance():
    df = reproduce()
    assert len(df) == sum(len(v) for v in PUBLISHED.values())
    for drv, tol in TOL.items():
        errs = df[df.driver == drv].rel_error.abs()
        assert len(errs) and (errs <= tol).all(), (drv, errs.max())
    # before: every NVMe probe on CPU 0 in a bound kworker; after: spread
    nv = df[df.driver == "nvme"]
    before, after = nv[nv.phase == "before"], nv[nv.phase == "after"]
    assert (before.cpu == 0).all() and before.thread.str.match(r"kworker/0:\d").all()
    for src in ("fix", "series"):
        assert after[after.source == src].cpu.nunique() == 3
    # the headline: ~35 % faster per NVMe probe
    gain = 1 - after.model_ms.mean() / before.model_ms.mean()
    published = 1 - after.published_ms.mean() / before.published_ms.mean()
    # (fit quality; with the tick-granular CPU-intensive check the 4-round fit
    # gives 28.7 % against 33.1 % published: 4.4 points short)
    assert gain == pytest.approx(published, abs=0.05)
    # mlx5 is synchronous: unchanged
    ml = df[df.driver == "mlx5_core"]
    assert ml[ml.phase == "before"].model_ms.mean() == pytest.approx(
        ml[ml.phase == "after"].model_ms.mean(), rel=1e-9)


def test_catalogue_kinds():
    cat = catalogue()
    assert set(cat) == {"nvme", "mlx5", "usb", "platform"}
    assert cat["nvme"].probe_type == "async" and cat["mlx5"].probe_type == "sync"
    assert cat["mlx5"].total_ms == pytest.approx(510.7, rel=0.01)
    assert cat["usb"].total_ms == pytest.approx(0.94, rel=0.02)


# -- issue 15: held-out test and placement ----------------------------------------

def test_held_out_fit_on_one_posting_predicts_the_other():
    from numalab.models.probe.calibrate import held_out_nvme, nvme_scenarios
    fit1 = fit_nvme(rounds=(2, 4), sources=("fix",))
    ho = held_out_nvme(fit1, held="series")
    assert len(ho) == 6 and set(ho.phase) == {"before", "after"}
    assert set(ho.policy) == {"mainline-7.2", "driver-core"}
    # not a held-out test: the series is a second run of the same experiment
    # (same author, machine and drives), and copying the PCI patch's per-drive
    # times predicts it with max 8.2 %, RMS 3.7 % (the review's figures)
    from numalab.models.probe.calibrate import copy_baseline
    cb = copy_baseline(held="series")
    assert len(cb) == 6 and list(cb.device) == list(ho.device)
    assert cb.rel_error.abs().max() == pytest.approx(0.082, abs=0.001)
    assert float(np.sqrt((cb.rel_error ** 2).mean())) == pytest.approx(0.037, abs=0.001)
    assert (ho.rel_error.abs() < 0.15).all(), ho
    with pytest.raises(Exception):
        nvme_scenarios(("bogus",))


def test_placement_against_published_lines():
    from numalab.models.probe.calibrate import placement, thread_kind
    assert thread_kind("kworker/u1025:5") == "unbound kworker"
    assert thread_kind("kworker/0:4") == "bound kworker"
    pl = placement(reproduce())
    assert len(pl) == sum(len(v) for v in PUBLISHED.values())
    assert pl.same_kind.all() and pl.same_node.all()
    bound = pl[pl.published_kind == "bound kworker"]
    assert len(bound) and bound.same_cpu.all()
    assert pl[pl.published_kind != "bound kworker"].same_cpu.isna().all()


def test_lab_placement_matches_traces():
    from numalab.models.probe.calibrate import lab_placement
    lp = lab_placement()
    if lp.empty:
        pytest.skip("no lab dump with a probe trace in this checkout")
    assert lp.same_kinds.all()
    # a bound kworker's CPU is the kernel's choice and the port must match it;
    # which idle CPU of the pod an unbound worker runs on is the scheduler's
    # (as for the published lines), so only its kind is compared
    bound = lp[lp.measured_kinds == "bound kworker"]
    assert len(bound) and bound.same_cpus.all(), bound[["dump", "measured_cpus", "model_cpus"]]
    # port_cpus: the port's CPU where the probe ran in a bound kworker, "caller" where
    # pci_call_probe() returned nr_cpu_ids (the calling worker, whose CPU is not predicted)
    for r in lp.itertuples():
        toks = r.port_cpus.split(",")
        assert len(toks) == r.devices
        if r.model_kinds == "bound kworker":
            assert toks == r.model_cpus.split(","), r
        else:
            assert set(toks) == {"caller"}, r
    caller = lp[lp.cmdline.str.contains("isolcpus") | (lp.policy == "pf-wq-worker")]
    assert caller.port_cpus.str.split(",").map(set).eq({"caller"}).all()


def test_catalogue_totals_from_before_lines_only():
    before = catalogue(phases=("before",))
    both = catalogue()
    mlx_before = [ns / 1e6 for k, rows in PUBLISHED.items() if k[1] == "before"
                  for d, _, ns in rows if d == "mlx5_core"]
    assert before["mlx5"].total_ms == pytest.approx(np.mean(mlx_before))
    assert before["mlx5"].total_ms != pytest.approx(both["mlx5"].total_ms, rel=1e-6)


def test_cached_fit_is_the_fit(tmp_path):
    from numalab.models.probe.calibrate import fit_nvme_cached
    kw = dict(rounds=(4,), bootstrap=2, seed=1, sources=("fix",))
    first = fit_nvme_cached(cache_dir=tmp_path, **kw)
    assert len(list(tmp_path.glob("*.json"))) == 1
    again = fit_nvme_cached(cache_dir=tmp_path, **kw)
    assert again == first == fit_nvme(**kw)
    fit_nvme_cached(cache_dir=tmp_path, **{**kw, "seed": 2})      # other arguments: refit
    assert len(list(tmp_path.glob("*.json"))) == 2


def test_cached_fit_runs_once_when_two_ask_at_once(tmp_path, monkeypatch):
    """The chapter and its evidence page run in parallel and ask for the same
    fit: the second waits on the key's lock and reads the first one's result."""
    import threading
    import time
    from numalab.models.probe import calibrate as cal
    calls = []

    def slow_fit(topo=None, **kw):
        calls.append(kw)
        time.sleep(0.3)
        return cal.Fit(cpu_ms=1.0, wait_ms=2.0, rounds=4, cpu_err=0.1, wait_err=0.1,
                       rel_rms=0.1, by_rounds={4: (0.1, 1.0, 2.0)})

    monkeypatch.setattr(cal, "fit_nvme", slow_fit)
    out = []
    threads = [threading.Thread(target=lambda: out.append(
        cal.fit_nvme_cached(cache_dir=tmp_path, rounds=(4,), seed=7))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert len(out) == 2 and out[0] == out[1]
