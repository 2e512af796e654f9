"""The inputs an independent review found hanging or crashing (issue 12, part
3), each now refused at once: one line and exit 2 from the command line, a
ParameterError (or BenchUnavailable where the machine cannot run the
benchmark) from the API. Plus the shared checkers of ``numalab.validate``,
the argument validators of the commands that are not run here (``build``,
``bench``, ``collect``), the work budgets, and the C benchmark's thread
handling when ``pthread_create()`` fails part-way.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import math
import os
import shutil
import signal
import subprocess
import time
from types import SimpleNamespace

import numpy as np
import pytest

from numalab.measure import atomics, bench
from numalab.cli import main, make_parser
from numalab.errors import NumalabError, ParameterError
from numalab.models.idle import sim as idle_sim
from numalab.models.probe import sim as probe
from numalab.models.refcount import devmem
from numalab.models.refcount import sim as refcount
from numalab.topology import load
from numalab.validate import (MAX_SEED, budget, integer, number, one_of, option_integer,
                              option_number, option_seed, seed)

TOPO = "pack:1 numa:2 core:2 pu:1"


@contextlib.contextmanager
def within(seconds: float):
    """Fail (instead of hanging the suite) when the block runs too long."""
    def fire(signum, frame):
        raise AssertionError(f"still running after {seconds} s")
    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def one_line_exit_2(capsys, argv: list[str]) -> str:
    """Run the command; assert exit 2, empty stdout, one line on stderr; return it."""
    with within(10):
        rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2, (argv, out, err)
    assert out == ""
    assert err.endswith("\n") and len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    return err


# -- the review's findings: the commands -------------------------------------------

@pytest.mark.parametrize("argv, says", [
    (["probe", TOPO, "--devices", "nvme:2", "--background", "nan"], "--background"),
    (["probe", TOPO, "--devices", "nvme:2", "--alpha", "nan"], "--alpha"),
    (["probe", TOPO, "--devices", "nvme:2", "--background", "inf"], "--background"),
    (["probe", TOPO, "--devices", "nvme:2", "--seed", "-1"], "--seed"),
    (["probe", TOPO, "--devices", "nvme:2", "--background=-0.5"], "--background"),
    (["idle", TOPO, "--duration", "nan"], "--duration"),
    (["idle", TOPO, "--duration", "inf"], "--duration"),
    (["idle", TOPO, "--run-us", "nan"], "--run-us"),
    (["idle", TOPO, "--seed", "-1"], "--seed"),
])
def test_review_findings_cli(capsys, argv, says):
    t0 = time.monotonic()
    err = one_line_exit_2(capsys, argv)
    assert time.monotonic() - t0 < 5
    assert err.startswith(f"numalab {argv[0]}: error: argument {says}")
    assert f"not '{argv[-1]}'" in err or argv[-1].split("=")[-1] in err


def test_idle_run_that_would_not_end_is_refused(capsys):
    err = one_line_exit_2(capsys, ["idle", TOPO, "--run-us", "0.001", "--duration", "60000"])
    assert "wakeups" in err and "--duration" in err


def test_probe_refuses_isolcpus_outside_the_machine_and_too_many_devices(capsys):
    assert "not CPUs of" in one_line_exit_2(
        capsys, ["probe", TOPO, "--devices", "nvme", "--isolcpus", "0-7"])
    assert "at most 4096" in one_line_exit_2(
        capsys, ["probe", TOPO, "--devices", "nvme:4096,usb:1"])
    # a count with more digits than int() reads is a syntax error, not a traceback
    assert "cannot read" in one_line_exit_2(
        capsys, ["probe", TOPO, "--devices", "nvme:" + "9" * 5000])


def test_usage_errors_are_one_line(capsys):
    for argv in (["probe", TOPO], ["show"], ["nosuch"], ["idle", TOPO, "--bogus"],
                 ["group-cpus", TOPO, "--groups", "1.5"], ["idle", TOPO, "--load\n1"]):
        one_line_exit_2(capsys, argv)


def test_help_and_version_exit_0(capsys):
    assert main(["--version"]) == 0
    assert main(["probe", "--help"]) == 0
    capsys.readouterr()


# -- the review's findings: the APIs -----------------------------------------------

@pytest.fixture(scope="module")
def topo():
    return load(TOPO)


@pytest.fixture(scope="module")
def cal():
    return devmem.Calibration(app_work_ns=300.0, net_work_ns=300.0, rx_work_ns=300.0,
                              transfer_ns=45.0, rx_refs_per_frag=1.0)


def test_refcount_simulate_zero_duration(topo):
    with within(5), pytest.raises(ParameterError, match="duration_ns"):
        refcount.simulate(topo, [0, 1], duration_ns=0)


def test_percpu_expected_of_a_free_item():
    with within(5), pytest.raises(ParameterError, match="no time"):
        refcount.percpu_expected(0, 0, None)


@pytest.mark.parametrize("mode", ["shared", "percpu"])
def test_devmem_zero_offered_load(topo, cal, mode):
    with within(5), pytest.raises(ParameterError, match="gbytes_per_s"):
        devmem.simulate_devmem(topo, [0], [1], mode, cal, gbytes_per_s=0)
    with within(5), pytest.raises(ParameterError, match=r"gbytes_per_s\[0\]"):
        devmem.simulate_devmem(topo, [0], [1], mode, cal, gbytes_per_s=[math.nan])


def test_refcount_items_that_take_no_time(topo):
    with within(5), pytest.raises(ParameterError, match="would not advance"):
        refcount.simulate(topo, [0, 1], work_ns=0, ops_per_item=0)
    with within(5), pytest.raises(ParameterError, match="would not advance"):
        refcount.simulate(topo, [0, 1], "percpu", work_ns=0, ops_per_item=1,
                          lat=refcount.Latencies(op_local_ns=0))
    # with an offered load, arrivals move time on: accepted
    with within(20):
        r = refcount.simulate(topo, [0, 1], work_ns=0, ops_per_item=0, rate_per_cpu=1e6,
                              duration_ns=1e5)
    assert r["items_per_s"] > 0


@pytest.mark.parametrize("bad", [dict(background=-0.5), dict(background=math.nan),
                                 dict(background=math.inf), dict(alpha=math.nan),
                                 dict(alpha=-0.1), dict(alpha=1.5), dict(max_active=0),
                                 dict(cpu_intensive_thresh_ms=0), dict(background={0: -1}),
                                 dict(isolcpus=-1), dict(isolcpus=1 << 70_000),
                                 dict(affinity_scope="x"), dict(caller_cpu={"usb": -1})])
def test_probe_params_refused(bad):
    with pytest.raises(probe.ProbeModelError):
        probe.Params(**bad)


def test_negative_background_no_longer_shortens_a_probe():
    t = probe.machine(1, 4)
    devs = [probe.Device("p", "platform", -1, "sync", 10, 0, 1)]
    base = probe.simulate(t, devs, "mainline").makespan
    assert base == pytest.approx(10)
    with pytest.raises(probe.ProbeModelError):
        probe.simulate(t, devs, "mainline", params=probe.Params(background=-0.5))


@pytest.mark.parametrize("bad", [dict(cpu_ms=math.nan), dict(wait_ms=math.inf),
                                 dict(rounds=0), dict(rounds=2.5), dict(rounds=10 ** 6),
                                 dict(node=-2), dict(node=True), dict(cpu_ms="1")])
def test_probe_devices_refused(bad):
    with pytest.raises(probe.ProbeModelError):
        probe.Device("d0", **bad)


def test_probe_seed_and_machine_refused():
    t = probe.machine(2, 2)
    dev = [probe.Device("nvme0", node=0, probe_type="async")]
    for s in (-1, 1.5, math.nan, MAX_SEED + 1, True):
        with pytest.raises(probe.ProbeModelError, match="seed"):
            probe.simulate(t, dev, "mainline", seed=s)
    with pytest.raises(probe.ProbeModelError):
        probe.machine(0, 4)
    with pytest.raises(probe.ProbeModelError):
        probe.machine(1 << 10, 1 << 10)
    with pytest.raises(probe.ProbeModelError):
        probe.isolate_share(t, math.nan)


@pytest.mark.parametrize("bad", [dict(duration_ms=math.nan), dict(duration_ms=math.inf),
                                 dict(run_mean_us=math.nan), dict(load=math.nan),
                                 dict(warmup_ms=-1), dict(tasks_per_cpu=0),
                                 dict(waker_local=1.5), dict(local_ns=math.inf),
                                 dict(pick_flags=8), dict(per_node=1),
                                 dict(build_before_s=0)])
def test_idle_params_refused(bad):
    with within(5), pytest.raises(idle_sim.SimParamError):
        idle_sim.simulate(idle_sim.machine(1, 2, 1), **bad)
    with pytest.raises(idle_sim.SimParamError):
        idle_sim.SimParams(**bad)


def test_idle_seed_and_latency_refused():
    t = idle_sim.machine(2, 2, 1)
    with within(5), pytest.raises(idle_sim.SimParamError, match="seed"):
        idle_sim.simulate(t, seed=-1, duration_ms=0.1)
    with within(5), pytest.raises(idle_sim.SimParamError, match=r"latency_ns\[0\]\[1\]"):
        idle_sim.simulate(t, latency_ns=[[50, math.nan], [100, 50]], duration_ms=0.1)


def test_idle_budget_estimate_follows_the_real_wakeups():
    """The estimate the budget uses is what a run does at most, up to noise
    (measured wakeups only: the warm-up's are not counted in ``decisions``)."""
    t = idle_sim.machine(2, 2, 1)
    for kw in (dict(duration_ms=2.0), dict(load=0.99, run_mean_us=5.0, duration_ms=2.0),
               dict(load=0.3, run_mean_us=200.0, duration_ms=40.0)):
        p = idle_sim.SimParams(warmup_ms=0.5, **kw)
        r = idle_sim.simulate(t, p, seed=1)
        bound = idle_sim.wakeups_bound(p, r.cpus)
        assert 0.3 * bound < r.decisions <= 1.1 * bound + r.cpus, (kw, r.decisions, bound)


def test_refcount_budget_bounds_the_real_events(topo):
    for kw in (dict(), dict(work_ns=50.0, ops_per_item=1.5), dict(rate_per_cpu=1e6)):
        r = refcount.simulate(topo, [0, 1, 2], duration_ns=2e5, **kw)
        events = (r["items_per_s"] + r["ops_per_s"]) * 2e5 / 1e9
        k = 3
        work = [float(kw.get("work_ns", 300.0))] * k
        ops = [float(kw.get("ops_per_item", 2))] * k
        rates = [kw.get("rate_per_cpu")] * k
        lat = refcount.Latencies()
        cheapest = min(min(refcount.transfer_ns(topo, a, b, lat) for b in (0, 1, 2))
                       for a in (0, 1, 2))
        bound = refcount._events_bound(work, ops, rates, cheapest, 2e5)
        assert 0 < events <= 1.2 * bound + 3 * k, (kw, events, bound)


def test_refcount_other_arguments(topo):
    for bad in (dict(cpus=[9]), dict(cpus=[-1]), dict(cpus="01"), dict(work_ns=[1.0]),
                dict(rate_per_cpu=0), dict(ops_per_item=math.nan), dict(seed=-1),
                dict(lat="fast")):
        args = dict(cpus=[0, 1]) | bad
        cpus = args.pop("cpus")
        with within(5), pytest.raises(ParameterError):
            refcount.simulate(topo, cpus, **args)
    with pytest.raises(ParameterError):
        refcount.Latencies(remote_ns=math.nan)


def test_devmem_other_arguments(topo, cal):
    for bad in (dict(message_bytes=0), dict(frag_bytes=0.5), dict(app_put_share=2),
                dict(flows=0), dict(gets_per_frag=math.inf)):
        with pytest.raises(ParameterError):
            devmem.Scenario(**bad)
    with pytest.raises(ParameterError):
        devmem.Calibration(300.0, math.nan, 300.0, 45.0, 1.0)
    with pytest.raises(ParameterError, match="mode"):
        devmem.simulate_devmem(topo, [0], [1], "both", cal)
    with pytest.raises(ParameterError, match="not a CPU"):
        devmem.simulate_devmem(topo, [0], [99], "percpu", cal)
    with pytest.raises(ParameterError, match="steps"):
        devmem.ceiling(topo, [0], [1], "shared", cal, steps=-1)
    with pytest.raises(ParameterError):
        devmem.scaled_latencies(0.0)


# -- the review's findings: the benchmark --------------------------------------------

def _usable_pair():
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    return cpus[0], cpus[1]


def test_pingpong_arguments_refused_before_running():
    a, b = _usable_pair()
    with pytest.raises(ParameterError, match="two different CPUs"):
        atomics.pingpong_ns(a, a)
    with pytest.raises(ParameterError, match="iters"):
        atomics.pingpong_ns(a, b, iters=0)
    with pytest.raises(ParameterError, match="repeats"):
        atomics.pingpong_ns(a, b, iters=10, repeats=0)
    with pytest.raises(ParameterError, match="chunk"):
        atomics.pingpong_robust_ns(a, b, chunk=0)
    with pytest.raises(ParameterError, match="chunk"):
        atomics.pingpong_robust_ns(a, b, iters=10, chunk=20)
    with pytest.raises(ParameterError, match="max_seconds"):
        atomics.pingpong_robust_ns(a, b, max_seconds=math.nan)
    with pytest.raises(ParameterError, match="CPU"):
        atomics.pingpong_ns(-1, b)


def test_increments_arguments_refused_before_running():
    with pytest.raises(ParameterError, match="at least one CPU"):
        atomics.contended_increments(2, cpus=[])
    for bad in (dict(n=0), dict(n=2.0), dict(iters=0), dict(repeats=0), dict(cpus=[-1])):
        with pytest.raises(ParameterError):
            atomics.contended_increments(**(dict(n=2) | bad))
    with pytest.raises(ParameterError, match="max_threads"):
        atomics.run_atomics(max_threads=0)
    with pytest.raises(ParameterError, match="iters"):
        atomics.latency_matrix([0], iters=0)


def test_cpu_this_process_cannot_use_is_unavailable():
    with pytest.raises(atomics.BenchUnavailable, match="may use CPUs"):
        atomics.pingpong_ns(0, 60_000, iters=10)


@pytest.fixture
def no_library(monkeypatch, tmp_path):
    """A fresh compile: nothing loaded, an empty cache."""
    monkeypatch.setattr(atomics, "_LIB", None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.mark.parametrize("cc", ["/nonexistent", "/dev/null", '"unclosed'])
def test_bad_compiler_is_unavailable(no_library, monkeypatch, cc):
    monkeypatch.setenv("CC", cc)
    with pytest.raises(atomics.BenchUnavailable):
        atomics.library()


def test_bad_compiler_cli(no_library, monkeypatch, capsys):
    monkeypatch.setenv("CC", "/nonexistent")
    err = one_line_exit_2(capsys, ["bench", "atomics", "--quick", "--max-threads", "1"])
    assert "/nonexistent" in err


# A pthread_create() that fails at the k-th call, and a count of the threads
# it started that have not finished: compiled in front of the benchmark's
# own source for this test only.
_FAULTS = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
static _Atomic int t_live, t_calls;
static int t_fail_at = -1;
struct t_tramp { void *(*fn)(void *); void *arg; };
static struct t_tramp t_tramps[256];
static void *t_run(void *p) {
    struct t_tramp *t = p;
    void *r = t->fn(t->arg);
    atomic_fetch_sub(&t_live, 1);
    return r;
}
static int t_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
    int k = atomic_fetch_add(&t_calls, 1);
    if (k == t_fail_at || k >= 256) return 11;          /* EAGAIN */
    t_tramps[k] = (struct t_tramp){ fn, arg };
    atomic_fetch_add(&t_live, 1);
    int rc = pthread_create(th, attr, t_run, &t_tramps[k]);
    if (rc) atomic_fetch_sub(&t_live, 1);
    return rc;
}
void numalab_test_fail_at(int k) { t_fail_at = k; atomic_store(&t_calls, 0); }
int numalab_test_live(void) { return atomic_load(&t_live); }
#define pthread_create t_create
"""


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("faulty")
    (d / "f.c").write_text(_FAULTS + atomics._C_SOURCE)
    subprocess.run([cc, "-O2", "-std=c11", "-shared", "-fPIC", "-pthread", str(d / "f.c"),
                    "-o", str(d / "f.so")], check=True, capture_output=True)
    lib = ctypes.CDLL(str(d / "f.so"))
    lib.numalab_increments.restype = ctypes.c_double
    lib.numalab_increments.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                                       ctypes.c_long, ctypes.c_int]
    lib.numalab_pingpong.restype = ctypes.c_double
    lib.numalab_pingpong.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long]
    return lib


def _wait_live(lib, seconds=0.5):
    """Threads still running: they get a moment, as a leaked spinner would not finish."""
    end = time.monotonic() + seconds
    while lib.numalab_test_live() and time.monotonic() < end:
        time.sleep(0.01)
    return lib.numalab_test_live()


@pytest.mark.parametrize("fail_at", [0, 1, 3])
def test_increments_join_every_started_thread_when_a_create_fails(faulty, fail_at):
    cpus = sorted(os.sched_getaffinity(0))
    n = 4
    placed = (ctypes.c_int * n)(*[cpus[i % len(cpus)] for i in range(n)])
    faulty.numalab_test_fail_at(fail_at)
    with within(20):
        v = faulty.numalab_increments(n, placed, 1000, 1)
    assert v == -2
    # checked right away: the function returned only after joining them
    assert faulty.numalab_test_live() == 0
    # and the library still works afterwards
    faulty.numalab_test_fail_at(-1)
    with within(20):
        assert faulty.numalab_increments(n, placed, 1000, 1) > 0
    assert faulty.numalab_test_live() == 0


def test_pingpong_thread_create_failure(faulty):
    a, b = _usable_pair()
    faulty.numalab_test_fail_at(0)
    with within(20):
        assert faulty.numalab_pingpong(a, b, 100) == -2
    assert _wait_live(faulty) == 0
    faulty.numalab_test_fail_at(-1)
    assert faulty.numalab_pingpong(a, b, 0) == -1          # no round trips: an error, not inf


# -- the commands that are not run here: their argument validators --------------------

def parse_exit_2(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as e:
        make_parser().parse_args(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("value", ["0", "-1", "65", "nan", "1.5", "", "9" * 40])
def test_build_jobs_validator(capsys, value):
    assert "--jobs" in parse_exit_2(capsys, ["build", f"--jobs={value}"])


def test_build_arguments_parse():
    a = make_parser().parse_args(["build", "-j", "4", "--only", "3", "--quick"])
    assert (a.jobs, a.only, a.quick) == (4, "3", True)


@pytest.mark.parametrize("argv", [
    ["bench", "group-cpus", "--seconds=nan"], ["bench", "group-cpus", "--seconds=0"],
    ["bench", "group-cpus", "--seconds=-1"], ["bench", "group-cpus", "--seconds=inf"],
    ["bench", "group-cpus", "--seconds=1e9"], ["bench", "group-cpus", "--configs=0"],
    ["bench", "group-cpus", "--configs=1e3"], ["bench", "group-cpus", "--jobs=0"],
    ["bench", "group-cpus", "--jobs=257"], ["bench", "atomics", "--max-threads=0"],
    ["bench", "atomics", "--max-threads=1025"], ["bench", "atomics", "--max-threads=nan"],
    ["bench", "nosuch"],
])
def test_bench_validators(capsys, argv):
    parse_exit_2(capsys, argv)


def test_bench_arguments_parse_and_api_checks():
    a = make_parser().parse_args(["bench", "group-cpus", "--seconds", "0.5", "--configs", "10",
                                  "--jobs", "1"])
    assert (a.seconds, a.configs, a.jobs) == (0.5, 10, 1)
    # the run functions check a Namespace built without argparse too
    for bad in (dict(seconds=math.nan), dict(configs=0), dict(jobs=10 ** 6)):
        ns = SimpleNamespace(**(dict(seconds=1.0, configs=10, jobs=1, sweep=False) | bad))
        with pytest.raises(ParameterError):
            bench._group_cpus_run(ns)
    with pytest.raises(ParameterError):
        atomics._bench_run(SimpleNamespace(max_threads=0, quick=True))
    with pytest.raises(ParameterError):
        bench.calls_per_second(lambda i: None, seconds=math.inf)
    with pytest.raises(ParameterError):
        bench.run_group_cpus_sweep(n=0)
    with pytest.raises(ParameterError):
        bench.group_cpus_configs(10, seed=-1)


def test_collect_arguments(capsys):
    a = make_parser().parse_args(["collect", "-o", "x.tar.bz2", "--name", "box", "--bench",
                                  "--quick"])
    assert (a.output, a.name, a.bench, a.quick) == ("x.tar.bz2", "box", True, True)
    parse_exit_2(capsys, ["collect", "--bogus"])
    parse_exit_2(capsys, ["collect", "extra"])
    parse_exit_2(capsys, ["collect", "--output"])


# -- numalab.validate ------------------------------------------------------------------

def test_number_accepts_real_numbers_only():
    assert number("x", np.float32(0.5), 0, 1) == 0.5
    assert number("x", np.int64(3)) == 3.0
    assert number("x", -0.0, 0) == 0.0
    for bad in (math.nan, math.inf, -math.inf, True, None, "1", 10 ** 400, [1.0], 1 + 0j):
        with pytest.raises(ParameterError, match="^x must be"):
            number("x", bad)
    with pytest.raises(ParameterError, match=r"in \(0, 1\)"):
        number("x", 1, 0, 1, lo_open=True, hi_open=True)


def test_integer_seed_one_of():
    assert integer("n", np.int32(5), 1, 8) == 5
    for bad in (5.0, True, "5", None, 9, 0):
        with pytest.raises(ParameterError):
            integer("n", bad, 1, 8)
    assert seed(MAX_SEED) == MAX_SEED
    with pytest.raises(ParameterError):
        seed(MAX_SEED + 1)
    with pytest.raises(ParameterError):
        one_of("mode", ["x"], ("x",))           # unhashable, not an option
    with pytest.raises(NumalabError):           # ParameterError is a NumalabError...
        integer("n", -1, 0)
    with pytest.raises(ValueError):             # ... and a ValueError
        integer("n", -1, 0)


def test_budget():
    assert budget("run", 10, 10, "hint") == 10.0
    with pytest.raises(ParameterError, match="hint"):
        budget("run", 11, 10, "hint")
    with pytest.raises(ParameterError, match="would not advance"):
        budget("run", math.nan, 10, "hint")


def test_option_parsers():
    f = option_number(0, 10, lo_open=True)
    assert f("1e1") == 10.0 and f(" 2 ") == 2.0
    for bad in ("0", "nan", "inf", "-inf", "1e309", "10.0001", "", "x", "0x1"):
        with pytest.raises(argparse.ArgumentTypeError):
            f(bad)
    g = option_integer(1, None)
    assert g("12") == 12 and g(" 7 ") == 7
    for bad in ("0", "1.0", "1e3", "nan", "9" * 5000):
        with pytest.raises(argparse.ArgumentTypeError):
            g(bad)
    assert option_seed()("0") == 0
    with pytest.raises(argparse.ArgumentTypeError) as e:
        option_seed()("-" + "9" * 500)
    assert len(str(e.value)) < 200                  # the echoed value is cut short
