"""blk-mq routing and the x86 effective CPU, against the kernel lab's dumps."""

from pathlib import Path

import pytest

from numalab.lab.dump import read_lab_dump
from numalab.models.irq.routing import (effective_consistency, effective_cpus, hw_queue_map,
                                        interrupt_counts, lab_io_counts, lab_routing_table)

LAB = Path(__file__).resolve().parents[1] / "data" / "lab"
IO_DUMP = LAB / "lab-7.2-8cpu-2n-1nvme-io.tar.bz2"


def test_tie_goes_to_the_last_cpu_then_the_least_loaded():
    assert effective_cpus([[0b1111]]) == [[3]]
    assert effective_cpus([[0b1111], [0b0011], [0b1100]]) == [[3], [1], [2]]
    assert effective_cpus([[0]]) == [[None]]
    assert effective_cpus([[0b11]], online=0b01) == [[0]]


def test_queue_map_and_counts():
    assert hw_queue_map([0b0101, 0b1010]) == {0: 0, 2: 0, 1: 1, 3: 1}
    # CPU 4 is in no mask: its I/O is not counted
    assert interrupt_counts([[0b0011, 0b1100]], [[1, 2]], [{0: 1, 1: 1, 2: 1, 4: 9}]) == {1: 2, 2: 1}


@pytest.mark.skipif(not IO_DUMP.exists(), reason="lab --io dump not present")
def test_io_dump_interrupts_follow_the_routing():
    tbl = lab_routing_table(str(IO_DUMP))
    io = lab_io_counts(str(IO_DUMP))
    assert io["count"] > 0 and len(tbl) == 4
    assert tbl["equal"].all(), tbl
    # each queue's interrupts are on one CPU only, its effective CPU
    assert all(m.count(":") == 1 for m in tbl["measured"])


@pytest.mark.skipif(not LAB.exists(), reason="no lab dumps")
def test_effective_rule_is_consistent_with_every_mainline_lab_dump():
    # On the rotate-patched build the greedy replay reproduces fewer effective
    # CPUs (285 of 372 when that dump was added): whether the rule or the
    # greedy search of interleavings falls short there is not settled, and
    # chapter 2 reports the computed count for every dump instead of a claim.
    dumps = [p for p in sorted(LAB.glob("*.tar.bz2")) if "rotate" not in p.name]
    assert dumps
    for p in dumps:
        d = read_lab_dump(str(p))
        ctrls = [[(q.smp_affinity, q.effective_affinity.bit_length() - 1) for q in c.irqs
                  if q.queue and q.effective_affinity] for c in d.nvme]
        hits, total = effective_consistency(ctrls)
        assert total and hits == total, (p.name, hits, total)


def test_consistency_can_fail():
    # CPU 0 can never win a tie against CPU 1 with nothing allocated
    assert effective_consistency([[(0b11, 0)], [(0b11, 0)]]) == (1, 2)
