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
