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
    shared = atomics.contended_increments(2, cpus[:2], iters=2_000_000, shared=True)
    private = atomics.contended_increments(2, cpus[:2], iters=2_000_000, shared=False)
    assert shared > 0 and private > 0
    assert private > 1.3 * shared


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
