"""The queueing model from IRQ imbalance to per-disk throughput."""

import pytest

from numalab.models.irq_queueing import (SEED_MEASUREMENT, calibrate, cpu_units, degradation,
                                         disk_throughput, job_cpus, job_speed, seed_comparison)
from numalab.models.irq_sweep import device_groups
from numalab.topology import load

SEED = "numa:2 cluster:24 core:2 pu:1"


def test_job_speed_limits_and_order():
    assert job_speed(0.0) == 1.0 and job_speed(1.0) == 0.0
    assert job_speed(0.3, cpu_fraction=0.0) == 1.0        # no CPU work: no slowdown
    assert job_speed(0.4, queue="md1") > job_speed(0.4)   # constant service waits less
    assert job_speed(0.4, queue="md1") == pytest.approx(job_speed(0.4, cpu_fraction=0.5))
    with pytest.raises(ValueError):
        job_speed(0.1, queue="mg1")


def test_units_sum_to_the_vectors():
    t = load(SEED)
    g = device_groups(t, 62, 6)
    u = cpu_units(g, t.possible)
    assert sum(u.values()) == pytest.approx(6 * 62)
    assert sorted(set(round(x, 6) for x in u.values())) == [3.0, 6.0]   # the patch's "roughly twice"


def test_calibration_hits_the_target_and_predicts_the_patch():
    r = seed_comparison(load(SEED))
    assert r["before_degradation"] == pytest.approx(SEED_MEASUREMENT["before_degradation"], abs=1e-6)
    # mainline's dedicated CPUs 36-47 and 84-95 are the jobs of disks 2 and 5
    assert r["penalized"] == [2, 5]
    assert 0 < r["a"] < 1 / 6 and r["rho_max_after"] < r["rho_max_before"] < 1
    assert r["after_degradation"] < r["before_degradation"]
    assert r["penalized_iops_gain"] > 0 and r["penalized_latency_change"] < 0
    # QD1 closed loop: latency change = 1 / (1 + gain) - 1 for each penalised disk
    assert r["penalized_latency_change"] == pytest.approx(1 / (1 + r["penalized_iops_gain"]) - 1,
                                                          rel=1e-6)


def test_interleaved_jobs_give_a_smaller_gap():
    t = load(SEED)
    u = cpu_units(device_groups(t, 62, 6), t.possible)
    inter = job_cpus(6, range(96), 16, "interleaved")
    blocks = job_cpus(6, range(96), 16, "blocks")
    assert degradation(disk_throughput(u, inter, 0.1)) < degradation(disk_throughput(u, blocks, 0.1)) / 2
    # the same masks everywhere and every disk on the same CPUs: nothing to calibrate
    with pytest.raises(ValueError):
        calibrate(u, [list(range(96))] * 6, 0.11)


def test_throughput_falls_with_utilisation():
    u = {0: 1.0, 1: 2.0}
    x = disk_throughput(u, [[0], [1]], 0.2)
    assert x[0] > x[1]
    assert disk_throughput(u, [[0, 1]], 0.2, aggregate="min") == [2 * min(x)]
    with pytest.raises(ValueError):
        job_cpus(2, range(4), 2, "random")
