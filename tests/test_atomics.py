"""The native microbenchmark really runs and measures something."""

import os

import pytest

from numalab import atomics


@pytest.fixture(scope="module")
def lib():
    try:
        return atomics.library()
    except atomics.BenchUnavailable as e:
        pytest.skip(str(e))


def test_contended_counter_is_slower_than_private_counters(lib):
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    # The two threads only contend while both run; on a loaded machine one may
    # be descheduled for a whole trial. Several trials: the best ratio counts.
    ratios = []
    for _ in range(5):
        shared = atomics.contended_increments(2, cpus[:2], iters=2_000_000, shared=True)
        private = atomics.contended_increments(2, cpus[:2], iters=2_000_000, shared=False)
        assert shared > 0 and private > 0
        ratios.append(private / shared)
        if ratios[-1] > 1.3:
            break
    assert max(ratios) > 1.3, ratios


def test_run_atomics_record(lib):
    r = atomics.run_atomics(max_threads=2, quick=True)
    n = len(r["cpus_used"])
    assert r["kind"] == "atomics" and len(r["latency"]["round_trip_ns"]) == max(n, 1)
    if n > 1:
        rt = r["latency"]["round_trip_ns"][0][1]
        assert 1 < rt < 100_000          # a real transfer: more than a ns, less than 0.1 ms
    assert [row["threads"] for row in r["increments"]] == [1, 2]


def test_bad_cpu_is_reported(lib):
    with pytest.raises(atomics.BenchUnavailable):
        atomics.pingpong_ns(0, 100_000, iters=10)


def test_robust_round_trip_blocks(lib):
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    r = atomics.pingpong_robust_ns(cpus[0], cpus[1], iters=4000, chunk=100)
    assert r["chunks"] == 40
    assert 1 < r["min_ns"] <= r["median_ns"] <= r["p90_ns"] < 1_000_000


def test_caller_affinity_is_restored(lib):
    before = os.sched_getaffinity(0)
    if len(before) < 2:
        pytest.skip("needs two CPUs")
    cpus = sorted(before)
    atomics.pingpong_ns(cpus[0], cpus[1], iters=100, repeats=1)
    atomics.pingpong_robust_ns(cpus[1], cpus[0], iters=400, chunk=100)
    assert os.sched_getaffinity(0) == before
