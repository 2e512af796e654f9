"""``group_cpus_evenly()`` (``lib/group_cpus.c``) of Linux 6.1, 6.12 and 7.2, and the seed patch's "rotate" variant.

``group_cpus_evenly(numgrps)`` splits every possible CPU into ``numgrps``
groups that respect NUMA nodes, CPU clusters and SMT siblings. blk-mq uses it
to map hardware queues to CPUs and the managed-IRQ code
(``irq_create_affinity_masks()``) to choose the affinity of each MSI-X
vector, so the groups decide which CPUs take which device interrupts.

Which kernel text this is
-------------------------
Every call models one kernel version (``kernel=``, default the newest
modelled one, 7.2; see :mod:`numalab.kernel.versions`), read from Debian's
``linux-source-6.1`` (6.1.192), ``linux-source-6.12`` (6.12.117) and
``linux-source-7.2`` (7.2.13) packages:

* 7.2: cluster aware (89802ca36c96, "lib/group_cpus: make group CPU
  cluster aware", first released in 7.0: ``alloc_groups_to_nodes()``,
  ``assign_cpus_to_groups()``, ``alloc_cluster_groups()``,
  ``__try_group_cluster_cpus()``), the ``*nummasks`` out-parameter, and
  ``lib/sort.c``'s double-pop heapsort;
* 6.12: no cluster path (``alloc_nodes_groups()`` sorts and shares the
  groups itself, ``__group_cpus_evenly()`` spreads each node's CPUs
  inline: the same steps as 7.2's ``alloc_groups_to_nodes()`` and
  ``assign_cpus_to_groups()``), no ``nummasks`` but a final
  ``WARN_ON(nr_present + nr_others < numgrps)``, the double-pop heapsort;
* 6.1 (Debian's backport of ``lib/group_cpus.c``): 6.12's text without the
  ``numgrps == 0`` check, with 6.1's single-pop heapsort.

The three texts sort equal node and cluster sizes into different orders
(the heapsort is unstable), so machines with equal-sized nodes or clusters
get different masks from each kernel. The project's first port followed a
stored ``torvalds/linux`` copy at 136114e0abf0 (the merge that brought the
cluster path) with an older stored ``lib/sort.c`` (072cf06e35eb): that
pairing is in no released kernel. The seed patch ("lib/group_cpus: rotate
extra groups to avoid IRQ stacking", Naman Jain and Long Li) patches the
cluster path, so ``variant="rotate"`` exists only for kernels that have it;
it applies to 7.2's text with ``patch -p1`` without offset or fuzz.

The port keeps the kernel's function names and order so the two can be read
side by side. Differences that are only about representation:

* masks are ints (bit i = CPU i), so functions that modify a ``struct
  cpumask *`` in place return the new value instead;
* ``masks`` is a list of ints the callee updates in place, ``*curgrp`` is
  returned by the function that advances it;
* ``struct node_groups`` is a two-item list ``[id, ncpus_or_ngroups]``: one
  slot, like the kernel's union;
* unsigned 32-bit arithmetic is emulated where it can wrap
  (``ncpus_cmp_func()``, ``numgrps * ncpus``, ``v + spread_offset``);
* ``WARN_ON_ONCE()`` and ``WARN_ON()`` increment a counter returned with
  the result;
* allocation failures (``-ENOMEM``) cannot happen.

Machine facts come from a :class:`~numalab.topology.model.Topology`, see
:func:`prepare`. What depends only on the machine is computed once and
cached: the node of each CPU, the sibling and cluster masks, and
``build_node_to_cpumask()``'s result. Every call then runs the rest of the
algorithm. Two shortcuts give the same results as the kernel's steps and are
checked against them by the tests: the heapsort's permutation is cached per
tuple of keys and heapsort (``USE_SORT_CACHE``), and
``alloc_cluster_groups()`` keeps the cluster masks found by its probing walk
instead of walking the same CPUs a second time.

>>> from numalab.topology import load
>>> t = load("numa:2 core:4 pu:2")
>>> [hex(m) for m in group_cpus_evenly(4, t, kernel="6.1")]   # node 1 first
['0xf00', '0xf000', '0xf', '0xf0']
>>> [hex(m) for m in group_cpus_evenly(6, t, kernel="7.2")]   # 8-10, 11-13, 14-15, 0-2, 3-5, 6-7
['0x700', '0x3800', '0xc000', '0x7', '0x38', '0xc0']
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Iterator
from dataclasses import dataclass

from ...topology.model import Topology
from .. import versions
from .sort import cmp_uint_sub, sort, sort_order_uint_sub

__all__ = [
    "UINT_MAX", "VARIANTS", "CpuTopo", "GroupMasks", "ZeroGroupsError", "prepare",
    "grp_spread_init_one", "build_node_to_cpumask", "get_nodes_in_cpumask",
    "ncpus_cmp_func", "alloc_groups_to_nodes", "alloc_nodes_groups",
    "assign_cpus_to_groups", "alloc_cluster_groups", "__try_group_cluster_cpus",
    "__group_cpus_evenly", "group_cpus_evenly", "spread_devices",
]

UINT_MAX = 0xFFFFFFFF
_U32 = 0xFFFFFFFF          # masks a sum to 32 bits: C's unsigned int wrap
VARIANTS = ("mainline", "rotate")

# alloc_groups_to_nodes() sorts with the modelled kernel's heapsort; with this
# set it reuses the permutation computed by the same heapsort for the same keys
# (lib/sort.py: sort_order_uint_sub). Tests turn it off to check both agree,
# for every modelled kernel.
USE_SORT_CACHE = True


# --------------------------------------------------------------------------
# The machine as group_cpus.c sees it
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class CpuTopo:
    """The kernel globals and topology helpers ``group_cpus.c`` reads.

    * ``nr_cpu_ids`` / ``nr_node_ids``: one past the highest CPU / node id.
    * ``possible`` / ``present``: ``cpu_possible_mask`` / ``cpu_present_mask``.
    * ``node_possible``: the node ids ``for_each_node()`` visits, ascending.
    * ``cpu_to_node``: node of every possible CPU (tuple indexed by CPU id,
      -1 for impossible ids).
    * ``sibling`` / ``cluster``: ``topology_sibling_cpumask(cpu)`` and
      ``topology_cluster_cpumask(cpu)`` as tuples indexed by CPU id.
    * ``node_to_cpumask``: what :func:`build_node_to_cpumask` returns for
      this machine, computed once by :func:`prepare` (it depends only on
      the tables above, and rebuilding it dominated calls on 4,096 CPUs).
    """

    nr_cpu_ids: int
    nr_node_ids: int
    possible: int
    present: int
    node_possible: tuple[int, ...]
    cpu_to_node: tuple[int, ...]
    sibling: tuple[int, ...]
    cluster: tuple[int, ...]
    node_to_cpumask: tuple[int, ...] = ()


def _bits(mask: int) -> Iterator[int]:
    """Set bits of ``mask``, lowest first (``for_each_cpu``)."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def prepare(topo: Topology, nonpresent: str = "auto") -> CpuTopo:
    """Build the :class:`CpuTopo` view of a Topology.

    Inputs: the topology; ``nonpresent`` says what the sibling and cluster
    masks of possible-but-not-present CPUs (those absent from
    ``topo.cpus``) are:

    * ``"empty"`` -- x86: ``smp_prepare_cpus_common()`` allocates
      ``cpu_sibling_map`` and ``cpu_l2c_shared_map`` zeroed for every
      possible CPU and only ``set_cpu_sibling_map()`` at bring-up fills
      them, so a CPU that never came up has empty masks (and an empty
      cluster mask sends ``alloc_cluster_groups()`` to ``no_cluster``);
    * ``"self"`` -- ``drivers/base/arch_topology.c`` (arm64, riscv, ...):
      ``reset_cpu_topology()`` runs ``clear_cpu_topology()`` on every
      possible CPU, leaving each mask holding the CPU alone;
    * ``"auto"`` (default) -- ``"empty"`` when ``topo.arch == "x86"``,
      else ``"self"``.

    Other choices, documented because the kernel always has an answer:

    * a present CPU's masks are ``thread_siblings`` / ``cluster_cpus`` from
      the topology, with the CPU itself added (an online CPU is always in
      its own masks; 0 in a dump means "unknown" and becomes the CPU alone);
      bits at or above ``nr_cpu_ids`` are dropped (``cpumask_next()`` never
      returns them);
    * the node of a possible CPU is the node whose ``cpus`` holds it, else
      ``topo.cpus[cpu].node``, else the lowest node id (a CPU with no NUMA
      information lands on the first node: arch_numa's
      ``early_map_cpu_to_node()`` falls back to node 0, x86's
      ``numa_init_array()`` started its round robin at the first node);
    * ``for_each_node()`` visits every node of ``topo.nodes`` and every node
      a CPU names; a topology without nodes is one node 0.

    >>> from numalab.topology import load
    >>> v = prepare(load("numa:2 core:2 pu:2"))
    >>> v.nr_cpu_ids, v.node_possible, [hex(m) for m in v.sibling]
    (8, (0, 1), ['0x3', '0x3', '0xc', '0xc', '0x30', '0x30', '0xc0', '0xc0'])
    """
    if nonpresent == "auto":
        nonpresent = "empty" if topo.arch == "x86" else "self"
    if nonpresent not in ("empty", "self"):
        raise ValueError(f"nonpresent must be 'auto', 'empty' or 'self', not {nonpresent!r}")
    possible = topo.possible
    nr_cpu_ids = possible.bit_length()
    limit = (1 << nr_cpu_ids) - 1
    node_ids = sorted(topo.nodes)
    of_cpu: dict[int, int] = {}
    for n in node_ids:
        for c in _bits(topo.nodes[n].cpus & limit):
            of_cpu.setdefault(c, n)
    default_node = node_ids[0] if node_ids else 0
    cpu_to_node = [-1] * nr_cpu_ids
    sibling = [0] * nr_cpu_ids
    cluster = [0] * nr_cpu_ids
    for c in _bits(possible):
        rec = topo.cpus.get(c)
        node = of_cpu.get(c)
        if node is None:
            node = rec.node if rec is not None and rec.node >= 0 else default_node
        cpu_to_node[c] = node
        me = 1 << c
        if rec is not None:
            sibling[c] = ((rec.thread_siblings or me) | me) & limit
            cluster[c] = ((rec.cluster_cpus or me) | me) & limit
        elif nonpresent == "self":
            sibling[c] = cluster[c] = me
    nodes = set(node_ids) | {n for n in cpu_to_node if n >= 0}
    if not nodes:
        nodes = {0}
    view = CpuTopo(nr_cpu_ids=nr_cpu_ids, nr_node_ids=max(nodes) + 1,
                   possible=possible, present=topo.present & possible,
                   node_possible=tuple(sorted(nodes)), cpu_to_node=tuple(cpu_to_node),
                   sibling=tuple(sibling), cluster=tuple(cluster))
    return dataclasses.replace(view, node_to_cpumask=tuple(build_node_to_cpumask(view)))


# id(topo) -> (weak reference, signature, view). A Topology is a mutable,
# unhashable dataclass, so the cache checks that the object is still alive
# and that its CPU masks and tables are the same objects as when cached.
_CACHE: dict[int, tuple[weakref.ref, tuple, CpuTopo]] = {}


def _view(topo: Topology | CpuTopo) -> CpuTopo:
    if isinstance(topo, CpuTopo):
        return topo
    sig = (topo.possible, topo.present, topo.arch, id(topo.cpus), len(topo.cpus),
           id(topo.nodes), len(topo.nodes))
    hit = _CACHE.get(id(topo))
    if hit is not None and hit[0]() is topo and hit[1] == sig:
        return hit[2]
    view = prepare(topo)
    if len(_CACHE) > 64:
        for k in [k for k, v in _CACHE.items() if v[0]() is None] or list(_CACHE)[:32]:
            del _CACHE[k]
    _CACHE[id(topo)] = (weakref.ref(topo), sig, view)
    return view


class GroupMasks(list):
    """The ``numgrps`` masks of one call (a list of ints), plus:

    * ``nummasks``: the kernel's ``*nummasks`` (how many masks were
      initialised) for kernels that have it (7.2); for kernels without it
      (6.1, 6.12) ``numgrps``, which is what their callers use
      (``irq_create_affinity_masks()`` counts ``this_vecs`` masks,
      ``blk_mq_map_queues()`` reads ``masks[queue]`` for every queue);
    * ``warnings``: how many ``WARN_ON_ONCE()`` / ``WARN_ON()`` conditions held;
    * ``kernel``: the modelled kernel version.
    """

    nummasks: int = 0
    warnings: int = 0
    kernel: str = versions.NEWEST


class _Ctx:
    """Per-call state: the machine, the kernel text, the variant, the
    rotation offset, warnings."""

    __slots__ = ("t", "rotate", "spread_offset", "warnings", "heapsort", "cluster", "kernel")

    def __init__(self, t: CpuTopo, rotate: bool, spread_offset: int,
                 text: versions.KernelText | None = None):
        text = text or versions.text(None)
        self.t = t
        self.rotate = rotate
        self.spread_offset = spread_offset & _U32
        self.warnings = 0
        self.heapsort = text.heapsort
        self.cluster = text.cluster_path
        self.kernel = text.version


# --------------------------------------------------------------------------
# lib/group_cpus.c, function by function
# --------------------------------------------------------------------------

def grp_spread_init_one(irqmsk: int, nmsk: int, cpus_per_grp: int,
                        t: CpuTopo) -> tuple[int, int]:
    """Move ``cpus_per_grp`` CPUs from ``nmsk`` to ``irqmsk``, SMT siblings first.

    Takes the lowest CPU of ``nmsk``, then as many of its siblings still in
    ``nmsk`` as fit (lowest first), and repeats. Returns ``(irqmsk, nmsk)``.

    >>> t = CpuTopo(4, 1, 0xf, 0xf, (0,), (0, 0, 0, 0), (5, 2, 5, 8), (15,) * 4)
    >>> [hex(m) for m in grp_spread_init_one(0, 0xf, 2, t)]   # 0 then its sibling 2
    ['0x5', '0xa']
    """
    sibling = t.sibling
    while cpus_per_grp > 0:
        if not nmsk:            # cpumask_first() >= nr_cpu_ids: "should not happen"
            return irqmsk, nmsk
        low = nmsk & -nmsk
        nmsk ^= low
        irqmsk |= low
        cpus_per_grp -= 1

        # If the cpu has siblings, use them first: cpumask_next() walks the
        # sibling mask upwards and only siblings still in nmsk count, so this
        # takes the lowest cpus_per_grp bits of (siblings & nmsk).
        avail = sibling[low.bit_length() - 1] & nmsk
        while cpus_per_grp > 0 and avail:
            s = avail & -avail
            avail ^= s
            nmsk ^= s
            irqmsk |= s
            cpus_per_grp -= 1
    return irqmsk, nmsk


def build_node_to_cpumask(t: CpuTopo) -> list[int]:
    """``node_to_cpumask[node]``: the possible CPUs of each node id < nr_node_ids."""
    masks = [0] * t.nr_node_ids
    c2n = t.cpu_to_node
    for cpu in _bits(t.possible):
        masks[c2n[cpu]] |= 1 << cpu
    return masks


def get_nodes_in_cpumask(node_to_cpumask: list[int], mask: int,
                         t: CpuTopo) -> tuple[int, list[int]]:
    """Nodes (in ``for_each_node()`` order) whose CPUs meet ``mask``.

    Returns ``(nodes, nodemsk)`` with ``nodemsk`` as a sorted list of node ids.
    """
    nodemsk = [n for n in t.node_possible if mask & node_to_cpumask[n]]
    return len(nodemsk), nodemsk


def ncpus_cmp_func(ln: list[int], rn: list[int]) -> int:
    """``return ln->ncpus - rn->ncpus;`` with the kernel's unsigned wrap-around."""
    return cmp_uint_sub(ln[1], rn[1])


def alloc_groups_to_nodes(numgrps: int, numcpus: int, node_groups: list[list[int]],
                          num_nodes: int, ctx: _Ctx) -> None:
    """Share ``numgrps`` among the entries of ``node_groups`` by CPU count.

    7.2's function; 6.1 and 6.12 do the same steps inside
    ``alloc_nodes_groups()``. Sorts ``node_groups`` by ``ncpus`` with the
    modelled kernel's heapsort (so equal counts come out in that kernel's
    order), then walks from the smallest:
    each entry gets ``max(1, numgrps * ncpus / remaining_ncpus)`` groups.
    Entries holding ``UINT_MAX`` are unused and skipped. Rewrites each used
    entry's ``ncpus`` slot with its group count (the kernel's union).
    """
    remaining_ncpus = numcpus
    if USE_SORT_CACHE:
        # Same permutation as the line below, computed once per key tuple.
        order = sort_order_uint_sub(tuple([ng[1] for ng in node_groups]), ctx.heapsort)
        node_groups[:] = [node_groups[i] for i in order]
    else:
        sort(node_groups, ncpus_cmp_func, kernel=ctx.kernel)
    for n in range(num_nodes):
        ng = node_groups[n]
        if ng[1] == UINT_MAX:
            continue
        if numgrps == 0:                    # WARN_ON_ONCE
            ctx.warnings += 1
        ncpus = ng[1]
        ngroups = ((numgrps * ncpus) & _U32) // remaining_ncpus or 1   # max_t(unsigned, 1, ...)
        if ngroups > ncpus:                 # WARN_ON_ONCE
            ctx.warnings += 1
        ng[1] = ngroups
        remaining_ncpus -= ncpus
        numgrps = (numgrps - ngroups) & _U32


def alloc_nodes_groups(numgrps: int, node_to_cpumask: list[int], cpu_mask: int,
                       nodemsk: list[int], ctx: _Ctx) -> list[list[int]]:
    """One ``[node id, ngroups]`` entry per node id (``UINT_MAX`` when unused).

    Each node with CPUs in ``cpu_mask`` gets at least one group and at most
    as many as it has such CPUs; the total is ``min(numgrps, CPUs)``.
    """
    node_groups = [[n, UINT_MAX] for n in range(ctx.t.nr_node_ids)]
    numcpus = 0
    for n in nodemsk:
        ncpus = (cpu_mask & node_to_cpumask[n]).bit_count()
        if not ncpus:
            continue
        numcpus += ncpus
        node_groups[n][1] = ncpus
    numgrps = min(numcpus, numgrps)
    alloc_groups_to_nodes(numgrps, numcpus, node_groups, ctx.t.nr_node_ids, ctx)
    return node_groups


def assign_cpus_to_groups(ncpus: int, nmsk: int, nv: list[int], masks: list[int],
                          curgrp: int, last_grp: int, ctx: _Ctx) -> int:
    """Spread ``nmsk``'s ``ncpus`` CPUs over ``nv``'s ``ngroups`` groups.

    7.2's function; 6.1 and 6.12 run the same loop inline in
    ``__group_cpus_evenly()``. Groups get ``ncpus // ngroups`` CPUs; ``ncpus % ngroups`` of them get one
    more. Mainline gives the extra CPU to the first groups; the rotate
    variant to the groups with ``(v + spread_offset) % ngroups < extra``.
    ``curgrp`` wraps to 0 at ``last_grp``. Returns the new ``curgrp``.
    """
    ngroups = nv[1]
    extra_grps = ncpus - ngroups * (ncpus // ngroups)
    t = ctx.t
    rotate = ctx.rotate
    off = ctx.spread_offset
    for v in range(ngroups):
        cpus_per_grp = ncpus // ngroups
        if rotate:
            if extra_grps and ((v + off) & _U32) % ngroups < extra_grps:   # & _U32: C unsigned wrap
                cpus_per_grp += 1
        elif extra_grps:
            cpus_per_grp += 1
            extra_grps -= 1
        # wrapping has to be considered given 'startgrp' may start anywhere
        if curgrp >= last_grp:
            curgrp = 0
        masks[curgrp], nmsk = grp_spread_init_one(masks[curgrp], nmsk, cpus_per_grp, t)
        curgrp += 1
    return curgrp


def alloc_cluster_groups(ncpus: int, ngroups: int, node_cpumask: int,
                         ctx: _Ctx) -> tuple[int, list[int], list[list[int]]]:
    """Clusters of ``node_cpumask`` and their share of ``ngroups``.

    Returns ``(ncluster, clusters, cluster_groups)``; ``ncluster`` is 0 (no
    cluster grouping) when a CPU has an empty cluster mask, or when there are
    more clusters than groups. ``clusters[i]`` is the full
    ``topology_cluster_cpumask()`` of the i-th cluster's first CPU;
    ``cluster_groups`` holds ``[index into clusters, ngroups]``, sorted by
    the kernel's heapsort on the clusters' CPU counts inside the node.
    """
    cluster_of = ctx.t.cluster
    ncluster = 0
    msk = node_cpumask
    # The kernel probes, then walks the same CPUs again to fill the arrays;
    # both walks see the same first CPUs, so the probe keeps the masks.
    clusters: list[int] = []
    # Probe how many clusters in this node.
    while msk:
        cluster_mask = cluster_of[(msk & -msk).bit_length() - 1]
        if not cluster_mask:
            return 0, [], []
        clusters.append(cluster_mask)
        # Clean out CPUs on the same cluster.
        msk &= ~cluster_mask
        ncluster += 1

    # If ngroups < ncluster, cross cluster is inevitable, skip.
    if ncluster == 0 or ncluster > ngroups:
        return 0, [], []

    # Filling cluster info: [id, ncpus of the cluster inside this node].
    cluster_groups = [[n, (cm & node_cpumask).bit_count()] for n, cm in enumerate(clusters)]

    alloc_groups_to_nodes(ngroups, ncpus, cluster_groups, ncluster, ctx)
    return ncluster, clusters, cluster_groups


def _rotate_extra_cluster_groups(ncluster: int, clusters: list[int],
                                 cluster_groups: list[list[int]], node_cpumask: int,
                                 spread_offset: int) -> None:
    """The seed patch's block in ``__try_group_cluster_cpus()`` (rotate only).

    Takes every group above the smallest per-cluster count back, then hands
    them out again from cluster ``spread_offset % ncluster`` with a stride of
    ``ncluster // extras`` (1 when extras >= ncluster), skipping clusters
    already holding as many groups as CPUs; a second, plain pass places what
    the strided pass could not.
    """
    min_grps = UINT_MAX
    total_extra = 0
    for i in range(ncluster):
        if cluster_groups[i][1] < min_grps:
            min_grps = cluster_groups[i][1]
    for i in range(ncluster):
        if cluster_groups[i][1] > min_grps:
            total_extra += cluster_groups[i][1] - min_grps
            cluster_groups[i][1] = min_grps

    start = spread_offset % ncluster
    stride = ncluster // total_extra if 0 < total_extra < ncluster else 1

    i = 0
    while i < ncluster and total_extra > 0:
        idx = ((start + i * stride) & _U32) % ncluster
        cap = (clusters[cluster_groups[idx][0]] & node_cpumask).bit_count()
        if cluster_groups[idx][1] < cap:
            cluster_groups[idx][1] += 1
            total_extra -= 1
        i += 1

    # Fallback: place remaining extras wherever they fit
    i = 0
    while i < ncluster and total_extra > 0:
        cap = (clusters[cluster_groups[i][0]] & node_cpumask).bit_count()
        if cluster_groups[i][1] < cap:
            cluster_groups[i][1] += 1
            total_extra -= 1
        i += 1


def __try_group_cluster_cpus(ncpus: int, ngroups: int, node_cpumask: int,
                             masks: list[int], curgrp: int, last_grp: int,
                             ctx: _Ctx) -> tuple[bool, int]:
    """Group one node's CPUs cluster by cluster. Returns ``(done, curgrp)``."""
    ncluster, clusters, cluster_groups = alloc_cluster_groups(ncpus, ngroups,
                                                              node_cpumask, ctx)
    if ncluster == 0:
        return False, curgrp

    if ctx.rotate and ncluster > 1:
        _rotate_extra_cluster_groups(ncluster, clusters, cluster_groups,
                                     node_cpumask, ctx.spread_offset)

    for i in range(ncluster):
        nv = cluster_groups[i]
        # Get the cpus on this cluster.
        nmsk = node_cpumask & clusters[nv[0]]
        nc = nmsk.bit_count()
        if not nc:
            continue
        if nv[1] > nc:                      # WARN_ON_ONCE
            ctx.warnings += 1
        curgrp = assign_cpus_to_groups(nc, nmsk, nv, masks, curgrp, last_grp, ctx)
    return True, curgrp


def __group_cpus_evenly(startgrp: int, numgrps: int, node_to_cpumask: list[int],
                        cpu_mask: int, masks: list[int], ctx: _Ctx) -> int:
    """One stage: spread ``cpu_mask`` over the groups from ``startgrp`` on.

    Returns how many groups the stage filled (the kernel's ``done``).
    Kernels without the cluster path (6.1, 6.12) go straight to the
    per-node spread.
    """
    last_grp = numgrps
    curgrp = startgrp
    if not cpu_mask:
        return 0

    nodes, nodemsk = get_nodes_in_cpumask(node_to_cpumask, cpu_mask, ctx.t)

    # If the number of nodes in the mask is greater than or equal the
    # number of groups we just spread the groups across the nodes.
    if numgrps <= nodes:
        for n in nodemsk:
            masks[curgrp] |= cpu_mask & node_to_cpumask[n]
            curgrp += 1
            if curgrp == last_grp:
                curgrp = 0
        return numgrps

    done = 0
    node_groups = alloc_nodes_groups(numgrps, node_to_cpumask, cpu_mask, nodemsk, ctx)
    for nv in node_groups:
        if nv[1] == UINT_MAX:
            continue
        # Get the cpus on this node which are in the mask
        nmsk = cpu_mask & node_to_cpumask[nv[0]]
        ncpus = nmsk.bit_count()
        if not ncpus:
            continue
        if nv[1] > ncpus:                   # WARN_ON_ONCE
            ctx.warnings += 1

        if ctx.cluster:
            ok, curgrp = __try_group_cluster_cpus(ncpus, nv[1], nmsk, masks, curgrp,
                                                  last_grp, ctx)
            if ok:
                done += nv[1]
                continue
        curgrp = assign_cpus_to_groups(ncpus, nmsk, nv, masks, curgrp, last_grp, ctx)
        done += nv[1]
    return done


class ZeroGroupsError(ValueError):
    """``group_cpus_evenly(0)`` on a kernel without the ``numgrps == 0``
    check (Debian's 6.1): ``kcalloc(0)`` returns ``ZERO_SIZE_PTR`` and the
    first stage writes through it, an oops, not a result."""


def group_cpus_evenly(numgrps: int, topo: Topology | CpuTopo, variant: str = "mainline",
                      spread_offset: int = 0, kernel: str | None = None) -> GroupMasks | None:
    """Group all possible CPUs of ``topo`` into ``numgrps`` groups as ``kernel`` does.

    Inputs: the group count, the machine (a Topology, or a :class:`CpuTopo`
    from :func:`prepare`), ``variant`` (``"mainline"`` or ``"rotate"``; the
    rotate patch needs a kernel with the cluster path), for ``"rotate"``
    the value the patch's ``atomic_fetch_inc()`` counter returned for this
    call (the d-th caller since boot gets d; mainline ignores it), and the
    modelled kernel (``"6.1"``, ``"6.12"``, ``"7.2"``, a release string such
    as ``"7.2.13+deb14-amd64"``, or ``None`` for the newest, 7.2).

    Output: a :class:`GroupMasks` list of ``numgrps`` masks (ints) with
    ``.nummasks``, ``.warnings`` and ``.kernel``; ``None`` when ``numgrps``
    is 0 (the kernel returns NULL; 6.1 raises :class:`ZeroGroupsError`).
    An unknown kernel raises :class:`~numalab.kernel.versions.UnknownKernelError`.

    Two stages, as in the kernel: present CPUs first, from group 0; then the
    possible-but-not-present CPUs from the group after the last one the first
    stage used (or from 0 if it used them all), so they join existing groups
    when the groups run out.

    >>> from numalab.topology import load
    >>> g = group_cpus_evenly(3, load("numa:1 core:4 pu:1"))
    >>> [hex(m) for m in g], g.nummasks, g.kernel
    (['0x3', '0x4', '0x8'], 3, '7.2')
    >>> g = group_cpus_evenly(6, load("numa:1 core:4 pu:1"), kernel="6.12")
    >>> g.nummasks, g.warnings      # no nummasks in 6.12; its WARN_ON fires
    (6, 1)
    """
    text = versions.text(kernel)
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, not {variant!r}")
    if variant == "rotate" and not text.cluster_path:
        raise ValueError(f"the rotate patch changes the cluster path, which Linux "
                         f"{text.version}'s lib/group_cpus.c does not have")
    if numgrps < 0:
        raise ValueError("numgrps is an unsigned count")
    if numgrps == 0:
        if not text.zero_check:
            raise ZeroGroupsError(f"Linux {text.version}'s group_cpus_evenly() has no "
                                  "numgrps == 0 check: it would write through ZERO_SIZE_PTR")
        return None
    t = _view(topo)
    ctx = _Ctx(t, variant == "rotate", spread_offset, text)
    masks = GroupMasks([0] * numgrps)
    masks.kernel = text.version

    node_to_cpumask = t.node_to_cpumask or build_node_to_cpumask(t)
    npresmsk = t.present

    # grouping present CPUs first
    nr_present = __group_cpus_evenly(0, numgrps, node_to_cpumask, npresmsk, masks, ctx)

    # Allocate non present CPUs starting from the next group to be handled;
    # if the present CPUs used every group, go round again from group 0.
    curgrp = 0 if nr_present >= numgrps else nr_present
    npresmsk = t.possible & ~npresmsk
    nr_others = __group_cpus_evenly(curgrp, numgrps, node_to_cpumask, npresmsk, masks, ctx)

    if text.nummasks:
        masks.nummasks = min(nr_present + nr_others, numgrps)
    else:
        if nr_present + nr_others < numgrps:    # WARN_ON (fail_build_affinity)
            ctx.warnings += 1
        masks.nummasks = numgrps
    masks.warnings = ctx.warnings
    return masks


def spread_devices(numgrps: int, topo: Topology | CpuTopo, devices: int,
                   variant: str = "mainline", first_offset: int = 0,
                   kernel: str | None = None) -> list[GroupMasks]:
    """The masks ``devices`` successive callers get, each asking for ``numgrps``.

    Under ``"rotate"`` device d gets ``spread_offset = first_offset + d`` (the
    patch's global counter, assuming no other caller in between). ``kernel``
    as in :func:`group_cpus_evenly`.

    >>> from numalab.topology import load
    >>> [len(g) for g in spread_devices(3, load("numa:1 core:4 pu:1"), 2)]
    [3, 3]
    """
    t = _view(topo)
    out = []
    for d in range(devices):
        g = group_cpus_evenly(numgrps, t, variant, first_offset + d, kernel=kernel)
        out.append(g if g is not None else GroupMasks())
    return out
