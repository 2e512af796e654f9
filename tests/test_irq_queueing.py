"""The routing-based queueing model (numalab.models.irq.queueing)."""

import pytest

from numalab.models.irq.queueing import (PLACEMENTS, SEED_MEASUREMENT, compare, degradation,
                                         disk_iops, gap_grid, job_cpus, slowdown, unpinned_load)
from numalab.models.irq.routing import effective_cpus
from numalab.models.irq.sweep import device_groups
from numalab.topology import load

SEED = "numa:2 cluster:24 core:2 pu:1"


def test_slowdown_limits_and_order():
    assert slowdown(0.0) == 1.0 and slowdown(1.0) == float("inf")
    assert slowdown(0.4, "md1") < slowdown(0.4)
    with pytest.raises(ValueError):
        slowdown(0.1, "mg1")


def test_local_completions_cost_nothing_and_foreign_ones_slow_the_host():
    # two CPUs with a dedicated vector each: no job takes another's completions
    assert disk_iops([[0b01, 0b10]], [[0, 1]], [[0, 1]], a=0.4) == [2.0]
    # one shared vector whose effective CPU is 1: CPU 1's job slows, more with larger a
    x1 = disk_iops([[0b11]], [[1]], [[0, 1]], a=0.1)[0]
    x2 = disk_iops([[0b11]], [[1]], [[0, 1]], a=0.3)[0]
    assert 2.0 > x1 > x2
    # no CPU work: nothing to slow
    assert disk_iops([[0b11]], [[1]], [[0, 1]], a=0.3, cpu_fraction=0.0) == [2.0]


def test_every_cpu_submitting_gives_mainline_a_flat_load():
    """With every CPU submitting to every disk, a dedicated vector carries one
    CPU's I/O and a shared pair's two CPUs' I/O alternates between the pair:
    mainline's stacking leaves every CPU with the same interrupt count."""
    t = load(SEED)
    g = device_groups(t, 62, 6, "mainline")
    ld = unpinned_load(g, effective_cpus(g), range(96))
    assert len(set(ld.values())) == 1
    assert sum(ld.values()) == 6 * 96


def test_pinned_blocks_do_not_penalise_the_stacked_cpus():
    """Jobs pinned one per CPU in blocks of 16: the disks on mainline's stacked
    CPUs complete locally, so they are not among the slowest."""
    t = load(SEED)
    r = compare(t, a=0.2, cpu_fraction=0.5, placement="blocks")
    stacked_disks = {2, 5}          # CPUs 38-49 and 86-95 (7.2's sort) are theirs
    assert not stacked_disks & set(r["penalized"])
    assert min(r["remote_before"][d] for d in stacked_disks) < max(r["remote_before"])
    assert 0 < r["before_degradation"] < SEED_MEASUREMENT["before_degradation"]


def test_grid_is_deterministic_and_bounded():
    t = load(SEED)
    g1 = gap_grid(t, [0.05, 0.3], [0.5], placements=PLACEMENTS, seeds=range(2))
    g2 = gap_grid(t, [0.05, 0.3], [0.5], placements=PLACEMENTS, seeds=range(2))
    assert g1.equals(g2)
    assert len(g1) == 2 * (1 + 1 + 2)
    assert (g1["before_degradation"] >= 0).all() and (g1["before_degradation"] < 1).all()
    # the gap grows with a for a fixed placement
    b = g1[g1.placement == "blocks"].set_index("a")["before_degradation"]
    assert b[0.3] > b[0.05]


def test_job_cpus_and_degradation():
    assert job_cpus(2, range(4), 2, "random", seed=3) == job_cpus(2, range(4), 2, "random", seed=3)
    assert sorted(sum(job_cpus(6, range(96), 16, "random", seed=1), [])) == list(range(96))
    assert degradation([2.0, 2.0]) == 0.0
    with pytest.raises(ValueError):
        job_cpus(2, range(4), 2, "spiral")
