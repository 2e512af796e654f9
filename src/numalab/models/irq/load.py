"""Per-CPU interrupt load implied by a set of affinity masks.

Input: the masks several devices got from ``group_cpus_evenly()`` (one list
of masks per device, one mask per vector/queue). Output: for every CPU, how
many vectors may fire on it, how many of those are *dedicated* (the vector's
mask is that CPU alone, so it has no choice) and how many are *shared*; and
summary metrics used to compare placements (mainline vs the rotate patch).

The load model is deliberately simple and stated here once:

* a dedicated vector puts its whole load on its CPU;
* a shared vector whose mask has k CPUs is counted as 1/k on each of them
  (``share``): the expected load if its interrupts were spread evenly. The
  kernel actually targets one CPU of the mask at a time (the vector matrix
  allocator picks the least loaded), so ``share`` is an average, not a
  prediction of one boot.

Every vector is assumed to carry the same interrupt rate.

>>> load = irq_load([[0b01, 0b10], [0b11]], 0b11)
>>> load.dedicated, load.shared, load.share
((1, 1), (1, 1), (1.5, 1.5))
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["IrqLoad", "irq_load", "metrics", "crossing_groups", "cpu_domains",
           "group_metrics"]


@dataclass(frozen=True)
class IrqLoad:
    """Per-CPU tables, all indexed like ``cpus`` (ascending CPU ids)."""

    cpus: tuple[int, ...]
    groups: tuple[int, ...]       # vectors whose mask contains the CPU
    dedicated: tuple[int, ...]    # ... whose mask is the CPU alone
    shared: tuple[int, ...]       # ... whose mask has other CPUs too
    share: tuple[float, ...]      # sum of 1/|mask| over those vectors

    def rows(self) -> list[dict]:
        """One dict per CPU: cpu, groups, dedicated, shared, share."""
        return [{"cpu": c, "groups": g, "dedicated": d, "shared": s, "share": round(x, 6)}
                for c, g, d, s, x in zip(self.cpus, self.groups, self.dedicated,
                                         self.shared, self.share)]


def _bits(mask: int) -> Iterable[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def irq_load(devices: Sequence[Sequence[int]], cpu_mask: int) -> IrqLoad:
    """Count, per CPU of ``cpu_mask``, the vectors of ``devices`` that can run on it.

    ``devices`` is a list (one entry per device) of lists of masks (one per
    vector). Empty masks (groups the kernel left empty) count for nothing.
    CPUs that appear in a mask but not in ``cpu_mask`` are added.

    >>> irq_load([[0b1, 0b110]], 0b111).rows()[1]
    {'cpu': 1, 'groups': 1, 'dedicated': 0, 'shared': 1, 'share': 0.5}
    """
    seen = cpu_mask
    for masks in devices:
        for m in masks:
            seen |= m
    ids = list(_bits(seen))
    index = {c: i for i, c in enumerate(ids)}
    groups = [0] * len(ids)
    dedicated = [0] * len(ids)
    share = [0.0] * len(ids)
    for masks in devices:
        for m in masks:
            k = m.bit_count()
            if not k:
                continue
            if k == 1:          # the common case in a sweep: one bit, no loop
                i = index[m.bit_length() - 1]
                groups[i] += 1
                share[i] += 1.0
                dedicated[i] += 1
                continue
            w = 1.0 / k
            while m:
                low = m & -m
                i = index[low.bit_length() - 1]
                groups[i] += 1
                share[i] += w
                m ^= low
    shared = [g - d for g, d in zip(groups, dedicated)]
    return IrqLoad(tuple(ids), tuple(groups), tuple(dedicated), tuple(shared), tuple(share))


def crossing_groups(devices: Sequence[Sequence[int]], domains: Iterable[int]) -> int:
    """How many non-empty masks are not inside one of ``domains`` (cluster or node masks).

    One pass: each mask is tested only against the domains holding its
    lowest CPU (a mask inside a domain holds that CPU), so the cost is the
    number of masks, not masks x domains.

    >>> crossing_groups([[0b0011, 0b0110]], [0b0011, 0b1100])
    1
    """
    holding: dict[int, list[int]] = {}      # lowest-CPU bit -> domains holding it
    for d in set(domains):
        rest = d
        while rest:
            low = rest & -rest
            holding.setdefault(low, []).append(d)
            rest ^= low
    count = 0
    for masks in devices:
        for m in masks:
            if m:
                for d in holding.get(m & -m, ()):
                    if not m & ~d:
                        break
                else:
                    count += 1
    return count


def cpu_domains(view) -> tuple[list[int], list[int]]:
    """The cluster and node masks of every possible CPU of a prepared
    topology (``numalab.kernel.lib.group_cpus.prepare``): a CPU without
    cluster information is its own cluster.

    >>> from numalab.kernel.lib.group_cpus import prepare
    >>> from numalab.topology import load
    >>> cpu_domains(prepare(load("numa:2 core:2 pu:1")))
    ([1, 2, 4, 8], [3, 3, 12, 12])
    """
    nodes: dict[int, int] = {}
    for c in _bits(view.possible):
        n = view.cpu_to_node[c]
        nodes[n] = nodes.get(n, 0) | (1 << c)
    clusters = [0] * view.nr_cpu_ids
    node_of = [0] * view.nr_cpu_ids
    for c in _bits(view.possible):
        cl = view.cluster[c] if c < len(view.cluster) else 0
        clusters[c] = (cl & view.possible) or (1 << c)
        node_of[c] = nodes[view.cpu_to_node[c]]
    return clusters, node_of


def group_metrics(devices: Sequence[Sequence[int]], view) -> tuple[dict, IrqLoad]:
    """The one metrics computation of the book (chapter, sweeps and
    ``numalab group-cpus``): :func:`metrics` over the *present* CPUs of
    ``view`` (only present CPUs take interrupts, so a group of one present
    CPU plus possible-but-absent ones counts as dedicated), plus groups
    crossing a cluster or a node and ``empty_masks`` (masks with no present
    CPU). Returns ``(metrics dict, IrqLoad)``.

    >>> from numalab.kernel.lib.group_cpus import group_cpus_evenly, prepare
    >>> from numalab.topology import load
    >>> v = prepare(load("numa:2 core:2 pu:1"))
    >>> m, _ = group_metrics([list(group_cpus_evenly(3, v))], v)
    >>> m["max_dedicated"], m["cross_cluster_groups"], m["cross_node_groups"], m["empty_masks"]
    (1, 1, 0, 0)
    """
    present = view.present
    clipped = [[m & present for m in g] for g in devices]
    load_ = irq_load(clipped, present)
    clusters, nodes = cpu_domains(view)
    m = metrics(load_)
    m["cross_cluster_groups"] = crossing_groups(devices, [x for x in clusters if x])
    m["cross_node_groups"] = crossing_groups(devices, [x for x in nodes if x])
    m["empty_masks"] = sum(1 for g in clipped for x in g if not x)
    return m, load_


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def metrics(load: IrqLoad, clusters: Iterable[int] | None = None,
            nodes: Iterable[int] | None = None,
            devices: Sequence[Sequence[int]] | None = None) -> dict:
    """Summary figures of an :class:`IrqLoad`.

    * ``max_dedicated`` / ``mean_dedicated``: dedicated vectors per CPU;
      ``dedicated_imbalance`` is their ratio (0 when nothing is dedicated);
    * ``cpus_at_max_dedicated`` and ``worst_cpus``: the CPUs carrying the
      most dedicated vectors (empty list when none is dedicated);
    * ``max_share`` / ``mean_share`` / ``share_imbalance`` (max/mean) and
      ``share_cv`` (population standard deviation / mean) of ``share``;
    * ``cross_cluster_groups`` / ``cross_node_groups``: masks spanning
      more than one cluster / node, when ``devices`` and the domain masks
      are given (``None`` otherwise).

    >>> m = metrics(irq_load([[0b01, 0b10], [0b01, 0b10]], 0b11))
    >>> m["max_dedicated"], m["dedicated_imbalance"], m["share_cv"]
    (2, 1.0, 0.0)
    """
    ded = load.dedicated
    n = len(ded)
    max_d = max(ded, default=0)
    mean_d = sum(ded) / n if n else 0.0
    share = load.share
    max_s = max(share, default=0.0)
    mean_s = sum(share) / n if n else 0.0
    cv = _ratio(statistics.pstdev(share), mean_s) if n else 0.0
    worst = [c for c, d in zip(load.cpus, ded) if d == max_d] if max_d else []
    out = {
        "cpus": n,
        "vectors": round(sum(share)),  # non-empty masks: each adds 1 in total
        "max_dedicated": max_d,
        "mean_dedicated": mean_d,
        "dedicated_imbalance": _ratio(max_d, mean_d),
        "cpus_at_max_dedicated": len(worst),
        "worst_cpus": worst,
        "max_share": max_s,
        "mean_share": mean_s,
        "share_imbalance": _ratio(max_s, mean_s),
        "share_cv": cv,
        "cross_cluster_groups": None,
        "cross_node_groups": None,
    }
    if devices is not None:
        if clusters is not None:
            out["cross_cluster_groups"] = crossing_groups(devices, clusters)
        if nodes is not None:
            out["cross_node_groups"] = crossing_groups(devices, nodes)
    return out
