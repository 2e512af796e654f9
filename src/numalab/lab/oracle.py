"""Real kernels next to the port: tables computed from the lab dumps.

For a dump made by ``numalab lab run``, :func:`mask_table` lists, queue by
queue, each NVMe controller's managed interrupt mask as the booted kernel set
it and as the port of that kernel version computes it, with their equality;
:func:`probe_table` lists where each ``nvme_probe`` ran (CPU and kworker) as
the kernel's function tracer recorded it.
"""

from __future__ import annotations

import pandas as pd

from ..cpumask import format_cpulist
from ..kernel import versions
from ..kernel.lib.group_cpus import group_cpus_evenly
from ..topology import load
from .dump import read_lab_dump

__all__ = ["mask_table", "probe_table", "dedicated_counts"]


def mask_table(dump: str) -> pd.DataFrame:
    """One row per NVMe I/O queue: dump, kernel, controller, queue,
    kernel_mask, port_mask, equal, effective_cpu (role: measured for the
    kernel's columns, the port's computed from the dump's topology)."""
    d = read_lab_dump(dump)
    kernel = versions.parse_release(d.kernel_release)
    topo = load(dump)
    rows = []
    for ctrl in d.nvme:
        io = sorted((q for q in ctrl.irqs if q.queue >= 1), key=lambda q: q.queue)
        port = list(group_cpus_evenly(len(io), topo, kernel=kernel))
        for q, m in zip(io, port):
            rows.append({"dump": d.name, "kernel": kernel, "controller": ctrl.controller,
                         "node": ctrl.node, "queue": q.queue,
                         "kernel_mask": q.smp_affinity_list, "port_mask": format_cpulist(m),
                         "equal": q.smp_affinity == m,
                         "effective_cpu": q.effective_affinity_list})
    return pd.DataFrame(rows)


def dedicated_counts(dump: str) -> pd.Series:
    """Per CPU, how many NVMe I/O vectors of the dump have that CPU alone in
    their managed mask (the real kernel's masks)."""
    d = read_lab_dump(dump)
    counts: dict[int, int] = {}
    for ctrl in d.nvme:
        for q in ctrl.irqs:
            if q.queue >= 1 and q.smp_affinity.bit_count() == 1:
                cpu = q.smp_affinity.bit_length() - 1
                counts[cpu] = counts.get(cpu, 0) + 1
    return pd.Series(counts, name="dedicated_vectors", dtype=int).sort_index()


def probe_table(dump: str) -> pd.DataFrame:
    """One row per traced ``nvme_probe``: dump, kernel, cpu, comm, caller."""
    d = read_lab_dump(dump)
    kernel = versions.parse_release(d.kernel_release)
    return pd.DataFrame([{"dump": d.name, "kernel": kernel, "cpu": t.cpu, "comm": t.comm,
                          "caller": t.parent} for t in d.trace if t.function == "nvme_probe"])
