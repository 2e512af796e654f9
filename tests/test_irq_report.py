"""Chapter 2's small tables and phrases (numalab.models.irq.report)."""

from __future__ import annotations

import doctest

import pandas as pd
import pytest

from numalab.models.irq import report


def test_doctests():
    res = doctest.testmod(report)
    assert res.attempted > 0 and res.failed == 0


@pytest.mark.parametrize("lo,hi", [(6, 6), (0, 0), (2.5, 2.5), (1, 3), (0.25, 7.0)])
def test_a_range_never_has_equal_ends(lo, hi):
    text = report.between(lo, hi)
    assert (" to " in text) == (lo != hi)
    if lo != hi:
        a, b = text.split(" to ")
        assert a != b


def test_stacking_row_counts_the_cpus_at_the_top():
    counts = pd.Series({0: 3, 1: 2, 5: 3, 7: 0})
    row = report.stacking_row("7.2 + rotate", counts, offsets=[4, 5])
    assert row["most dedicated vectors on one CPU"] == 3
    assert row["CPUs at that count"] == 2
    assert row["CPUs with any"] == 3          # CPU 7 carries none
    assert row["spread offsets of the devices"] == "4, 5"
    assert not any("_" in k for k in row)    # human headers


def test_stacking_row_on_the_real_example_dump():
    from numalab.datasets import lab_datasets
    from numalab.lab.oracle import dedicated_counts
    ex = [p for p in lab_datasets() if "ex004" in p]
    if not ex:
        pytest.skip("the example's lab dump is not in this tree")
    row = report.stacking_row("7.2", dedicated_counts(ex[0]))
    # 6 devices, the same masks each: the top count is the device count
    assert row["most dedicated vectors on one CPU"] == 6
    assert row["CPUs at that count"] == row["CPUs with any"]


def test_fewer_queue_configs_needs_every_boot_fewer():
    cfg = pd.DataFrame({"queues 7.2": ["5", "5"], "queues 7.2-rotate": ["4 or 5", "3 or 4"]})
    assert report.fewer_queue_configs(cfg) == 1


def test_measured_routing_inputs_are_the_dump_s_masks():
    from numalab.datasets import lab_datasets
    from numalab.lab.dump import read_lab_dump
    ex = [p for p in lab_datasets() if "ex004" in p]
    if not ex:
        pytest.skip("the example's lab dump is not in this tree")
    d = read_lab_dump(ex[0])
    masks, eff = report.measured_routing_inputs(d)
    assert len(masks) == len(d.nvme) == len(eff)
    for m, e in zip(masks, eff):
        assert len(m) == len(e) and all(x for x in m)
        # a delivered interrupt's effective CPU is one of its mask's CPUs
        assert all(c is None or (mask >> c) & 1 for mask, c in zip(m, e))


def test_effective_rule_verdict_is_the_fixed_order_s(monkeypatch):
    """A dump reproduced only in an order found after the fact is 'failed'."""
    from numalab.models.irq import report as RP
    from types import SimpleNamespace as NS

    def irq(mask, eff, q):
        return NS(queue=q, smp_affinity=mask, effective_affinity=1 << eff)
    # two controllers on CPUs 0-1: the rule, controller 0 first, gives 1 then 0;
    # the dump says controller 0 got CPU 0 (controller 1 activated first)
    d = NS(name="x", kernel_version="7.2",
           nvme=[NS(irqs=[irq(0b11, 0, 1)]), NS(irqs=[irq(0b11, 1, 1)])])
    import numalab.lab.dump as dump_mod
    monkeypatch.setattr(dump_mod, "LabDump", NS)      # the stand-ins count as read dumps
    t = RP.effective_rule_table([d])
    row = t.iloc[0]
    assert (row["vectors"], row["some order"], row["in order"]) == (2, 2, 0)
    assert row["verdict"] == "failed"
    d2 = NS(name="y", kernel_version="7.2",
            nvme=[NS(irqs=[irq(0b11, 1, 1)]), NS(irqs=[irq(0b11, 0, 1)])])
    assert RP.effective_rule_table([d2]).iloc[0]["verdict"] == "held"


def test_unequal_clusters_on_the_arm64_boots():
    """The arm64 boots hold one equal-cluster control (a single cluster)."""
    from numalab.lab import arm64 as A64
    try:
        cfg = A64.configurations(A64.table(A64.runs()))
    except Exception as e:                       # noqa: BLE001 - records not in this tree
        pytest.skip(f"arm64 records: {e}")
    une = report.unequal_clusters(cfg)
    assert une.any() and not une.all()
