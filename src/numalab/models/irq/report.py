"""Chapter 2's small tables and phrases: results a reader can take in at once.

The chapter states what real kernels did (the lab's dumps and arm64 boots)
before anything else; these functions turn those records into tables with
human column names, one row per kernel or machine, so a generated sentence
needs to carry at most a few numbers.

* :func:`between` -- "5 to 7", or "6" when both ends are equal (a range
  whose ends are equal is not a range);
* :func:`stacking_row` -- one kernel's dedicated vectors per CPU, summarised
  (the most on one CPU, how many CPUs carry that many, how many carry any);
* :func:`arm64_queue_table` -- the arm64 boots' I/O queue counts, one row per
  machine and request, without and with the patch;
* :func:`measured_routing_inputs` -- a lab dump's I/O queue masks and
  effective CPUs as the real kernel set them, the input of the routing model
  when no effective-CPU rule should be assumed;
* :func:`effective_rule_table` -- the x86 effective-CPU rule against the
  effective CPUs of lab dumps, judged in the one fixed order the model uses
  (a verdict on an order found after the fact would be a fit).

>>> between(5, 7), between(6, 6), between(0.5, 0.5, " %")
('5 to 7', '6', '0.5 %')
"""

from __future__ import annotations

from typing import Iterable

import pandas as pd

from ...evidence.prose import say

__all__ = ["between", "stacking_row", "arm64_queue_table", "fewer_queue_configs",
           "measured_routing_inputs", "effective_rule_table", "unequal_clusters"]


def between(lo, hi, unit: str = "") -> str:
    """``"lo to hi"`` (with ``unit`` after each end), or the one value when
    ``lo == hi``; floats get 3 significant digits (:func:`say`)."""
    if lo == hi:
        return say("{v}", v=lo) + unit
    return say("{lo}{u} to {hi}{u}", lo=lo, hi=hi, u=unit)


def stacking_row(kernel: str, counts: pd.Series, offsets: Iterable[int] | None = None,
                 role: str = "measured (real kernel)") -> dict:
    """One table row for a kernel's dedicated vectors per CPU.

    ``counts`` maps CPU -> dedicated vectors (CPUs without any may be left
    out, as :func:`numalab.lab.oracle.dedicated_counts` does); ``offsets`` the
    devices' spread offsets when the kernel has the rotate patch.

    >>> r = stacking_row("7.2", pd.Series({0: 6, 1: 6, 2: 3}))
    >>> r["most dedicated vectors on one CPU"], r["CPUs at that count"], r["CPUs with any"]
    (6, 2, 3)
    >>> stacking_row("7.2", pd.Series(dtype=int))["most dedicated vectors on one CPU"]
    0
    """
    c = counts[counts > 0] if len(counts) else counts
    top = int(c.max()) if len(c) else 0
    return {"kernel": kernel,
            "most dedicated vectors on one CPU": top,
            "CPUs at that count": int((c == top).sum()) if top else 0,
            "CPUs with any": int(len(c)),
            "spread offsets of the devices": (", ".join(map(str, offsets)) if offsets is not None
                                              else "none (no counter)"),
            "role": role}


def arm64_queue_table(configs: pd.DataFrame, role: str = "measured (real kernel)") -> pd.DataFrame:
    """The arm64 boots' queue counts with human headers, from
    :func:`numalab.lab.arm64.configurations`: nodes, clusters, I/O queues
    asked, I/O queues got without and with the patch, boots per kernel.

    >>> cfg = pd.DataFrame({"nodes": [1], "clusters": ["0-3 / 4"], "asked": [5], "boots 7.2": [2],
    ...                     "boots 7.2-rotate": [2], "queues 7.2": ["5"], "queues 7.2-rotate": ["4"]})
    >>> t = arm64_queue_table(cfg)
    >>> t.loc[0, "I/O queues, Linux 7.2"], t.loc[0, "I/O queues, 7.2 + rotate"], t.loc[0, "boots (without, with)"]
    ('5', '4', '2 and 2')
    """
    return pd.DataFrame({
        "nodes": configs["nodes"],
        "clusters (CPU lists)": configs["clusters"],
        "I/O queues asked": configs["asked"],
        "I/O queues, Linux 7.2": configs["queues 7.2"],
        "I/O queues, 7.2 + rotate": configs["queues 7.2-rotate"],
        "boots (without, with)": [f"{a} and {b}" for a, b in
                                  zip(configs["boots 7.2"], configs["boots 7.2-rotate"])],
        "role": role,
    }).reset_index(drop=True)


def fewer_queue_configs(configs: pd.DataFrame) -> int:
    """How many configurations of :func:`numalab.lab.arm64.configurations`
    gave the patched kernel fewer I/O queues than the unpatched one (in
    every boot: the largest patched count below the smallest unpatched).

    >>> cfg = pd.DataFrame({"queues 7.2": ["5", "4", "10"], "queues 7.2-rotate": ["4", "4", "8 or 9"]})
    >>> fewer_queue_configs(cfg)
    2
    """
    def nums(s):
        return [int(x) for x in str(s).split(" or ")]
    return sum(1 for a, b in zip(configs["queues 7.2"], configs["queues 7.2-rotate"])
               if max(nums(b)) < min(nums(a)))


def unequal_clusters(configs: pd.DataFrame) -> pd.Series:
    """Per configuration of :func:`numalab.lab.arm64.configurations`, True
    when its clusters (the ``clusters`` column: CPU lists joined by " / ")
    are not all of one size -- the case where rotate can leave a mask empty;
    a configuration of equal clusters is a control.

    >>> unequal_clusters(pd.DataFrame({"clusters": ["0-3 / 4", "0-4", "0-1 / 2-3"]})).tolist()
    [True, False, False]
    """
    from ...cpumask import parse_cpulist
    return configs["clusters"].map(
        lambda c: len({parse_cpulist(x.strip()).bit_count() for x in str(c).split("/")}) > 1)


def measured_routing_inputs(dump) -> tuple[list[list[int]], list[list[int | None]]]:
    """``(masks, effective)`` of a lab dump (a path or a read
    :class:`~numalab.lab.dump.LabDump`): per NVMe controller, its I/O queues'
    managed masks and effective CPUs (None where the dump has none), in
    queue order -- both *measured*. They feed
    :func:`numalab.models.irq.queueing.unpinned_load` and
    :func:`numalab.models.irq.routing.interrupt_counts` directly."""
    from ...lab.dump import LabDump, read_lab_dump
    d = dump if isinstance(dump, LabDump) else read_lab_dump(dump)
    masks, eff = [], []
    for ctrl in d.nvme:
        qs = sorted((q for q in ctrl.irqs if q.queue is not None and q.queue >= 1), key=lambda q: q.queue)
        masks.append([q.smp_affinity or 0 for q in qs])
        eff.append([(q.effective_affinity.bit_length() - 1) if q.effective_affinity else None for q in qs])
    return masks, eff


def effective_rule_table(dumps) -> pd.DataFrame:
    """The x86 effective-CPU rule (:func:`numalab.models.irq.routing.effective_cpus`)
    against the measured effective CPUs of lab dumps (paths or read
    :class:`~numalab.lab.dump.LabDump` objects), one row per dump.

    Columns: ``dump``, ``kernel``, ``vectors`` (effective CPUs measured),
    ``in order`` (reproduced with the controllers activated one after
    another, in the dump's order, each in queue order: the order the model
    uses, fixed before looking), ``some order`` (reproduced for the best
    interleaving :func:`~numalab.models.irq.routing.effective_consistency`
    finds, an order chosen to match: fitted), and ``verdict``: ``"held"``
    only when the fixed order reproduces every vector, else ``"failed"``."""
    from ...lab.dump import LabDump, read_lab_dump
    from .routing import effective_consistency, effective_cpus
    rows = []
    for dump in dumps:
        d = dump if isinstance(dump, LabDump) else read_lab_dump(dump)
        ctrls = [[(q.smp_affinity, q.effective_affinity.bit_length() - 1) for q in c.irqs
                  if q.queue and q.effective_affinity] for c in d.nvme]
        hits, total = effective_consistency(ctrls)
        fixed = effective_cpus([[m for m, _ in c] for c in ctrls])
        in_order = sum(1 for c, f in zip(ctrls, fixed) for (_, e), x in zip(c, f) if e == x)
        rows.append({"dump": d.name, "kernel": d.kernel_version, "vectors": total,
                     "in order": in_order, "some order": hits,
                     "verdict": "held" if in_order == total else "failed"})
    return pd.DataFrame(rows, columns=["dump", "kernel", "vectors", "in order", "some order", "verdict"])
