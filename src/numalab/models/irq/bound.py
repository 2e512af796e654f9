"""The best any placement could do: a lower bound on dedicated IRQs per CPU.

Question: ``D`` devices each ask ``group_cpus_evenly()`` for ``V`` groups.
Whatever rule decides *which* clusters get the extra groups (mainline, the
rotate patch, anything else), how few dedicated vectors can the busiest CPU
be left with?

What is optimised
-----------------
A *dedicated* vector is a group of exactly one CPU: its interrupt can only
fire there. Let ``ded(c)`` be the number of devices that give CPU ``c`` a
one-CPU group. The bound is ``L* = min max_c ded(c)`` over every placement
that keeps what the kernel's structure imposes:

1. **per-node counts** -- every device gets, in every node, the number of
   groups the kernel's ``alloc_nodes_groups()`` gives it (read off the
   mainline result; every variant keeps them);
2. **cluster locality** -- where the kernel takes the cluster path
   (``alloc_cluster_groups()`` finds ``ncluster <= ngroups``), a group lies
   inside one cluster, so each cluster gets at least one group and at most
   as many as it has CPUs; otherwise the node is one block (groups may
   cross clusters but never nodes);
3. **partition** -- the groups of one device cover the block's CPUs, each
   CPU in exactly one group.

Per-cluster group counts are free (the rotate patch changes them too).
Group sizes are free as well, which costs nothing: a block of ``n`` CPUs
split into ``k`` groups has at least ``max(0, 2k - n)`` one-CPU groups
(every other group holds two or more CPUs), and the kernel's balanced split
has exactly that many, so only ``k`` per block matters.

Nodes are independent, so ``L* = max over nodes``. Within a node, with
``k[d][b]`` groups of device ``d`` in block ``b`` of ``n_b`` CPUs:

    minimise L  subject to
        sum_b k[d][b] = g            (the node's count, every device)
        1 <= k[d][b] <= n_b          (integer)
        s[d][b] >= 2 k[d][b] - n_b,  s[d][b] >= 0
        sum_d s[d][b] <= L * n_b     (block b's dedicated vectors fit)

The last line is enough because inside a block any counts with
``s[d][b] <= n_b`` can be laid out round robin so that every CPU gets
``floor`` or ``ceil`` of the block's average (:func:`optimal_groups` does
it and so proves the bound is reached). :func:`bound_milp` solves it with
``scipy.optimize.milp`` (HiGHS). :func:`bound_closed_form` is the quick
check ``ceil(D * E / N)`` (``E``: fewest dedicated groups one device can
have in the node, ``N``: the node's CPUs), raised to ``D`` when a block has
one CPU; it never exceeds the MILP and equals it when blocks are equal.

Only the first stage (present CPUs) is modelled: possible-but-absent CPUs
cannot take interrupts.

>>> from numalab.topology import load
>>> t = load("numa:2 cluster:24 core:2 pu:1")
>>> bound_closed_form(t, 62, 6), bound_milp(t, 62, 6).value
(2, 2)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...kernel.lib.group_cpus import group_cpus_evenly, prepare
from ...topology.model import Topology

__all__ = ["cached_view", "NodePlan", "node_plans", "min_dedicated_one_device", "bound_closed_form",
           "Bound", "bound_milp", "optimal_groups"]


def _bits(mask: int):
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


# id(topo) -> (topo, view). Holding the Topology keeps its id from being
# reused while cached; small and bounded (sweeps reuse a few machines).
_VIEWS: dict[int, tuple] = {}
_PLANS: dict[tuple, list] = {}


def cached_view(topo):
    """``prepare(topo)``, computed once per Topology object (a CpuTopo is
    returned as is). Sweeps call it for every configuration."""
    if not isinstance(topo, Topology):
        return topo
    hit = _VIEWS.get(id(topo))
    if hit is not None and hit[0] is topo:
        return hit[1]
    if len(_VIEWS) > 128:
        _VIEWS.clear()
        _PLANS.clear()
    view = prepare(topo)
    _VIEWS[id(topo)] = (topo, view)
    return view


@dataclass(frozen=True)
class NodePlan:
    """What the kernel fixes for one node: its present CPUs, its group count
    ``groups`` (per device), the blocks groups must stay inside (clusters on
    the cluster path, else the whole node) and whether that was the cluster
    path. ``forced`` is True when there is no freedom at all (``numgrps <=
    nodes``: each group is a whole node)."""

    node: int
    cpus: int
    groups: int
    blocks: tuple[int, ...]
    cluster_path: bool
    forced: bool = False


def node_plans(topo: Topology, vectors: int) -> list[NodePlan]:
    """The per-node constraints of one ``group_cpus_evenly(vectors)`` call.

    The group count of a node is read from the mainline result (groups whose
    present CPUs lie in that node), so it is exactly ``alloc_nodes_groups()``'s.
    The cluster path is taken, as in ``alloc_cluster_groups()``, when the
    node's present CPUs fall in at most ``groups`` clusters.

    >>> from numalab.topology import load
    >>> [(p.node, p.groups, len(p.blocks)) for p in node_plans(load("numa:2 cluster:24 core:2 pu:1"), 62)]
    [(0, 31, 24), (1, 31, 24)]
    """
    view = cached_view(topo)
    key = (id(view), vectors)
    if key in _PLANS:
        return _PLANS[key]
    present = view.present
    node_cpus: dict[int, int] = {}
    for c in _bits(present):
        node_cpus[view.cpu_to_node[c]] = node_cpus.get(view.cpu_to_node[c], 0) | (1 << c)
    masks = group_cpus_evenly(vectors, view) or []
    forced = vectors <= len(node_cpus)
    plans = []
    for n in sorted(node_cpus):
        ncpu = node_cpus[n]
        g = sum(1 for m in masks if m & present and (m & present) & ~ncpu == 0)
        blocks: list[int] = []
        msk = ncpu
        while msk:
            cpu = (msk & -msk).bit_length() - 1
            cl = (view.cluster[cpu] or (1 << cpu)) & ncpu
            blocks.append(cl)
            msk &= ~cl
        cluster_path = 0 < len(blocks) <= g and not forced
        if not cluster_path:
            blocks = [ncpu]
        plans.append(NodePlan(n, ncpu, g, tuple(blocks), cluster_path, forced))
    _PLANS[key] = plans
    return plans


def min_dedicated_one_device(sizes: list[int], groups: int) -> int:
    """Fewest one-CPU groups one device can have when ``groups`` groups are
    split over blocks of ``sizes`` CPUs (each block at least one group).

    Greedy on the convex cost ``max(0, 2k - n)``: one group per block first,
    then groups that cost nothing (up to ``n // 2`` per block), then the
    middle group of odd blocks (cost 1), then the rest (cost 2 each).

    >>> min_dedicated_one_device([2] * 24, 31)
    14
    >>> min_dedicated_one_device([3, 1], 3)
    2
    """
    if groups > sum(sizes):
        raise ValueError("more groups than CPUs")
    ded = sum(1 for n in sizes if n == 1)
    left = groups - len(sizes)
    if left < 0:
        raise ValueError("fewer groups than blocks: the cluster path is not taken")
    free = sum(max(0, n // 2 - 1) for n in sizes)
    take = min(left, free)
    left -= take
    odd = sum(1 for n in sizes if n % 2 == 1 and n > 1)
    take = min(left, odd)
    ded += take
    left -= take
    return ded + 2 * left


def _forced_max(topo: Topology, vectors: int, devices: int) -> int:
    view = cached_view(topo)
    masks = group_cpus_evenly(vectors, view) or []
    present = view.present
    return devices if any((m & present).bit_count() == 1 for m in masks) else 0


def bound_closed_form(topo: Topology, vectors: int, devices: int) -> int:
    """``max over nodes of ceil(D * E_n / N_n)`` (``D`` if a block has one CPU).

    A quick lower bound: every device has at least ``E_n`` dedicated groups
    in node ``n`` (:func:`min_dedicated_one_device`), and they fall on the
    node's ``N_n`` CPUs.
    """
    plans = node_plans(topo, vectors)
    if any(p.forced for p in plans):
        return _forced_max(topo, vectors, devices)
    best = 0
    for p in plans:
        sizes = [b.bit_count() for b in p.blocks]
        e = min_dedicated_one_device(sizes, p.groups)
        lb = math.ceil(devices * e / p.cpus.bit_count())
        if 1 in sizes:
            lb = max(lb, devices)
        best = max(best, lb)
    return best


@dataclass
class Bound:
    """Result of :func:`bound_milp`: the optimum ``value`` (max dedicated per
    CPU), and for each node the solver's per-device group counts
    ``counts[node][d][b]`` (block order of :class:`NodePlan`)."""

    value: int
    plans: list[NodePlan]
    counts: dict[int, list[list[int]]] = field(default_factory=dict)


def _solve_node(p: NodePlan, devices: int) -> tuple[int, list[list[int]]]:
    from scipy.optimize import Bounds, LinearConstraint, milp

    sizes = [b.bit_count() for b in p.blocks]
    nb = len(sizes)
    nk = devices * nb
    # variables: k[d][b] (nk), s[d][b] (nk), L (1)
    nv = 2 * nk + 1
    c = np.zeros(nv)
    c[-1] = 1.0
    rows, lo, hi = [], [], []

    def row():
        return np.zeros(nv)

    for d in range(devices):
        r = row()
        r[d * nb:(d + 1) * nb] = 1
        rows.append(r); lo.append(p.groups); hi.append(p.groups)
        for b in range(nb):
            r = row()                      # s - 2k >= -n
            r[nk + d * nb + b] = 1
            r[d * nb + b] = -2
            rows.append(r); lo.append(-sizes[b]); hi.append(np.inf)
    for b in range(nb):
        r = row()                          # sum_d s - n L <= 0
        for d in range(devices):
            r[nk + d * nb + b] = 1
        r[-1] = -sizes[b]
        rows.append(r); lo.append(-np.inf); hi.append(0)
    lb = np.concatenate([np.ones(nk), np.zeros(nk), [0]])
    ub = np.concatenate([np.tile(sizes, devices), np.tile(sizes, devices), [devices]])
    integrality = np.concatenate([np.ones(nk), np.zeros(nk), [1]])
    res = milp(c, constraints=LinearConstraint(np.array(rows), lo, hi),
               bounds=Bounds(lb, ub), integrality=integrality)
    if res.status != 0:
        raise RuntimeError(f"MILP for node {p.node} failed: {res.message}")
    x = res.x
    counts = [[int(round(x[d * nb + b])) for b in range(nb)] for d in range(devices)]
    return int(round(x[-1])), counts


def bound_milp(topo: Topology, vectors: int, devices: int) -> Bound:
    """The exact optimum ``L*`` of the problem in the module docstring.

    >>> from numalab.topology import load
    >>> bound_milp(load("numa:1 cluster:4 core:3 pu:1"), 9, 4).value   # 9 groups on 4 clusters of 3
    2
    """
    plans = node_plans(topo, vectors)
    if any(p.forced for p in plans) or devices == 0:
        return Bound(_forced_max(topo, vectors, devices) if devices else 0, plans)
    out = Bound(0, plans)
    for p in plans:
        v, counts = _solve_node(p, devices)
        out.value = max(out.value, v)
        out.counts[p.node] = counts
    return out


def _split(cpus: list[int], k: int, singles: list[int]) -> list[int]:
    """``k`` masks over ``cpus``: the CPUs of ``singles`` alone, the rest in
    ``k - len(singles)`` groups of balanced sizes (consecutive CPUs)."""
    out = [1 << c for c in singles]
    rest = [c for c in cpus if c not in singles]
    m = k - len(singles)
    if m:
        q, r = divmod(len(rest), m)
        i = 0
        for j in range(m):
            n = q + (1 if j < r else 0)
            mask = 0
            for c in rest[i:i + n]:
                mask |= 1 << c
            out.append(mask)
            i += n
    return out


def optimal_groups(topo: Topology, vectors: int, devices: int) -> list[list[int]]:
    """Group masks for every device that reach :func:`bound_milp`'s value.

    Built from the solver's counts: in each block, device after device, the
    ``max(0, 2k - n)`` one-CPU groups are laid round robin from where the
    previous device stopped (so every CPU of the block ends with ``floor``
    or ``ceil`` of the block's average), the other CPUs are split into the
    remaining groups. Returns one list of masks per device (order of groups:
    node by node, block by block -- not the kernel's group order).
    """
    b = bound_milp(topo, vectors, devices)
    if any(p.forced for p in b.plans):
        masks = list(group_cpus_evenly(vectors, topo) or [])
        return [masks[:] for _ in range(devices)]
    out: list[list[int]] = [[] for _ in range(devices)]
    for p in b.plans:
        counts = b.counts[p.node]
        for bi, block in enumerate(p.blocks):
            cpus = list(_bits(block))
            n = len(cpus)
            ptr = 0
            for d in range(devices):
                k = counts[d][bi]
                s = max(0, 2 * k - n) if k < n else n
                singles = [cpus[(ptr + j) % n] for j in range(s)]
                ptr = (ptr + s) % n
                out[d].extend(_split(cpus, k, singles))
    return out
