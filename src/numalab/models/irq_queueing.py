"""From interrupt imbalance to per-disk throughput: a small queueing model.

The seed patch reports a measurement (96-vCPU Hyper-V VM, 6 NVMe disks of
63 MSI-X vectors, fio 4K random reads, psync, 16 jobs per disk, pinned):
the worst disk was 11 % below the average before the patch and 5 % after;
the disks that had been penalised gained 12 % IOPS and lost 10 % latency.
This module asks how much of that a plain queueing argument explains.

Assumptions (each one a knob below):

1. **Interrupt work per CPU.** Every vector of every disk carries the same
   interrupt rate (the disk's completions spread evenly over its queues).
   A vector whose mask has ``k`` CPUs puts ``1/k`` of a unit on each (the
   ``share`` of :mod:`numalab.models.irq_load`): a dedicated vector puts a
   whole unit on its CPU. CPU ``c`` is busy with interrupts a fraction
   ``rho_c = a * units_c`` of the time. ``a`` (utilisation per unit) is the
   one parameter calibrated on the "before" figure.
2. **Jobs.** Disk ``d``'s jobs are pinned to CPUs (``placement``):
   ``"blocks"`` -- disk ``d`` gets CPUs ``[d*J, (d+1)*J)`` (``J`` jobs per
   disk; 6 x 16 = 96 fills the machine); ``"interleaved"`` -- CPU ``c``
   runs a job of disk ``c % D``.
3. **A job's I/O.** psync keeps one I/O in flight per job (a closed loop,
   queue depth 1), so a job's IOPS is ``1 / latency``. A fraction
   ``cpu_fraction`` of an unloaded I/O's latency is CPU work on the job's
   CPU (submission and completion), the rest is device time. The CPU is a
   single server whose interrupts come first: the job's CPU work is slowed
   by the M/M/1 factor ``1 / (1 - rho)`` (``queue="mm1"``) or by the M/D/1
   waiting time ``1 + rho / (2 (1 - rho))`` (``queue="md1"``, constant
   service). (M/D/1 with ``cpu_fraction=1`` is the same curve as M/M/1
   with ``cpu_fraction=0.5``: ``1 + rho/(2(1-rho)) = 1/2 + 1/(2(1-rho))``.)
4. **A disk's throughput** is the sum of its jobs' (``aggregate="sum"``), or
   ``J`` times its slowest job's (``"min"``: the disk limited by its
   slowest queue's CPU).

With identical masks on every disk (mainline) the only thing that tells
the disks apart is where their jobs run: "blocks" puts whole runs of
stacked CPUs under one or two disks, "interleaved" spreads them over all
disks and, for the same ``a``, gives a much smaller gap.

>>> from numalab.topology import load
>>> r = seed_comparison(load("numa:2 cluster:24 core:2 pu:1"))
>>> round(r["before_degradation"], 3), r["after_degradation"] < 0.05
(0.11, True)
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import published as _published
from ..topology.model import Topology
from .irq_bound import cached_view
from .irq_load import irq_load

__all__ = ["SEED_MEASUREMENT", "cpu_units", "job_cpus", "job_speed", "disk_throughput",
           "degradation", "calibrate", "seed_comparison"]

#: The patch's published figures (fractions), from numalab.published.
SEED_MEASUREMENT = {k: v for k, v in _published.irq_fio().items()
                    if k in ("before_degradation", "after_degradation",
                             "penalized_iops_gain", "penalized_latency_change")}


def cpu_units(groups: Sequence[Sequence[int]], cpu_mask: int) -> dict[int, float]:
    """Interrupt units per CPU (assumption 1): ``sum of 1/|mask|``.

    >>> cpu_units([[0b01, 0b10], [0b11]], 0b11)
    {0: 1.5, 1: 1.5}
    """
    load = irq_load(groups, cpu_mask)
    return dict(zip(load.cpus, load.share))


def job_cpus(devices: int, cpus: Sequence[int], jobs_per_disk: int,
             placement: str = "blocks") -> list[list[int]]:
    """The CPUs of each disk's jobs (assumption 2), CPUs taken from ``cpus``
    in order (wrapping when there are more jobs than CPUs).

    >>> job_cpus(2, range(4), 2), job_cpus(2, range(4), 2, "interleaved")
    ([[0, 1], [2, 3]], [[0, 2], [1, 3]])
    """
    cpus = list(cpus)
    n = len(cpus)
    if placement == "blocks":
        return [[cpus[(d * jobs_per_disk + j) % n] for j in range(jobs_per_disk)]
                for d in range(devices)]
    if placement == "interleaved":
        return [[cpus[(j * devices + d) % n] for j in range(jobs_per_disk)]
                for d in range(devices)]
    raise ValueError(f"placement must be 'blocks' or 'interleaved', not {placement!r}")


def job_speed(rho: float, cpu_fraction: float = 1.0, queue: str = "mm1") -> float:
    """A QD1 job's IOPS relative to an idle CPU (assumption 3).

    >>> job_speed(0.0), round(job_speed(0.5), 3), round(job_speed(0.5, queue="md1"), 3)
    (1.0, 0.5, 0.667)
    """
    if not 0 <= rho < 1:
        return 0.0
    if queue == "mm1":
        slow = 1.0 / (1.0 - rho)
    elif queue == "md1":
        slow = 1.0 + rho / (2.0 * (1.0 - rho))
    else:
        raise ValueError(f"queue must be 'mm1' or 'md1', not {queue!r}")
    return 1.0 / ((1.0 - cpu_fraction) + cpu_fraction * slow)


def disk_throughput(units: dict[int, float], jobs: Sequence[Sequence[int]], a: float,
                    cpu_fraction: float = 1.0, queue: str = "mm1",
                    aggregate: str = "sum") -> list[float]:
    """Relative IOPS of each disk (assumption 4): ``jobs[d]`` lists the CPUs
    of disk ``d``'s jobs. An idle machine gives each disk ``len(jobs[d])``.

    >>> disk_throughput({0: 0.0, 1: 1.0}, [[0], [1]], 0.5)
    [1.0, 0.5]
    """
    out = []
    for cpus in jobs:
        speeds = [job_speed(a * units.get(c, 0.0), cpu_fraction, queue) for c in cpus]
        if aggregate == "sum":
            out.append(sum(speeds))
        elif aggregate == "min":
            out.append(len(speeds) * min(speeds) if speeds else 0.0)
        else:
            raise ValueError(f"aggregate must be 'sum' or 'min', not {aggregate!r}")
    return out


def degradation(throughputs: Sequence[float]) -> float:
    """How far the worst disk is below the average: ``1 - min / mean``.

    >>> degradation([1.0, 1.0, 0.7])
    0.222222222222
    """
    mean = sum(throughputs) / len(throughputs)
    return round(1.0 - min(throughputs) / mean, 12) if mean else 0.0


def calibrate(units: dict[int, float], jobs: Sequence[Sequence[int]], target: float,
              **kw) -> float:
    """The ``a`` for which :func:`degradation` equals ``target`` (bisection on
    ``[0, 1 / max units)``; the degradation grows with ``a``). Raises
    ValueError when no ``a`` reaches it (e.g. every disk sees the same CPUs).
    """
    top = max(units.values(), default=0.0)
    if top <= 0:
        raise ValueError("no interrupt load: nothing to calibrate")

    def f(a: float) -> float:
        return degradation(disk_throughput(units, jobs, a, **kw)) - target

    lo, hi = 0.0, (1.0 / top) * (1 - 1e-9)
    if f(lo) > 0 or f(hi) < 0:
        raise ValueError(f"no utilisation per unit gives a {target:.0%} gap with these jobs")
    for _ in range(100):
        mid = (lo + hi) / 2
        if f(mid) < 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def seed_comparison(topo: Topology, vectors: int = 62, devices: int = 6,
                    jobs_per_disk: int = 16, placement: str = "blocks",
                    target: float = SEED_MEASUREMENT["before_degradation"],
                    after: str = "rotate", offsets: Sequence[int] | None = None,
                    **kw) -> dict:
    """Calibrate ``a`` on mainline's gap, predict the gap under ``after``
    (any variant of :mod:`numalab.models.irq_sweep`).

    Returns a dict: ``a``, the busiest CPU's utilisation before and after
    (``rho_max_before`` / ``rho_max_after``), ``before`` / ``after`` (IOPS of
    each disk, relative to an idle machine), their degradations, the
    ``penalized`` disks (the slowest before, within 0.1 %), their mean IOPS
    gain and latency change (QD1: latency = jobs / IOPS), and the
    measurement for comparison.
    """
    from .irq_sweep import device_groups, offsets_for

    view = cached_view(topo)
    cpus = [c for c in range(view.nr_cpu_ids) if view.present >> c & 1]
    jobs = job_cpus(devices, cpus, jobs_per_disk, placement)
    before_groups = device_groups(topo, vectors, devices, "mainline")
    after_groups = device_groups(topo, vectors, devices, after,
                                 offsets if offsets is not None else offsets_for(devices))
    u0 = cpu_units(before_groups, view.present)
    u1 = cpu_units(after_groups, view.present)
    a = calibrate(u0, jobs, target, **kw)
    x0 = disk_throughput(u0, jobs, a, **kw)
    x1 = disk_throughput(u1, jobs, a, **kw)
    worst = min(x0)
    pen = [d for d, x in enumerate(x0) if x <= worst * 1.001]
    gain = sum(x1[d] / x0[d] - 1 for d in pen) / len(pen)
    lat = sum(x0[d] / x1[d] - 1 for d in pen) / len(pen)
    return {
        "a": a,
        "rho_max_before": a * max(u0.values()),
        "rho_max_after": a * max(u1.values()),
        "before": x0, "after": x1,
        "before_degradation": degradation(x0),
        "after_degradation": degradation(x1),
        "penalized": pen,
        "penalized_iops_gain": gain,
        "penalized_latency_change": lat,
        "measured": dict(SEED_MEASUREMENT),
    }
