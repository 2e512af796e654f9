"""Our alternatives to the rotate patch (models/irq/alternative.py)."""

import pytest

from numalab.kernel.lib.group_cpus import group_cpus_evenly
from numalab.models.irq.alternative import (Balancer, balance_devices, block_devices,
                                            block_groups, kernel_block_counts, split_block)
from numalab.models.irq.bound import bound_milp, node_plans
from numalab.models.irq.load import irq_load
from numalab.topology import load

SEED = "numa:2 cluster:24 core:2 pu:1"
SHAPES = [SEED, "numa:1 cluster:4 core:3 pu:1", "numa:2 cluster:3 core:4 pu:2", "numa:1 core:8 pu:1",
          "numa:4 cluster:2 core:2 pu:1"]


def _check_kernel_structure(t, vectors, masks):
    """Same per-node and per-block group counts' total, clusters kept, a partition."""
    union = 0
    for m in masks:
        assert m and not (union & m)
        union |= m
    assert union == t.possible
    assert len(masks) == min(vectors, t.possible.bit_count())
    for p in node_plans(t, vectors):
        assert sum(1 for m in masks if m & ~p.cpus == 0) == p.groups
        if p.cluster_path:
            assert all(any(m & ~b == 0 for b in p.blocks) for m in masks if m & p.cpus)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("frac", [0.3, 0.6, 0.9, 1.0])
def test_alternatives_keep_the_kernel_structure(shape, frac):
    t = load(shape)
    v = max(1, round(frac * t.possible.bit_count()))
    for masks in block_devices(t, v, 4) + balance_devices(t, v, 4):
        _check_kernel_structure(t, v, masks)


def test_kernel_block_counts_are_mainlines():
    t = load("numa:1 cluster:4 core:2 pu:1")
    plan, counts = kernel_block_counts(t, 6)[0]
    mainline = group_cpus_evenly(6, t)
    for b, k in zip(plan.blocks, counts):
        assert k == sum(1 for m in mainline if m & ~b == 0)
    assert sum(counts) == 6


def test_seed_example_alternatives_reach_the_bound():
    t = load(SEED)
    b = bound_milp(t, 62, 6).value
    for devs in (block_devices(t, 62, 6), balance_devices(t, 62, 6)):
        assert max(irq_load(devs, t.possible).dedicated) == b


def test_balance_does_not_depend_on_offsets_and_rotate_does():
    t = load(SEED)
    # three group_cpus_evenly() calls per device: rotate's stride 3 lines every device up again
    rot = [group_cpus_evenly(62, t, "rotate", 3 * d) for d in range(6)]
    assert max(irq_load(rot, t.possible).dedicated) == 6
    assert max(irq_load(balance_devices(t, 62, 6), t.possible).dedicated) == 2
    assert max(irq_load(block_devices(t, 62, 6, [3 * d for d in range(6)]), t.possible).dedicated) < 6


def test_block_tiles_consecutive_offsets():
    t = load("numa:1 cluster:8 core:2 pu:1")
    # 10 groups on 8 clusters: 2 extras; 4 callers cover the 8 clusters once each
    devs = block_devices(t, 10, 4)
    assert sorted(irq_load(devs, t.possible).dedicated) == [1] * 16


def test_split_block():
    assert split_block([0, 1, 2, 3], 4, 0) == [1, 2, 4, 8]
    assert split_block([4, 5, 6], 1, 2) == [0b1110000]
    assert [m.bit_count() for m in split_block(list(range(7)), 3, 0)] == [3, 2, 2]
    with pytest.raises(ValueError):
        split_block([0, 1], 3, 0)


def test_balancer_state_accumulates():
    b = Balancer(load("numa:1 cluster:2 core:2 pu:1"))
    for _ in range(4):
        b.groups(3)
    # 4 callers, 2 one-CPU groups each, 4 CPUs: 2 per CPU
    assert sorted(b.load.values()) == [2, 2, 2, 2]


def test_block_offset_zero_is_deterministic():
    t = load(SEED)
    assert block_groups(t, 62, 5) == block_groups(t, 62, 5)
