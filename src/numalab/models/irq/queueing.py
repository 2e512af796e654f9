"""From interrupt placement to per-disk throughput, following blk-mq's routing.

The seed patch reports (96-vCPU Hyper-V VM, 6 NVMe disks of 63 MSI-X
vectors, fio 4K random reads, psync, 16 jobs per disk, "CPU-pinned"): the
worst disk 11 % below the average before the patch, 5 % after; the disks
that had been penalised gained 12 % IOPS and lost 10 % latency
(:data:`SEED_MEASUREMENT`, from :func:`numalab.published.irq_fio`). This
module asks what interrupt placement alone can explain of that.

**Routing (kernel code, :mod:`numalab.models.irq.routing`).** A job on CPU
``c`` of disk ``d`` submits to the queue whose mask holds ``c``; the
completion interrupt fires on that vector's effective CPU ``e`` (x86: the
CPU of the mask with the fewest managed vectors, ties to the last). A
vector's interrupt rate is therefore the I/O rate of the jobs on the CPUs
mapped to it; a vector with no job behind it fires nothing, however many
devices stack a dedicated vector on its CPU.

**Interference (assumed).** psync keeps one I/O in flight per job (a closed
loop at queue depth 1), so a job's IOPS is ``1 / latency``. A fraction
``cpu_fraction`` (``f``) of an idle I/O's latency is CPU work, half on the
submitting CPU and half on the completing CPU (all on ``c`` when ``e ==
c``). A CPU is busy with the completions of *other* jobs' I/O (those that
complete on it) a fraction ``rho = a * (their IOPS, relative to idle)``;
``a`` is the CPU time of one job's completion stream at idle rate. CPU work
queued behind that is slowed by the M/M/1 factor ``1 / (1 - rho)``
(``queue="md1"``: ``1 + rho / (2 (1 - rho))``). IOPS and ``rho`` are
solved together by fixed-point iteration.

**Placement (assumed; the patch does not say).** Where each disk's jobs are
pinned: ``"blocks"`` (disk ``d`` on CPUs ``[16 d, 16 d + 16)``),
``"interleaved"`` (CPU ``c`` runs a job of disk ``c % 6``), ``"random"`` (a
seeded random one-job-per-CPU assignment). :func:`unpinned_load` is the
other regime: every CPU submitting equally to every disk.

Nothing is fitted: :func:`gap_grid` evaluates the gap before and after over
a grid of ``a`` and ``f``, so what the published figures can and cannot be
explained by is read off the whole plausible range.

>>> from numalab.topology import load
>>> r = compare(load("numa:2 core:2 pu:1"), vectors=2, devices=2, jobs_per_disk=2,
...             a=0.2, placement="blocks")
>>> r["before"] == r["after"], len(r["before"])
(True, 2)
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from ... import published as _published
from ...topology.model import Topology
from .bound import cached_view
from .routing import effective_cpus, hw_queue_map

__all__ = ["SEED_MEASUREMENT", "PLACEMENTS", "A_GRID", "F_GRID", "PLAUSIBLE", "gap_grid_cached", "job_cpus", "slowdown", "disk_iops",
           "degradation", "unpinned_load", "compare", "gap_grid"]

#: The patch's published figures (fractions), from numalab.published.
SEED_MEASUREMENT = {k: v for k, v in _published.irq_fio().items()
                    if k in ("before_degradation", "after_degradation",
                             "penalized_iops_gain", "penalized_latency_change")}

PLACEMENTS = ("blocks", "interleaved", "random")

# The assumed parameters' grid (chapter 2 and its evidence page use the same):
# a, the CPU time of one job's completions (fraction of a CPU), and f, the
# share of latency that is CPU work; PLAUSIBLE bounds the values judged
# plausible (a few hundredths of a CPU, CPU work under a third of latency).
A_GRID = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4)
F_GRID = (0.1, 0.3, 0.5, 1.0)
PLAUSIBLE = {"a": 0.05, "cpu_fraction": 0.3}


def job_cpus(devices: int, cpus: Sequence[int], jobs_per_disk: int,
             placement: str = "blocks", seed: int = 0) -> list[list[int]]:
    """The CPU of each job of each disk, taken from ``cpus`` (wrapping when
    there are more jobs than CPUs); ``"random"`` shuffles the CPUs with
    ``seed`` first, then deals them in blocks.

    >>> job_cpus(2, range(4), 2), job_cpus(2, range(4), 2, "interleaved")
    ([[0, 1], [2, 3]], [[0, 2], [1, 3]])
    >>> job_cpus(2, range(4), 2, "random", seed=1)
    [[3, 0], [2, 1]]
    """
    cpus = list(cpus)
    n = len(cpus)
    if placement == "random":
        random.Random(seed).shuffle(cpus)
        placement = "blocks"
    if placement == "blocks":
        return [[cpus[(d * jobs_per_disk + j) % n] for j in range(jobs_per_disk)]
                for d in range(devices)]
    if placement == "interleaved":
        return [[cpus[(j * devices + d) % n] for j in range(jobs_per_disk)]
                for d in range(devices)]
    raise ValueError(f"placement must be one of {PLACEMENTS}, not {placement!r}")


def slowdown(rho: float, queue: str = "mm1") -> float:
    """How much longer CPU work takes behind interrupts taking a fraction
    ``rho`` of the CPU: M/M/1 ``1/(1-rho)`` or M/D/1 ``1 + rho/(2(1-rho))``;
    infinite at ``rho >= 1``.

    >>> slowdown(0.0), slowdown(0.5), slowdown(0.5, "md1")
    (1.0, 2.0, 1.5)
    """
    if rho >= 1:
        return float("inf")
    if queue == "mm1":
        return 1.0 / (1.0 - rho)
    if queue == "md1":
        return 1.0 + rho / (2.0 * (1.0 - rho))
    raise ValueError(f"queue must be 'mm1' or 'md1', not {queue!r}")


def _routes(devices: Sequence[Sequence[int]], effective, jobs) -> list[list[tuple[int, int]]]:
    out = []
    for masks, eff, cpus in zip(devices, effective, jobs):
        qmap = hw_queue_map(masks)
        row = []
        for c in cpus:
            q = qmap.get(c)
            e = eff[q] if q is not None else None
            row.append((c, c if e is None else e))
        out.append(row)
    return out


def disk_iops(devices: Sequence[Sequence[int]], effective, jobs: Sequence[Sequence[int]],
              a: float, cpu_fraction: float = 0.5, queue: str = "mm1",
              iterations: int = 200) -> list[float]:
    """Each disk's IOPS relative to one idle job (a disk of ``J`` jobs on an
    idle machine gives ``J``), under the module's routing and interference.

    >>> disk_iops([[0b01, 0b10]], [[0, 1]], [[0, 1]], a=0.3)    # every job completes locally
    [2.0]
    >>> x = disk_iops([[0b11]], [[1]], [[0, 1]], a=0.3)          # CPU 1 takes CPU 0's completions
    >>> round(x[0], 3)
    1.824
    """
    routes = _routes(devices, effective, jobs)
    flat = [(d, c, e) for d, row in enumerate(routes) for c, e in row]
    x = [1.0] * len(flat)
    f = cpu_fraction
    for _ in range(iterations):
        foreign: dict[int, float] = {}
        for (d, c, e), xi in zip(flat, x):
            if e != c:
                foreign[e] = foreign.get(e, 0.0) + xi
        new = []
        for d, c, e in flat:
            # interrupts of other jobs on a CPU: completions landing there from elsewhere,
            # less this job's own when it completes there remotely
            rc = a * foreign.get(c, 0.0)
            re_ = a * (foreign.get(e, 0.0) - (x[len(new)] if e != c else 0.0))
            if e == c:
                lat = (1 - f) + f * slowdown(rc, queue)
            else:
                lat = (1 - f) + f / 2 * slowdown(rc, queue) + f / 2 * slowdown(re_, queue)
            new.append(0.0 if lat == float("inf") else 1.0 / lat)
        if max(abs(p - q) for p, q in zip(new, x)) < 1e-12:
            x = new
            break
        x = [0.5 * p + 0.5 * q for p, q in zip(new, x)]
    out = [0.0] * len(devices)
    for (d, _, _), xi in zip(flat, x):
        out[d] += xi
    return out


def degradation(throughputs: Sequence[float]) -> float:
    """How far the worst disk is below the average: ``1 - min / mean``.

    >>> degradation([1.0, 1.0, 0.7])
    0.222222222222
    """
    mean = sum(throughputs) / len(throughputs)
    return round(1.0 - min(throughputs) / mean, 12) if mean else 0.0


def unpinned_load(devices: Sequence[Sequence[int]], effective, cpus: Sequence[int]) -> dict[int, float]:
    """Interrupts per CPU when every CPU of ``cpus`` submits one I/O to every
    device: a vector fires once per CPU mapped to it, on its effective CPU.

    >>> unpinned_load([[0b01, 0b10]], [[0, 1]], [0, 1])
    {0: 1.0, 1: 1.0}
    """
    from .routing import interrupt_counts
    subs = [{c: 1.0 for c in cpus} for _ in devices]
    load = interrupt_counts(devices, effective, subs)
    return {c: load.get(c, 0.0) for c in cpus}


def _present(topo: Topology) -> list[int]:
    view = cached_view(topo)
    return [c for c in range(view.nr_cpu_ids) if view.present >> c & 1]


def compare(topo: Topology, vectors: int = 62, devices: int = 6, jobs_per_disk: int = 16,
            a: float = 0.1, cpu_fraction: float = 0.5, placement: str = "blocks",
            seed: int = 0, after: str = "rotate", offsets: Sequence[int] | None = None,
            queue: str = "mm1") -> dict:
    """Mainline ("before") against ``after`` for one choice of the assumed
    parameters. Returns ``before`` / ``after`` (IOPS per disk), their
    degradations, the disks slowest before (``penalized``, within 0.1 %),
    their mean IOPS gain and latency change (QD1: latency = jobs / IOPS)
    and, for each phase, how many jobs complete on another CPU
    (``remote_before`` / ``remote_after``, per disk).
    """
    from .sweep import device_groups, offsets_for
    cpus = _present(topo)
    jobs = job_cpus(devices, cpus, jobs_per_disk, placement, seed)
    g0 = device_groups(topo, vectors, devices, "mainline")
    g1 = device_groups(topo, vectors, devices, after,
                       offsets if offsets is not None else offsets_for(devices))
    e0, e1 = effective_cpus(g0), effective_cpus(g1)
    x0 = disk_iops(g0, e0, jobs, a, cpu_fraction, queue)
    x1 = disk_iops(g1, e1, jobs, a, cpu_fraction, queue)
    worst = min(x0)
    pen = [d for d, x in enumerate(x0) if x <= worst * 1.001]
    return {
        "before": x0, "after": x1,
        "before_degradation": degradation(x0), "after_degradation": degradation(x1),
        "penalized": pen,
        "penalized_iops_gain": sum(x1[d] / x0[d] - 1 for d in pen) / len(pen),
        "penalized_latency_change": sum(x0[d] / x1[d] - 1 for d in pen) / len(pen),
        "remote_before": [sum(1 for c, e in r if c != e) for r in _routes(g0, e0, jobs)],
        "remote_after": [sum(1 for c, e in r if c != e) for r in _routes(g1, e1, jobs)],
    }


def gap_grid(topo: Topology, a_values: Sequence[float], f_values: Sequence[float],
             placements: Sequence[str] = PLACEMENTS, seeds: Sequence[int] = (0,),
             **kw):
    """:func:`compare` over every ``a`` x ``f`` x placement (x seed for
    ``"random"``): a DataFrame with one row each (``placement``, ``seed``,
    ``a``, ``cpu_fraction``, the degradations, penalised disks and their
    gain and latency change)."""
    import pandas as pd
    rows = []
    for p in placements:
        for s in (seeds if p == "random" else (0,)):
            for a in a_values:
                for f in f_values:
                    r = compare(topo, a=a, cpu_fraction=f, placement=p, seed=s, **kw)
                    rows.append({"placement": p, "seed": s, "a": a, "cpu_fraction": f,
                                 "before_degradation": r["before_degradation"],
                                 "after_degradation": r["after_degradation"],
                                 "penalized": ",".join(map(str, r["penalized"])),
                                 "penalized_iops_gain": r["penalized_iops_gain"],
                                 "penalized_latency_change": r["penalized_latency_change"]})
    return pd.DataFrame(rows)


def gap_grid_cached(topo: Topology, a_values: Sequence[float], f_values: Sequence[float],
                    placements: Sequence[str] = PLACEMENTS, seeds: Sequence[int] = (0,), **kw):
    """:func:`gap_grid` kept on disk (:func:`numalab.diskcache.cached`): the
    chapter states the grid's verdict and its evidence page draws it, and
    both run at once; the key holds the arguments, the topology and the
    source of the models it runs, so a changed model is computed anew."""
    from pathlib import Path

    from ...diskcache import cached
    here = Path(__file__).resolve().parent
    code = [(f.name, f.read_text()) for f in sorted(here.glob("*.py"))]
    code.append(("group_cpus.py", (here.parents[1] / "kernel" / "lib" / "group_cpus.py").read_text()))
    key = {"topo": repr(topo), "a": list(a_values), "f": list(f_values), "placements": list(placements),
           "seeds": list(seeds), "kw": kw, "code": code}
    return cached("irq-gap-grid", key, lambda: gap_grid(topo, a_values, f_values, placements, seeds, **kw))
