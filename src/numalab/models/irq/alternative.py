"""Two placements of our own, to set beside mainline and the rotate patch.

Both keep everything the kernel decides before the extra groups are placed:
the per-node group counts of ``alloc_nodes_groups()``, the cluster path
(groups stay inside a cluster where the kernel keeps them there), and the
number of groups above the smallest per-cluster count ("extras"). They
change only *where* the extras and the one-CPU groups go.

``block`` -- stateless, like the patch (it reads the same per-caller
``spread_offset``). The patch walks the clusters with a stride of
``ncluster // extras`` from ``offset % ncluster``; callers whose offsets
differ by a multiple of the stride pick from the same residue class and
pile up again. ``block`` instead gives caller ``o`` the *contiguous* run of
clusters starting at ``(o * extras) % ncluster`` (clusters where an extra
group costs no one-CPU group come first): consecutive callers tile the ring
of clusters, each cluster is hit ``floor`` or ``ceil`` of
``D * extras / ncluster`` times, and offsets stepping by ``k`` per device
still spread as long as ``gcd(k * extras, ncluster)`` stays below
``extras``. Inside a cluster, the one-CPU groups start at a CPU that moves
by the number of one-CPU groups times the offset, so they tile the
cluster's CPUs too.

``balance`` -- stateful: a :class:`Balancer` keeps, per CPU, how many
dedicated vectors it already carries (the x86 vector matrix already keeps a
per-CPU count of managed vectors, ``irq_matrix``'s ``managed``, so the
kernel has such a table). Each extra group goes to the cluster where the
busiest CPU it would add a one-CPU group to is least busy, and one-CPU
groups go to the least-loaded CPUs of their cluster. It needs no offset,
so other callers of ``group_cpus_evenly()`` in between (a second set of
queues, another driver) cannot undo it.

Neither is a kernel patch: they are yardsticks, evaluated with the same
metrics (:mod:`numalab.models.irq.load`) as mainline and rotate.

>>> from numalab.topology import load
>>> from numalab.models.irq.load import irq_load
>>> t = load("numa:2 cluster:24 core:2 pu:1")
>>> devs = block_devices(t, 62, 6)
>>> max(irq_load(devs, t.possible).dedicated)
2
"""

from __future__ import annotations

from ...kernel.lib.group_cpus import group_cpus_evenly
from ...topology.model import Topology
from ...cpumask import cpus as _cpus
from .bound import NodePlan, _split, cached_view, node_plans

__all__ = ["kernel_block_counts", "split_block", "block_groups", "block_devices",
           "Balancer", "balance_devices"]


_COUNTS: dict[tuple, list] = {}


def kernel_block_counts(topo: Topology, vectors: int) -> list[tuple[NodePlan, list[int]]]:
    """For every node, its :class:`NodePlan` and the mainline number of
    groups in each of its blocks (same order as ``plan.blocks``).

    >>> from numalab.topology import load
    >>> plan, counts = kernel_block_counts(load("numa:1 cluster:4 core:2 pu:1"), 6)[0]
    >>> counts
    [2, 1, 2, 1]
    """
    view = cached_view(topo)
    key = (id(view), vectors)
    if key in _COUNTS:
        return [(p, c[:]) for p, c in _COUNTS[key]]
    masks = group_cpus_evenly(vectors, view) or []
    present = view.present
    plans = node_plans(topo, vectors)
    where: dict[int, tuple[int, int]] = {}      # CPU -> (plan index, block index)
    for pi, p in enumerate(plans):
        for bi, b in enumerate(p.blocks):
            for c in _cpus(b):
                where[c] = (pi, bi)
    counts = [[0] * len(p.blocks) for p in plans]
    for m in masks:
        m &= present
        if not m:
            continue
        pi, bi = where[(m & -m).bit_length() - 1]
        if m & ~plans[pi].blocks[bi] == 0:      # a group crossing blocks counts nowhere
            counts[pi][bi] += 1
    out = list(zip(plans, counts))
    if len(_COUNTS) > 512:
        _COUNTS.clear()
    _COUNTS[key] = out
    return [(p, c[:]) for p, c in out]


def split_block(cpus: list[int], k: int, first: int, siblings=None) -> list[int]:
    """Split ``cpus`` (ascending) into ``k`` groups of balanced sizes whose
    one-CPU groups start at position ``first`` (mod ``len(cpus)``).

    The ``max(0, 2k - n)`` one-CPU groups take consecutive CPUs from
    ``first``; the others take the remaining CPUs in order, two or more per
    group (SMT siblings stay next to each other when ``siblings`` orders
    them so).

    >>> [bin(m) for m in split_block([0, 1, 2, 3], 3, 1)]
    ['0b10', '0b100', '0b1001']
    """
    n = len(cpus)
    if not 1 <= k <= n:
        raise ValueError(f"cannot split {n} CPUs into {k} groups")
    s = n if k == n else max(0, 2 * k - n)
    singles = [cpus[(first + j) % n] for j in range(s)]
    rest = cpus
    if siblings is not None:
        rest = sorted(cpus, key=lambda c: (((siblings[c] or 1 << c) & -(siblings[c] or 1 << c)), c))
    return _split(rest, k, singles)


def _ded(k: int, n: int) -> int:
    """One-CPU groups when ``k`` groups split ``n`` CPUs evenly."""
    return n if k >= n else max(0, 2 * k - n)


def _place_extras(counts: list[int], sizes: list[int], order: list[int]) -> list[int]:
    """Reset every block to the smallest count, then add the extras back one
    at a time: to the block where one more group adds the fewest one-CPU
    groups, then the one that got the fewest extras so far, then the first
    along ``order``. (Unlike the patch, a large cluster with room for
    shared groups is preferred to a small one where the group would be
    dedicated.)"""
    low = min(counts)
    extras = sum(c - low for c in counts)
    new = [low] * len(counts)
    pos = {b: i for i, b in enumerate(order)}
    for _ in range(extras):
        cand = [b for b in order if new[b] < sizes[b]]
        if not cand:
            raise ValueError("extras do not fit the blocks")
        b = min(cand, key=lambda b: (_ded(new[b] + 1, sizes[b]) - _ded(new[b], sizes[b]),
                                     new[b] - low, pos[b]))
        new[b] += 1
    return new


def block_groups(topo: Topology, vectors: int, spread_offset: int = 0) -> list[int]:
    """One caller's masks under the ``block`` rule (see the module docstring).

    >>> from numalab.topology import load
    >>> t = load("numa:1 cluster:4 core:2 pu:1")
    >>> [bin(m) for m in block_groups(t, 5, 0)], [bin(m) for m in block_groups(t, 5, 1)]
    (['0b1', '0b10', '0b1100', '0b110000', '0b11000000'], ['0b11', '0b100', '0b1000', '0b110000', '0b11000000'])
    """
    view = cached_view(topo)
    out: list[int] = []
    for p, counts in kernel_block_counts(topo, vectors):
        if p.forced:
            return list(group_cpus_evenly(vectors, view) or [])
        sizes = [b.bit_count() for b in p.blocks]
        nb = len(sizes)
        if nb > 1:
            extras = sum(c - min(counts) for c in counts)
            start = (spread_offset * extras) % nb
            counts = _place_extras(counts, sizes, [(start + j) % nb for j in range(nb)])
        for b, k in zip(p.blocks, counts):
            cpus = _cpus(b)
            n = len(cpus)
            s = max(0, 2 * k - n)
            out.extend(split_block(cpus, k, (spread_offset * max(s, 1)) % n, view.sibling))
    return out


def block_devices(topo: Topology, vectors: int, devices: int,
                  offsets: list[int] | None = None) -> list[list[int]]:
    """Masks of ``devices`` callers under ``block``; caller ``d`` gets
    ``offsets[d]`` (default ``d``, as the patch's counter would give)."""
    offsets = list(range(devices)) if offsets is None else offsets
    return [block_groups(topo, vectors, o) for o in offsets[:devices]]


class Balancer:
    """The ``balance`` rule: remembers the dedicated vectors per CPU.

    >>> from numalab.topology import load
    >>> b = Balancer(load("numa:1 cluster:2 core:2 pu:1"))
    >>> [bin(m) for m in b.groups(3)], [bin(m) for m in b.groups(3)]
    (['0b1', '0b10', '0b1100'], ['0b11', '0b100', '0b1000'])
    """

    def __init__(self, topo: Topology):
        self.topo = topo
        self.view = cached_view(topo)
        self.load: dict[int, int] = {}

    def _cluster_cost(self, cpus: list[int], k: int) -> tuple[int, int]:
        """(max, sum) of the loads of the CPUs that would get one-CPU
        groups if the block had ``k`` groups (the least-loaded ones)."""
        n = len(cpus)
        s = n if k == n else max(0, 2 * k - n)
        loads = sorted(self.load.get(c, 0) + 1 for c in cpus)[:s]
        return (max(loads) if loads else 0, sum(loads))

    def groups(self, vectors: int) -> list[int]:
        """Masks for one more caller asking for ``vectors`` groups."""
        out: list[int] = []
        for p, counts in kernel_block_counts(self.topo, vectors):
            if p.forced:
                return list(group_cpus_evenly(vectors, self.view) or [])
            blocks = [_cpus(b) for b in p.blocks]
            sizes = [len(c) for c in blocks]
            low = min(counts)
            extras = sum(c - low for c in counts)
            new = [low] * len(counts)
            for _ in range(extras):
                cand = [b for b in range(len(new)) if new[b] < sizes[b]]
                if not cand:
                    raise ValueError("extras do not fit the blocks")
                # the cluster whose would-be dedicated CPUs are least busy
                best = min(cand, key=lambda b: (self._cluster_cost(blocks[b], new[b] + 1),
                                                b))
                new[best] += 1
            for cpus, k in zip(blocks, new):
                n = len(cpus)
                s = n if k == n else max(0, 2 * k - n)
                singles = sorted(cpus, key=lambda c: (self.load.get(c, 0), c))[:s]
                for c in singles:
                    self.load[c] = self.load.get(c, 0) + 1
                rest = [c for c in cpus if c not in singles]
                out.extend(1 << c for c in singles)
                if k - s:
                    out.extend(split_block(rest, k - s, 0, self.view.sibling))
        return out


def balance_devices(topo: Topology, vectors: int, devices: int) -> list[list[int]]:
    """Masks of ``devices`` successive callers under ``balance``, from an
    empty table."""
    b = Balancer(topo)
    return [b.groups(vectors) for _ in range(devices)]
