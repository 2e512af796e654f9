"""The scheduler's NUMA distance levels and the node walks built on them.

A port of the NUMA part of ``kernel/sched/topology.c`` and of the node
iterators in ``include/linux/topology.h``, with the kernel's names:

* :func:`sched_init_numa` -- finds the sorted unique SLIT distances
  (``sched_domains_numa_distance``) and, for every distance level ``i`` and
  every node ``j`` with CPUs, the mask of CPUs on nodes at most that far from
  ``j`` (``sched_domains_numa_masks[i][j]``).
* :func:`sched_numa_hop_mask` / :func:`for_each_numa_hop_mask` -- read those
  masks back ("the CPUs within ``hops`` levels of ``node``"); drivers such as
  mlx5 and ``cpumask_local_spread()`` use them to spread IRQs by distance.
* :func:`sched_numa_find_closest` / :func:`sched_numa_find_nth_cpu`.
* :func:`for_each_node_numadist` -- visits nodes in increasing distance from
  a start node. It came with the sched_ext per-node idle cpumask series
  ("sched/topology: Introduce for_each_node_numadist() iterator", Andrea
  Righi, February 2025, merged for v6.15); it repeatedly calls
  ``nearest_node_nodemask()`` (``mm/mempolicy.c``) on a shrinking "unvisited"
  nodemask, which the sched_ext caller notes is O(N^2) in the number of nodes.
* :func:`node_distance` and :func:`numa_nearest_node`.

Sources read. The port follows Linux 7.2 (Debian's ``linux-source-7.2``
tree): ``kernel/sched/topology.c`` for ``sched_init_numa(int offline_node)``
(``sched_record_numa_dist()`` over the ``N_CPU`` nodes of
``for_each_cpu_node_but()``; a distance outside [10, 255] warns "Invalid
distance value range" and leaves no NUMA levels), ``sched_numa_hop_mask()``
and ``sched_numa_find_nth_cpu()``; ``include/linux/topology.h`` and
``mm/mempolicy.c`` for ``for_each_node_numadist()`` /
``nearest_node_nodemask()`` (merged for v6.15).

Simplifications, each the port's and not the kernel's:

* 7.2 builds the hop levels and masks from ``arch_sched_node_distance()``.
  Its x86 override (``arch/x86/kernel/smpboot.c``) differs from
  ``node_distance()`` only on multi-socket Granite Rapids / Darkmont parts
  with at least three nodes per package (SNC-3): it averages the off-package
  distances so the table becomes symmetric. This port uses
  ``node_distance()`` throughout, what every other architecture does; on
  such a machine its levels would differ from 7.2's.
* ``sched_numa_find_closest()`` picks with ``cpumask_any_and_distribute()``
  in 7.2 (rotating among the hits); the port returns the lowest hit.

Masks are ints (bit i = CPU i, :mod:`numalab.cpumask`); nodemasks are ints
too (bit n = node n). Where the kernel returns ``ERR_PTR()`` or ``NULL`` the
port returns ``None``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ...cpumask import cpus as _bits
from ...cpumask import nth as _nth
from ...topology.model import Topology

__all__ = [
    "LOCAL_DISTANCE", "REMOTE_DISTANCE", "NUMA_NO_NODE", "NR_DISTANCE_VALUES",
    "NumaState", "node_distance", "node_states_online", "node_states_cpu",
    "sched_init_numa", "sched_numa_hop_mask", "for_each_numa_hop_mask",
    "sched_numa_find_closest", "sched_numa_find_nth_cpu", "numa_nearest_node",
    "nearest_node_nodemask", "for_each_node_numadist", "numa_hop_order",
]

LOCAL_DISTANCE = 10
REMOTE_DISTANCE = 20
NUMA_NO_NODE = -1
# DISTANCE_BITS is 8: a SLIT entry is one byte, so distances live in [10, 255].
NR_DISTANCE_VALUES = 1 << 8


def node_distance(topo: Topology, frm: int, to: int) -> int:
    """``node_distance(from, to)``: the SLIT entry in the row of ``frm``.

    Without a matrix, or for a node the matrix does not cover, the answer is
    what x86's ``__node_distance()`` gives: 10 for a node to itself, 20
    otherwise. The direction matters for asymmetric tables.

    >>> from numalab.topology.model import Topology, Node
    >>> t = Topology("t", nodes={0: Node(0), 1: Node(1)}, distances=[[10, 12], [21, 10]])
    >>> node_distance(t, 0, 1), node_distance(t, 1, 0), node_distance(t, 0, 7)
    (12, 21, 20)
    """
    ids = topo.node_ids
    if not topo.distances or frm not in topo.nodes or to not in topo.nodes:
        return LOCAL_DISTANCE if frm == to else REMOTE_DISTANCE
    return topo.distances[ids.index(frm)][ids.index(to)]


def _online_cpus(topo: Topology) -> int:
    """``cpu_online_mask``; a dump without an online file counts every CPU it lists."""
    if topo.online:
        return topo.online
    mask = 0
    for n in topo.nodes.values():
        mask |= n.cpus
    for c in topo.cpus:
        mask |= 1 << c
    return mask


def node_states_online(topo: Topology) -> int:
    """``node_states[N_ONLINE]`` as a nodemask: every node the dump lists."""
    m = 0
    for n in topo.nodes:
        m |= 1 << n
    return m


def node_states_cpu(topo: Topology) -> int:
    """``node_states[N_CPU]``: nodes with at least one online CPU (mm/vmstat.c
    sets and clears the state as CPUs come and go)."""
    online = _online_cpus(topo)
    m = 0
    for n, node in topo.nodes.items():
        if node.cpus & online:
            m |= 1 << n
    return m


@dataclass
class NumaState:
    """What ``sched_init_numa()`` leaves behind.

    * ``distances`` -- ``sched_domains_numa_distance[]``, sorted, unique;
    * ``masks[i]`` -- ``{node: cpumask}`` for level ``i``; nodes without CPUs
      have no entry (the kernel leaves ``masks[i][node]`` NULL);
    * ``levels`` -- ``sched_domains_numa_levels`` (0 when the table was rejected);
    * ``nr_node_ids`` -- one more than the highest node id;
    * ``online`` -- ``cpu_online_mask`` (used for ``NUMA_NO_NODE``);
    * ``warnings`` -- what ``sched_numa_warn()`` would have printed.
    """

    distances: list[int] = field(default_factory=list)
    masks: list[dict[int, int]] = field(default_factory=list)
    nr_node_ids: int = 0
    online: int = 0
    cpu_nodes: int = 0               # node_states[N_CPU]
    warnings: list[str] = field(default_factory=list)

    @property
    def levels(self) -> int:
        return len(self.masks)

    @property
    def max_distance(self) -> int:
        """``sched_max_numa_distance`` (0 when there are no levels)."""
        return self.distances[-1] if self.masks else 0


def _for_each_cpu_node_but(state_mask: int, nbut: int) -> Iterator[int]:
    """``for_each_cpu_node_but(n, nbut)``: N_CPU nodes in id order, skipping one."""
    for n in _bits(state_mask):
        if n != nbut:
            yield n


def sched_init_numa(topo: Topology, offline_node: int = NUMA_NO_NODE) -> NumaState:
    """Build the scheduler's NUMA distance levels and per-level node masks.

    Input: a topology; ``offline_node`` is the node whose last CPU is going
    away (``sched_update_numa()`` passes it), NUMA_NO_NODE otherwise.
    Output: a :class:`NumaState`.

    Only nodes with online CPUs take part: a memory-only node adds neither a
    distance level nor a mask. A distance outside [10, 255] makes the kernel
    warn and give up, leaving no NUMA levels at all; so does this port.
    ``masks[i][j]`` holds the CPUs of every node ``k`` with
    ``node_distance(j, k) <= distances[i]`` (row ``j``: distances *from* j).

    >>> from numalab.topology.model import Topology, Node
    >>> ring = [[10, 20, 30, 20], [20, 10, 20, 30], [30, 20, 10, 20], [20, 30, 20, 10]]
    >>> t = Topology("ring", online=0xF, nodes={n: Node(n, 1 << n) for n in range(4)},
    ...              distances=ring)
    >>> s = sched_init_numa(t)
    >>> s.distances, [bin(s.masks[i][0]) for i in range(s.levels)]
    ([10, 20, 30], ['0b1', '0b1011', '0b1111'])
    """
    online = _online_cpus(topo)
    cpu_nodes = node_states_cpu(topo)
    nr_node_ids = (max(topo.nodes) + 1) if topo.nodes else 1
    state = NumaState(nr_node_ids=nr_node_ids, online=online, cpu_nodes=cpu_nodes)

    # The kernel's "O(nr_nodes^2) de-duplicating selection sort": mark every
    # distance seen in a 256-bit map, then read the set bits in order.
    distance_map = 0
    for i in _for_each_cpu_node_but(cpu_nodes, offline_node):
        for j in _for_each_cpu_node_but(cpu_nodes, offline_node):
            d = node_distance(topo, i, j)
            if d < LOCAL_DISTANCE or d >= NR_DISTANCE_VALUES:
                state.warnings.append("Invalid distance value range")
                return state
            distance_map |= 1 << d
    state.distances = _bits(distance_map)

    masks: list[dict[int, int]] = []
    warned = False
    for dist in state.distances:
        level: dict[int, int] = {}
        for j in _for_each_cpu_node_but(cpu_nodes, offline_node):
            mask = 0
            for k in _for_each_cpu_node_but(cpu_nodes, offline_node):
                if not warned and node_distance(topo, j, k) != node_distance(topo, k, j):
                    # printed only with sched_debug, and only once
                    state.warnings.append("Node-distance not symmetric")
                    warned = True
                if node_distance(topo, j, k) > dist:
                    continue
                mask |= topo.cpumask_of_node(k)
            # Hotplug keeps the masks to online CPUs
            # (sched_domains_numa_masks_set/clear).
            level[j] = mask & online
        masks.append(level)
    state.masks = masks
    return state


def sched_numa_hop_mask(state: NumaState, node: int, hops: int) -> int | None:
    """``sched_numa_hop_mask(node, hops)``: CPUs at most ``hops`` levels away.

    Returns None where the kernel returns an error pointer (``node`` past
    ``nr_node_ids`` or ``hops`` past the last level: ``-EINVAL``) or NULL
    (a node without CPUs has no mask).

    >>> from numalab.topology.model import Topology, Node
    >>> t = Topology("two", online=0b11, nodes={0: Node(0, 1), 1: Node(1, 2)})
    >>> s = sched_init_numa(t)
    >>> sched_numa_hop_mask(s, 1, 0), sched_numa_hop_mask(s, 1, 1), sched_numa_hop_mask(s, 1, 2)
    (2, 3, None)
    """
    if node < 0 or node >= state.nr_node_ids or hops < 0 or hops >= state.levels:
        return None
    return state.masks[hops].get(node)


def for_each_numa_hop_mask(state: NumaState, node: int) -> Iterator[int]:
    """``for_each_numa_hop_mask(mask, node)``: hop masks of increasing distance.

    Each mask is a superset of the one before (the kernel's users subtract
    the previous mask to get "the CPUs new at this hop"). ``NUMA_NO_NODE``
    yields ``cpu_online_mask`` once; a CPU-less node yields nothing.

    >>> from numalab.topology.model import Topology, Node
    >>> t = Topology("two", online=0b11, nodes={0: Node(0, 1), 1: Node(1, 2)})
    >>> list(for_each_numa_hop_mask(sched_init_numa(t), 0))
    [1, 3]
    """
    hops = 0
    while True:
        if node != NUMA_NO_NODE or hops:
            mask = sched_numa_hop_mask(state, node, hops)
        else:
            mask = state.online
        if mask is None:
            return
        yield mask
        hops += 1


def sched_numa_find_closest(state: NumaState, topo: Topology, cpus: int, cpu: int) -> int | None:
    """``sched_numa_find_closest(cpus, cpu)``: a CPU of ``cpus`` in the
    nearest hop of ``cpu``'s node, or None (the kernel's ``nr_cpu_ids``).
    Simplified: 7.2 picks with ``cpumask_any_and_distribute()`` (rotating
    among the hits); the port returns the lowest hit."""
    j = topo.cpu_to_node(cpu)
    for i in range(state.levels):
        m = state.masks[i].get(j)
        if m is None:
            break
        hit = cpus & m
        if hit:
            return _bits(hit & -hit)[0]
    return None


def numa_nearest_node(topo: Topology, node: int, state_mask: int) -> int:
    """``numa_nearest_node(node, state)``: ``node`` itself when it is in the
    state (or is NUMA_NO_NODE), else the nearest node of the state; ties go
    to the lowest node id (strict ``<`` over nodes in id order)."""
    if node == NUMA_NO_NODE or (state_mask >> node) & 1:
        return node
    min_dist, min_node = None, node
    for n in _bits(state_mask):
        d = node_distance(topo, node, n)
        if min_dist is None or d < min_dist:
            min_dist, min_node = d, n
    return min_node


def sched_numa_find_nth_cpu(state: NumaState, topo: Topology, cpus: int, cpu: int,
                            node: int) -> int | None:
    """``sched_numa_find_nth_cpu(cpus, cpu, node)``: the ``cpu``-th (0-based)
    CPU of ``cpus`` when CPUs are ordered by hop from ``node`` and by id
    inside a hop. ``cpumask_local_spread()`` is built on it.

    The kernel finds the hop by binary search over the (growing) hop masks;
    a linear scan finds the same hop. A CPU-less ``node`` is first replaced
    by its nearest node with CPUs. Returns None for the kernel's
    ``nr_cpu_ids`` (fewer than ``cpu + 1`` CPUs).
    """
    if node == NUMA_NO_NODE:
        return _nth(cpus & state.online, cpu)
    node = numa_nearest_node(topo, node, state.cpu_nodes)
    if not state.masks:
        return None
    prev = 0
    for i in range(state.levels):
        cur = state.masks[i].get(node, 0)
        w_prev = (cpus & prev).bit_count()
        if (cpus & cur).bit_count() > cpu:
            return _nth(cpus & cur & ~prev, cpu - w_prev)
        prev = cur
    return None


def nearest_node_nodemask(topo: Topology, node: int, mask: int) -> int | None:
    """``nearest_node_nodemask(node, mask)``: the node of ``mask`` nearest to
    ``node`` by ``node_distance(node, n)``. Nodes are scanned in id order
    with a strict ``<``, so among equal distances the lowest id wins.
    Returns None for the kernel's ``MAX_NUMNODES`` (empty mask)."""
    min_dist, min_node = None, None
    for n in _bits(mask):
        d = node_distance(topo, node, n)
        if min_dist is None or d < min_dist:
            min_dist, min_node = d, n
    return min_node


def for_each_node_numadist(topo: Topology, node: int, unvisited: int | None = None) -> Iterator[int]:
    """``for_each_node_numadist(node, unvisited)``: nodes of ``unvisited`` in
    increasing distance from ``node``.

    ``unvisited`` is a nodemask (default: every online node, ``node``
    included, so it comes first). Each step takes the nearest unvisited node
    *to the start node* (not to the last one visited) and clears it: O(N) per
    step, O(N^2) for a full walk. Ties go to the lower node id. sched_ext's
    caller clears ``node`` first because it has already searched it.

    >>> from numalab.topology.model import Topology, Node
    >>> d = [[10, 51, 31, 41], [51, 10, 21, 61], [31, 21, 10, 11], [41, 61, 11, 10]]
    >>> t = Topology("t", nodes={n: Node(n) for n in range(4)}, distances=d)
    >>> list(for_each_node_numadist(t, 0))
    [0, 2, 3, 1]
    """
    if unvisited is None:
        unvisited = node_states_online(topo)
    start = node
    while True:
        n = nearest_node_nodemask(topo, start, unvisited)
        if n is None:
            return
        yield n
        unvisited &= ~(1 << n)


def numa_hop_order(topo: Topology, node: int) -> list[list[int]]:
    """Online nodes grouped by distance from ``node``, nearest group first.

    A plain helper (not a kernel function): group ``h`` holds the nodes at
    the ``h``-th smallest distance from ``node``, in the order
    :func:`for_each_node_numadist` visits them. Memory-only nodes are
    included, unlike the scheduler's hop masks.

    >>> from numalab.topology.model import Topology, Node
    >>> ring = [[10, 20, 30, 20], [20, 10, 20, 30], [30, 20, 10, 20], [20, 30, 20, 10]]
    >>> t = Topology("ring", nodes={n: Node(n) for n in range(4)}, distances=ring)
    >>> numa_hop_order(t, 0)
    [[0], [1, 3], [2]]
    """
    groups: list[list[int]] = []
    last = None
    for n in for_each_node_numadist(topo, node):
        d = node_distance(topo, node, n)
        if d != last:
            groups.append([])
            last = d
        groups[-1].append(n)
    return groups
