"""The port against real kernels: every committed lab dump (data/lab/, made by
``numalab lab run`` on Debian kernels in QEMU) is replayed against the port of
the kernel version the dump recorded. No QEMU needed.

For each NVMe controller, the managed interrupt masks of its I/O queues (the
admin queue is nvme's one ``pre_vectors`` entry and is not spread) must be
what ``group_cpus_evenly(nr_io_queues)`` gives for that kernel, and every
namespace's blk-mq map must send each hardware queue's CPUs to that queue's
interrupt mask (``blk_mq_map_hw_queues()`` / ``blk_mq_pci_map_queues()`` read
the masks back).
"""

from pathlib import Path

import pytest

from numalab.cpumask import format_cpulist
from numalab.datasets import lab_datasets
from numalab.kernel import versions
from numalab.kernel.lib.group_cpus import group_cpus_evenly
from numalab.lab.dump import read_lab_dump
from numalab.topology import load

REPO = Path(__file__).resolve().parents[1]
DUMPS = lab_datasets(REPO)


def test_the_lab_dumps_are_committed():
    names = {Path(p).name for p in DUMPS}
    assert len(names) >= 5
    kernels = {versions.parse_release(read_lab_dump(p).kernel_release) for p in DUMPS}
    assert {"6.1", "7.2"} <= kernels


@pytest.mark.parametrize("dump", DUMPS, ids=lambda p: Path(p).stem)
def test_port_equals_the_real_kernel(dump):
    d = read_lab_dump(dump)
    kernel = versions.parse_release(d.kernel_release)
    topo = load(dump)
    assert d.nvme, "a lab dump without NVMe tests nothing"
    for ctrl in d.nvme:
        io = sorted((q for q in ctrl.irqs if q.queue >= 1), key=lambda q: q.queue)
        assert io, ctrl.address
        masks = list(group_cpus_evenly(len(io), topo, kernel=kernel))
        real = [q.smp_affinity for q in io]
        assert real == masks, (
            f"{ctrl.controller} on Linux {kernel}: kernel "
            f"{[format_cpulist(m) for m in real]} port {[format_cpulist(m) for m in masks]}")
        for q in io:   # the interrupt is delivered on one CPU of its mask
            assert q.effective_affinity and q.effective_affinity & ~q.smp_affinity == 0
        for disk in ctrl.disks:
            hctx = d.blk_mq[disk]
            assert hctx == {i: m for i, m in enumerate(masks)}, disk


def test_tables_for_the_book():
    from numalab.lab.oracle import dedicated_counts, mask_table, probe_table
    ex = [p for p in DUMPS if "ex004" in p][0]
    t = mask_table(ex)
    assert t["equal"].all() and len(t) == 6 * 62
    counts = dedicated_counts(ex)
    six = [c for c, n in counts.items() if n == 6]
    # the patch's example on a real 7.2 kernel: 28 CPUs carry 6 dedicated vectors each
    assert len(six) == 28
    from numalab.cpumask import format_cpulist, mask_of
    assert format_cpulist(mask_of(six)) == "0-1,4-5,38-49,52-53,86-95"
    probes = probe_table([p for p in DUMPS if "6.1-16cpu" in p][0])
    assert len(probes) == 3 and set(probes["cpu"]) == {0}
    assert all(c.startswith("kworker/0:") for c in probes["comm"])
