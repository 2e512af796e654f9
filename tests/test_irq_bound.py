"""The lower bound on dedicated vectors per CPU (models/irq/bound.py)."""

import itertools

import pytest

from numalab.kernel.lib.group_cpus import group_cpus_evenly, spread_devices
from numalab.models.irq.bound import (bound_closed_form, bound_milp, min_dedicated_one_device,
                                      node_plans, optimal_groups)
from numalab.models.irq.load import irq_load
from numalab.topology import load

SEED = "numa:2 cluster:24 core:2 pu:1"


def _bits(m):
    return [i for i in range(m.bit_length()) if m >> i & 1]


def test_seed_plan_matches_the_patch_text():
    # 62 vectors on 2 nodes: 31 groups per node over 24 clusters
    plans = node_plans(load(SEED), 62)
    assert [(p.groups, len(p.blocks), p.cluster_path) for p in plans] == [(31, 24, True)] * 2


def test_seed_bound_is_below_mainline_and_reached_by_rotate():
    t = load(SEED)
    b = bound_milp(t, 62, 6).value
    assert b == bound_closed_form(t, 62, 6) == 2   # ceil(6 * 14 / 48)
    main = max(irq_load(spread_devices(62, t, 6, "mainline"), t.possible).dedicated)
    rot = max(irq_load(spread_devices(62, t, 6, "rotate"), t.possible).dedicated)
    assert main == 6 and rot >= b


@pytest.mark.parametrize("sizes,groups", [([2] * 24, 31), ([3, 1], 3), ([4, 4], 5), ([1, 1], 2),
                                          ([5, 2, 2], 6), ([4], 4)])
def test_min_dedicated_one_device_by_brute_force(sizes, groups):
    best = None
    for ks in itertools.product(*[range(1, n + 1) for n in sizes]):
        if sum(ks) == groups:
            cost = sum(max(0, 2 * k - n) for k, n in zip(ks, sizes))
            best = cost if best is None else min(best, cost)
    assert min_dedicated_one_device(sizes, groups) == best


@pytest.mark.parametrize("shape,vectors,devices", [
    (SEED, 62, 6), ("numa:1 cluster:4 core:3 pu:1", 9, 4), ("numa:2 cluster:3 core:4 pu:1", 20, 5),
    ("numa:1 core:6 pu:1", 5, 3), ("numa:2 cluster:2 core:2 pu:2", 14, 3)])
def test_optimal_groups_reach_the_bound_and_keep_the_constraints(shape, vectors, devices):
    t = load(shape)
    b = bound_milp(t, vectors, devices)
    devs = optimal_groups(t, vectors, devices)
    assert max(irq_load(devs, t.possible).dedicated) == b.value
    assert b.value >= bound_closed_form(t, vectors, devices)
    plans = node_plans(t, vectors)
    for masks in devs:
        # a partition of the CPUs, with the kernel's per-node counts
        assert sum(m.bit_count() for m in masks) == t.possible.bit_count()
        union = 0
        for m in masks:
            assert m and not (union & m)
            union |= m
        assert union == t.possible
        for p in plans:
            assert sum(1 for m in masks if m & ~p.cpus == 0) == p.groups
            if p.cluster_path:
                assert all(any(m & ~blk == 0 for blk in p.blocks) for m in masks if m & p.cpus)


def test_no_variant_beats_the_bound_on_small_machines():
    for shape in ["numa:1 cluster:3 core:2 pu:1", "numa:2 cluster:2 core:3 pu:1"]:
        t = load(shape)
        n = t.possible.bit_count()
        for v in range(1, n + 1):
            for d in (2, 5):
                b = bound_milp(t, v, d).value
                for var in ("mainline", "rotate"):
                    devs = [group_cpus_evenly(v, t, var, o) for o in range(d)]
                    assert max(irq_load(devs, t.possible).dedicated) >= b, (shape, v, d, var)


def test_one_cpu_clusters_force_every_device():
    t = load("numa:1 core:4 pu:1")        # no cluster level: each CPU is its own cluster
    assert bound_milp(t, 4, 3).value == 3 == bound_closed_form(t, 4, 3)


def test_bad_input():
    with pytest.raises(ValueError):
        min_dedicated_one_device([2, 2], 5)
    with pytest.raises(ValueError):
        min_dedicated_one_device([2, 2, 2], 2)
