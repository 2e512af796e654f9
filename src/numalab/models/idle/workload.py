"""The port's counts over the assumed workload inputs' ranges (chapter 4).

One place for the sweep both chapter 4 pages report: the chapter's headline
states its range, the evidence page shows its table. Each run goes through
:func:`numalab.models.idle.sim.simulate`, so with ``sim.enable_cache()`` the
second page reuses the first page's runs instead of computing them again.
(A module of its own: the simulator's cache key hashes ``sim.py``, and this
sweep is not part of the model.)
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...evidence.spread import Spread, over_seeds
from . import sim as S

__all__ = ["WORKLOAD_ENDS", "COUNTS", "WorkloadRanges", "workload_ranges"]

# The assumed workload inputs varied one at a time, at the ends of their ranges
# (load and waker_local: sim.ASSUMED_RANGES' ends the chapter uses; sync_frac: none to all).
WORKLOAD_ENDS = {"load": (0.6, 0.95), "sync_frac": (0.0, 1.0), "waker_local": (0.5, 1.0)}
COUNTS = {"cross_node_writes": "cross-node writes per wakeup", "walks": "node walks per wakeup"}


@dataclass(frozen=True)
class WorkloadRanges:
    """The sweep's rows and its extremes.

    ``rows``: one dict per (input, value, mode) with keys input, value,
    idle masks ("flat" / "per-node") and, per key of :data:`COUNTS`, a
    :class:`Spread` over seeds. The extremes are over every row and seed."""
    rows: list
    pernode_walks: tuple[float, float]       # lowest, highest per-node walks per wakeup
    pernode_cross_max: float                 # highest per-node cross-node writes per wakeup
    flat_cross_min: float                    # lowest flat cross-node writes per wakeup
    sync_all: dict                           # the per-node row at sync_frac 1: count -> Spread


def workload_ranges(topo, base: "S.SimParams", seeds) -> WorkloadRanges:
    """Per-wakeup port counts on ``topo`` for each mode, with each input of
    :data:`WORKLOAD_ENDS` at each end of its range (the others at ``base``),
    over ``seeds`` (at least five)."""
    seeds = list(seeds)
    rows = []
    for name, ends in WORKLOAD_ENDS.items():
        for v in ends:
            for mode in ("flat", "per-node"):
                rs = {sd: S.simulate(topo, replace(base, per_node=mode == "per-node", **{name: v}), seed=sd)
                      for sd in seeds}
                row = {"input": name, "value": v, "idle masks": mode}
                for k in COUNTS:
                    row[k] = over_seeds(lambda sd, k=k: rs[sd].per_decision()[k], seeds)
                rows.append(row)
    pn = [r for r in rows if r["idle masks"] == "per-node"]
    fl = [r for r in rows if r["idle masks"] == "flat"]
    sync = next(r for r in pn if r["input"] == "sync_frac" and r["value"] == 1.0)
    return WorkloadRanges(
        rows=rows,
        pernode_walks=(min(r["walks"].low for r in pn), max(r["walks"].high for r in pn)),
        pernode_cross_max=max(r["cross_node_writes"].high for r in pn),
        flat_cross_min=min(r["cross_node_writes"].low for r in fl),
        sync_all={k: sync[k] for k in COUNTS})
