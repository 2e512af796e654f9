"""sched_ext's built-in idle CPU selection, ported with its cache traffic counted.

Port of ``kernel/sched/ext/idle.c`` of Linux 7.2 (read from Debian's
``linux-source-7.2`` 7.2.13-1; in 7.2 sched_ext lives in ``kernel/sched/ext/``;
earlier releases had this code in ``kernel/sched/ext_idle.c``, and 6.12 in
``kernel/sched/ext.c``), with the per-node
idle cpumasks of the series "sched_ext: split global idle cpumask into
per-NUMA cpumasks" as merged (v11, 12 Feb 2025), and of the idle class's
hooks that call it, ``put_prev_task_idle()``, ``set_next_task_idle()`` and
``pick_task_idle()`` (``kernel/sched/idle.c``:483-508). Line numbers below are
7.2's ``kernel/sched/ext/idle.c``. The node walk follows
``for_each_node_numadist()`` of ``include/linux/topology.h`` and
``nearest_node_nodemask()`` of ``mm/mempolicy.c``;
``cpumask_any_and_distribute()`` follows ``lib/cpumask.c`` (per-CPU
round robin through ``distribute_cpu_mask_prev``).

What the port keeps, with the kernel's names and order:

* :func:`scx_idle_test_and_clear_cpu` (idle.c:79) -- claim a CPU; with SMT also drop its
  core from the idle-core ("smt") mask, reading first
  (``cpumask_intersects()`` / ``cpumask_test_cpu()``) so that a core that is
  already out of the mask costs no store;
* :func:`pick_idle_cpu_in_node`, :func:`pick_idle_cpu_from_online_nodes`,
  :func:`scx_pick_idle_cpu` with ``SCX_PICK_IDLE_CORE`` and
  ``SCX_PICK_IDLE_IN_NODE``;
* :func:`scx_select_cpu_dfl` (idle.c:457) -- the default ``ops.select_cpu()``
  policy (what ``scx_bpf_select_cpu_dfl()``, idle.c:1040, runs for
  ``scx_simple``);
* :func:`__scx_update_idle` (idle.c:751) / :func:`update_builtin_idle`
  (idle.c:710) -- a CPU entering or leaving idle, and the idle->idle refresh;
  with per-node masks only its own node's masks change;
* :func:`put_prev_task_idle`, :func:`set_next_task_idle`,
  :func:`pick_task_idle` -- ``kernel/sched/idle.c``'s callers, which decide
  ``do_notify`` and whether the idle task is ``rq->curr``
  (``IdleMasks.curr_idle``);
* :func:`reset_idle_masks`, :func:`scx_idle_update_selcpu_topology`.

Both modes: one global pair of masks (``NUMA_NO_NODE``) or one pair per node
(``SCX_OPS_BUILTIN_IDLE_PER_NODE``).

The ``SCX_WAKE_SYNC`` (wake-affine) branch of ``scx_select_cpu_dfl()``
(idle.c:525-561) is ported in the kernel's place (before the SMT steps):
``prev_cpu`` when it shares the waker's LLC and can be claimed, else the
waker's own CPU when the waker's local DSQ is empty
(``IdleMasks.local_dsq_nr``, kept by the caller) and the waker's idle mask is
not empty -- and 7.2 *claims* that CPU first
(``scx_idle_test_and_clear_cpu(cpu)``, idle.c:558), a locked RMW on the
waker's idle mask whatever its bit. The idle->idle refresh: when an idle CPU
reschedules and picks the idle task again, ``pick_task_idle()`` calls
``scx_update_idle(rq, true, false)`` and, ``rq->curr`` being the idle task,
the masks are written again (``assign_cpu()`` sets the bit, the core is
re-added to ``smt``) -- :func:`idle_to_idle`.

Simplified, and said so: per-task affinity is an optional ``cpus_allowed``
mask (default: every possible CPU, i.e. ``task_affinity_all()``); ``sd_llc``
is the topology's ``llc_cpus`` and the ``sd_numa`` group is the CPU's node;
``ops.update_idle()`` is never called (the built-in tracking is always on,
as with ``scx_simple``); the waker's ``PF_EXITING`` is ``IdleMasks.waker_exiting``
(False unless the caller says so: an exiting child waking its parent sets
it); there are no races: each call runs to completion before the next.

What this module adds: the idle masks are an explicit state
(:class:`IdleMasks`) that counts every access the way the hardware would see
it. A cpumask of ``nr_cpu_ids`` bits is ``ceil(nr_cpu_ids/64)`` words and
``ceil(nr_cpu_ids/512)`` 64-byte cache lines; the global masks are one
allocation each (on node 0, where they are allocated at boot), each per-node
mask is a separate allocation on its own node. For every line the state keeps
which CPUs hold a valid copy and which CPU wrote it last, so each read and
each write can be classified: a hit, a transfer from a CPU of the same node,
or a transfer from another node -- and timed (see :class:`CostModel`).
Read-mostly masks (``cpus_allowed``, LLC and node spans, SMT siblings) are
never written, stay in every cache and are not counted.

Layout (``IdleMasks(layout=...)``): with ``CONFIG_CPUMASK_OFFSTACK`` (forced
by ``MAXSMP``, as in distribution kernels) each ``cpumask_var_t`` is a
separate ``kmalloc`` of ``cpumask_size()`` bytes (``nr_cpu_ids`` rounded up
to longs: 32 bytes at 224 CPUs, the ``kmalloc-32`` cache), so the ``cpu``
and ``smt`` masks of one pair *may* sit in the same 64-byte line -- when the
allocator hands out two neighbouring objects -- or not (randomised slab
freelists make it a matter of luck). ``"own-line"`` gives each mask its own
line(s); ``"shared-line"`` puts both masks of a pair in the same line(s)
when two of them fit in one (``nr_cpu_ids`` <= 256).

The book's idea, not kernel code: ``IdleMasks(guard_exit=True)`` read-guards the
two writes :func:`update_builtin_idle` makes when a CPU leaves idle (the
``assign_cpu()`` clear and the ``cpumask_andnot()`` of the core), the way
:func:`scx_idle_test_and_clear_cpu` already guards its ``smt`` writes: a
bit that a waker has already cleared is not stored again. It is the
alternative a reviewer can ask about; the assumption it rests on is that
only a CPU itself sets its own ``cpu`` bit (so a clear bit read on the way
out of idle stays clear), and that the ``smt`` mask tolerates the same
benign race the kernel comment already accepts for it.
"""

from __future__ import annotations

import math
from bisect import bisect_right as _bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields

from ...cpumask import cpus as _cpus
from ...errors import NumalabError
from ...topology.model import Topology
from .topology import for_each_node_numadist as _shared_numadist

__all__ = [
    "NUMA_NO_NODE", "EBUSY", "SCX_PICK_IDLE_CORE", "SCX_PICK_IDLE_IN_NODE",
    "SCX_OPS_BUILTIN_IDLE_PER_NODE", "SCX_WAKE_SYNC", "WORD_BITS", "LINE_BITS", "LAYOUTS",
    "CostModel", "Stats", "IdleCpumask", "ScxIdleCpus", "IdleMasks",
    "idle_cpumask", "scx_cpu_node_if_enabled", "scx_idle_test_and_clear_cpu",
    "pick_idle_cpu_in_node", "pick_idle_cpu_from_online_nodes", "scx_pick_idle_cpu",
    "scx_select_cpu_dfl", "update_builtin_idle", "__scx_update_idle", "scx_update_idle",
    "reset_idle_masks", "scx_idle_update_selcpu_topology",
    "put_prev_task_idle", "set_next_task_idle", "pick_task_idle",
    "task_to_idle", "idle_to_task", "idle_to_idle", "replay", "ReplayError", "landing",
    "for_each_node_numadist", "node_visit_order",
    "numadist_walk_lookups", "validate_node",
]

NUMA_NO_NODE = -1
EBUSY = 16                                  # returned negated, as the kernel does
SCX_PICK_IDLE_CORE = 1 << 0                 # enum scx_pick_idle_cpu_flags
SCX_PICK_IDLE_IN_NODE = 1 << 1
SCX_OPS_BUILTIN_IDLE_PER_NODE = 1 << 6      # enum scx_ops_flags
SCX_WAKE_SYNC = 0x10                        # WF_SYNC (enum scx_wake_flags)
WORD_BITS = 64                              # BITS_PER_LONG on 64-bit
LAYOUTS = ("own-line", "shared-line")       # where a pair's cpu and smt masks sit
LINE_BITS = 512                             # 64-byte cache line
_M64 = (1 << WORD_BITS) - 1


class IdleError(NumalabError, ValueError):
    """A bad argument to the port (a CPU or node that does not exist)."""


# --------------------------------------------------------------------------
# Accounting
# --------------------------------------------------------------------------

@dataclass
class CostModel:
    """How long a cache-line access takes, in nanoseconds.

    local_ns:       a line transfer between two CPUs of the same node (read
                    miss served by, or ownership taken from, a same-node CPU)
    remote_factor:  a transfer between nodes a and b costs
                    ``local_ns * distance(a, b) / 10 * remote_factor``
    word_ns:        reading one cpumask word already in this CPU's cache
    lookup_ns:      one ``node_distance()`` lookup in the node walk
    serialize:      True: transfers of one line do not overlap (a line has
                    one owner at a time): a request waits for the first free
                    slot, so waiting grows with the number of CPUs hammering
                    the line; False: no queueing
    latency_ns:     optional node x node matrix of measured one-way transfer
                    latencies (ns) that replaces the distance formula
    """

    local_ns: float = 50.0
    remote_factor: float = 1.0
    word_ns: float = 0.5
    lookup_ns: float = 1.0
    serialize: bool = True
    latency_ns: Sequence[Sequence[float]] | None = None


@dataclass
class Stats:
    """Counts of idle-mask accesses (reset with :meth:`IdleMasks.reset_stats`).

    words_read:        cpumask words read from the idle masks
    line_reads:        cache lines read (first word of a line in one operation)
    read_hits / read_local / read_remote:  how each line read was served
    writes:            stores / locked RMWs to idle-mask lines
    write_hits:        the writer already owned the line exclusively
    write_local:       ownership taken from a CPU of the same node
    write_remote:      ownership taken while another node held a copy
    cross_node_writes: writes to a line whose last writer was on another node
    transfer_ns:       time spent moving lines (sum of transfer latencies)
    wait_ns:           time spent queueing behind other transfers of the line
    word_ns:           time spent reading words (``word_ns`` each) and
                       looking up distances (``lookup_ns`` each)
    dist_lookups:      ``node_distance()`` lookups of the node walk
    walks:             searches that left the starting node (counted only
                       when there is another online node to visit)
    remote_copy_invalidations: writes whose line was last written on the
                       writer's own node but still had a copy on another
                       node (left by a remote reader, e.g. a walker): the
                       local writer pays a remote invalidation
    sync_waker_picks:  ``SCX_WAKE_SYNC`` decisions that returned the waker's
                       own CPU without claiming an idle CPU (no write)
    """

    words_read: int = 0
    line_reads: int = 0
    read_hits: int = 0
    read_local: int = 0
    read_remote: int = 0
    writes: int = 0
    write_hits: int = 0
    write_local: int = 0
    write_remote: int = 0
    cross_node_writes: int = 0
    transfer_ns: float = 0.0
    wait_ns: float = 0.0
    word_ns: float = 0.0
    dist_lookups: int = 0
    walks: int = 0
    remote_copy_invalidations: int = 0
    sync_waker_picks: int = 0

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def add(self, other: "Stats") -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    @property
    def cost_ns(self) -> float:
        """All modelled time: transfers, queueing, word reads, lookups."""
        return self.transfer_ns + self.wait_ns + self.word_ns


class _Line:
    """One 64-byte line of an idle mask: who holds it, who wrote it last,
    and when it is busy being transferred."""

    __slots__ = ("home", "sharers", "writer", "starts", "ends", "busy_ns")

    def __init__(self, home: int):
        self.home = home        # node whose memory backs the line
        self.sharers = 0        # mask of CPUs with a valid copy
        self.writer = -1        # CPU that wrote last (-1: never, data is in memory)
        self.starts: list[float] = []   # booked transfers, sorted, not overlapping
        self.ends: list[float] = []
        self.busy_ns = 0.0      # total transfer time of this line (its occupancy)

    def book(self, at: float, cost: float, floor: float) -> float:
        """Book the earliest ``cost``-long slot starting at or after ``at``
        that does not overlap another transfer; return its start.

        A call's accesses are processed together, so a later access of an
        earlier call may already hold a slot in the future; a request that
        fits in the gap before it takes the gap (the line is never left idle
        while someone waits for it). Slots ending before ``floor`` (the
        current event time: no request can come earlier) are forgotten.
        """
        starts, ends = self.starts, self.ends
        # slots do not overlap and have a length, so ``ends`` is sorted too
        if ends and ends[0] <= floor:
            k = _bisect_right(ends, floor)
            del starts[:k], ends[:k]
        t = at
        i = _bisect_right(ends, t) if ends else 0
        n = len(starts)
        while i < n:
            if starts[i] >= t + cost:
                break
            t = ends[i]
            i += 1
        starts.insert(i, t)
        ends.insert(i, t + cost)
        return t


class IdleCpumask:
    """One idle cpumask (``struct cpumask``) whose every access is accounted.

    ``bits`` is the mask (bit i = CPU i). The methods are the kernel's
    cpumask operations that ext/idle.c applies to idle masks; each one charges
    the words and lines it touches to the owning :class:`IdleMasks`.
    """

    __slots__ = ("bits", "owner", "lines", "name")

    def __init__(self, owner: "IdleMasks", home: int, name: str,
                 lines: "list[_Line] | None" = None):
        self.bits = 0
        self.owner = owner
        self.name = name
        # ``lines``: share another mask's lines (layout "shared-line")
        self.lines = lines if lines is not None else [_Line(home) for _ in range(owner.nlines)]

    # reading ---------------------------------------------------------------
    def _read_words(self, first_word: int, last_word: int) -> None:
        """Charge reading words first_word..last_word (inclusive)."""
        if last_word < first_word:
            return
        o = self.owner
        n = last_word - first_word + 1
        st = o.stats
        st.words_read += n
        w = n * o.cost.word_ns
        st.word_ns += w
        o.now += w
        lo, hi = first_word >> 3, last_word >> 3
        if lo == hi:                    # the common case: one line
            o._access(self.lines[lo], False)
            return
        for li in range(lo, hi + 1):
            o._access(self.lines[li], False)

    def _write_words(self, first_word: int, last_word: int) -> None:
        o = self.owner
        lo, hi = first_word >> 3, last_word >> 3
        if lo == hi:
            o._access(self.lines[lo], True)
            return
        for li in range(lo, hi + 1):
            o._access(self.lines[li], True)

    def _site(self, op: str, write: bool) -> None:
        """Count one cpumask operation at the current kernel function
        (``IdleMasks.fn``) when ``IdleMasks.sites`` is on (replay)."""
        key = (self.owner.fn, op, self.name.rsplit(".", 1)[-1])
        d = self.owner.sites
        r = d.setdefault(key, [0, 0])
        r[1 if write else 0] += 1

    def test_cpu(self, cpu: int) -> bool:
        """``cpumask_test_cpu()``: reads one word."""
        if self.owner.sites is not None:
            self._site("cpumask_test_cpu", False)
        w = cpu >> 6
        self._read_words(w, w)
        return bool(self.bits >> cpu & 1)

    def empty(self) -> bool:
        """``cpumask_empty()``: reads words until a set one."""
        if self.owner.sites is not None:
            self._site("cpumask_empty", False)
        last = self.owner.nwords - 1
        if self.bits:
            last = ((self.bits & -self.bits).bit_length() - 1) >> 6
        self._read_words(0, last)
        return not self.bits

    def intersects(self, other: int) -> bool:
        """``cpumask_intersects(other, self)``: reads words until one intersects."""
        if self.owner.sites is not None:
            self._site("cpumask_intersects", False)
        both = self.bits & other
        last = ((both & -both).bit_length() - 1) >> 6 if both else self.owner.nwords - 1
        self._read_words(0, last)
        return bool(both)

    def is_superset_of(self, other: int) -> bool:
        """``cpumask_subset(other, self)``: reads words until one is not covered."""
        if self.owner.sites is not None:
            self._site("cpumask_subset", False)
        missing = other & ~self.bits
        last = ((missing & -missing).bit_length() - 1) >> 6 if missing else self.owner.nwords - 1
        self._read_words(0, last)
        return not missing

    def any_and_distribute(self, allowed: int) -> int:
        """``cpumask_any_and_distribute(self, allowed)`` for the calling CPU.

        Finds the next CPU of ``self & allowed`` after this CPU's previous
        pick, wrapping around (``find_next_and_bit_wrap()``); returns
        ``nr_cpu_ids`` when there is none. Reads words from the start
        position to the hit, wrapping.
        """
        o = self.owner
        if o.sites is not None:
            self._site("cpumask_any_and_distribute", False)
        size = o.nr_cpu_ids
        prev = o.distribute_prev[o.this_cpu]
        offset = prev + 1
        both = self.bits & allowed
        nxt = size
        if offset < size:
            hi = both >> offset
            if hi:
                nxt = offset + (hi & -hi).bit_length() - 1
                self._read_words(offset >> 6, nxt >> 6)
            else:
                self._read_words(offset >> 6, o.nwords - 1)
        else:
            offset = size
        if nxt >= size and offset > 0:
            lo = both & ((1 << offset) - 1)
            if lo:
                nxt = (lo & -lo).bit_length() - 1
                self._read_words(0, nxt >> 6)
            else:
                self._read_words(0, (offset - 1) >> 6)
        if nxt < size:
            o.distribute_prev[o.this_cpu] = nxt
        return nxt

    # writing ---------------------------------------------------------------
    def test_and_clear_cpu(self, cpu: int) -> bool:
        """``cpumask_test_and_clear_cpu()``: a locked RMW on one word (x86
        ``lock btr`` takes the line exclusively even when the bit is clear)."""
        if self.owner.sites is not None:
            self._site("cpumask_test_and_clear_cpu", True)
        w = cpu >> 6
        self._write_words(w, w)
        was = bool(self.bits >> cpu & 1)
        self.bits &= ~(1 << cpu)
        return was

    def clear_cpu_nonatomic(self, cpu: int) -> None:
        """``__cpumask_clear_cpu()``: a plain store to one word."""
        if self.owner.sites is not None:
            self._site("__cpumask_clear_cpu", True)
        w = cpu >> 6
        self._write_words(w, w)
        self.bits &= ~(1 << cpu)

    def assign_cpu(self, cpu: int, value: bool) -> None:
        """``assign_cpu()``: ``set_bit()`` / ``clear_bit()``, a locked RMW."""
        if self.owner.sites is not None:
            self._site("assign_cpu", True)
        w = cpu >> 6
        self._write_words(w, w)
        if value:
            self.bits |= 1 << cpu
        else:
            self.bits &= ~(1 << cpu)

    def andnot(self, other: int) -> None:
        """``cpumask_andnot(self, self, other)``: reads and stores every word."""
        if self.owner.sites is not None:
            self._site("cpumask_andnot", True)
        self._read_words(0, self.owner.nwords - 1)
        self._write_words(0, self.owner.nwords - 1)
        self.bits &= ~other

    def or_(self, other: int) -> None:
        """``cpumask_or(self, self, other)``: reads and stores every word."""
        if self.owner.sites is not None:
            self._site("cpumask_or", True)
        self._read_words(0, self.owner.nwords - 1)
        self._write_words(0, self.owner.nwords - 1)
        self.bits |= other


@dataclass
class ScxIdleCpus:
    """``struct scx_idle_cpus``: the idle CPUs and the wholly idle cores."""

    cpu: IdleCpumask
    smt: IdleCpumask


class IdleMasks:
    """The state ext/idle.c keeps, plus the accounting.

    Inputs: a :class:`Topology`; ``per_node`` selects
    ``SCX_OPS_BUILTIN_IDLE_PER_NODE``; ``cost`` the :class:`CostModel`;
    ``node_order``: ``"walk"`` (the kernel's ``for_each_node_numadist()``,
    O(N^2) distance lookups per walk) or ``"cached"`` (a per-node visiting
    order computed once, the optimisation the kernel comment suggests);
    ``layout``: ``"own-line"`` or ``"shared-line"`` (see the module
    docstring); ``guard_exit``: the read-guarded idle exit (not the kernel).

    ``smt_mask`` holds each CPU's *online* siblings (``cpu_smt_mask()``), and
    ``smt_active`` is ``sched_smt_active()``: some online CPU has an online
    sibling. ``local_dsq_nr[cpu]`` is the length of that CPU's local DSQ,
    which only the ``SCX_WAKE_SYNC`` branch reads; the caller keeps it.
    ``curr_idle[cpu]`` is ``is_idle_task(rq->curr)``, kept by the
    ``kernel/sched/idle.c`` hooks (:func:`task_to_idle`, :func:`idle_to_task`).
    ``sites``: None, or a dict counting each cpumask operation by kernel
    function, operation and mask (``replay()`` turns it on).

    The caller sets ``now`` (ns) and ``this_cpu`` (the CPU running the code)
    before each call; accesses advance ``now`` by their modelled cost. A
    simulator processing calls in time order also sets ``floor`` (the
    current event time), which lets the lines forget past transfers.

    >>> from numalab.topology.synthetic import from_synthetic
    >>> m = IdleMasks(from_synthetic("numa:2 core:2 pu:2"), per_node=True)
    >>> m.this_cpu = 0
    >>> scx_select_cpu_dfl(m, 5)      # everything idle: prev_cpu's core is idle
    5
    """

    def __init__(self, topo: Topology, per_node: bool = False,
                 cost: CostModel | None = None, node_order: str = "walk",
                 layout: str = "own-line", guard_exit: bool = False):
        if node_order not in ("walk", "cached"):
            raise IdleError(f"node_order {node_order!r} is not 'walk' or 'cached'")
        if layout not in LAYOUTS:
            raise IdleError(f"layout {layout!r} is not one of {', '.join(LAYOUTS)}")
        self.layout = layout
        self.guard_exit = bool(guard_exit)
        self.topo = topo
        self.per_node = bool(per_node)
        self.cost = cost or CostModel()
        self.node_order = node_order
        self.nr_cpu_ids = max(topo.nr_cpu_ids, max(topo.cpus, default=-1) + 1, 1)
        self.nwords = math.ceil(self.nr_cpu_ids / WORD_BITS)
        self.nlines = math.ceil(self.nr_cpu_ids / LINE_BITS)
        self.online = topo.online or sum(1 << c for c in topo.cpus)
        self.possible = topo.possible or self.online
        self.node_ids = [n for n in topo.node_ids]
        self.nr_node_ids = max(self.node_ids, default=0) + 1
        # A CPU without a node (dumps lacking NUMA info) belongs to node 0.
        self.cpu_node = [0] * self.nr_cpu_ids
        self.smt_mask = [1 << c for c in range(self.nr_cpu_ids)]
        self.llc_mask = [0] * self.nr_cpu_ids
        for c, info in topo.cpus.items():
            self.cpu_node[c] = info.node if info.node >= 0 else 0
            # cpu_smt_mask(): the online siblings (an offline CPU is not even
            # its own sibling; keep it alone so loops over it terminate)
            self.smt_mask[c] = (info.thread_siblings & self.online) or (1 << c)
            self.llc_mask[c] = info.llc_cpus
        self.node_mask = {n: 0 for n in self.node_ids or [0]}
        for c in _cpus(self.online):
            self.node_mask.setdefault(self.cpu_node[c], 0)
            self.node_mask[self.cpu_node[c]] |= 1 << c
        # N_ONLINE includes memory-only nodes: the walk visits them too
        self.online_nodes = sorted(self.node_mask)
        self.online_nodemask = sum(1 << n for n in self.online_nodes)
        self.possible_nodemask = sum(1 << n for n in self.node_mask)
        self._dist = {(a, b): topo.distance(a, b) if topo.nodes else (10 if a == b else 20)
                      for a in self.node_mask for b in self.node_mask}
        # sched_smt_active(): some online CPU has another online sibling
        self.smt_active = any(m & (m - 1) for c, m in enumerate(self.smt_mask)
                              if self.online >> c & 1)
        # hoisted for _access(): each CPU's own node's CPUs, the nodes
        self._own_node_bits = [self.node_mask.get(self.cpu_node[c], 0)
                               for c in range(self.nr_cpu_ids)]
        self._node_items = list(self.node_mask.items())
        self._serialize = self.cost.serialize
        self.local_dsq_nr = [0] * self.nr_cpu_ids
        # is_idle_task(rq->curr) per CPU: every online CPU starts idle, as
        # reset_idle_masks() assumes
        self.curr_idle = [bool(self.online >> c & 1) for c in range(self.nr_cpu_ids)]
        # per-site operation counts, {(function, cpumask op, mask): [reads, writes]};
        # None (the default) counts nothing, replay() turns it on
        self.sites: dict[tuple[str, str, str], list[int]] | None = None
        self.fn = ""                # the kernel function running (for sites)
        # claims: None, or a list of (cpu, claimed) per scx_idle_test_and_clear_cpu()
        self.claims: list[tuple[int, bool]] | None = None
        # current->flags & PF_EXITING of the waker (the WAKE_SYNC branch checks it)
        self.waker_exiting = False
        self._lat = self._latency_table()
        self.now = 0.0
        self.floor = 0.0        # no future call starts before this time (ns)
        self.this_cpu = 0
        self.stats = Stats()
        self.distribute_prev = [0] * self.nr_cpu_ids   # distribute_cpu_mask_prev
        # Allocations: the global pair on node 0 (boot), one pair per node.
        self.global_masks = self._pair(0, "global")
        self.node_masks = {n: self._pair(n, f"node{n}") for n in self.node_mask}
        self._order_cache = {n: node_visit_order(self, n) for n in self.node_mask}
        scx_idle_update_selcpu_topology(self)
        reset_idle_masks(self)

    @property
    def shares_line(self) -> bool:
        """True when a pair's ``cpu`` and ``smt`` masks sit in the same
        line(s): layout ``"shared-line"`` and two masks fit in one line."""
        return self.layout == "shared-line" and 2 * self.nwords * WORD_BITS <= LINE_BITS

    def _pair(self, home: int, name: str) -> ScxIdleCpus:
        cpu = IdleCpumask(self, home, f"{name}.cpu")
        smt = IdleCpumask(self, home, f"{name}.smt", lines=cpu.lines if self.shares_line else None)
        return ScxIdleCpus(cpu, smt)

    # -- cost model ------------------------------------------------------------
    def _latency_table(self) -> dict[tuple[int, int], float]:
        c = self.cost
        ids = sorted(self.node_mask)
        if c.latency_ns is not None:
            mat = c.latency_ns
            if len(mat) != len(ids) or any(len(r) != len(ids) for r in mat):
                raise IdleError(f"latency matrix must be {len(ids)}x{len(ids)} (one row per node)")
            return {(a, b): float(mat[i][j]) for i, a in enumerate(ids) for j, b in enumerate(ids)}
        return {(a, b): c.local_ns if a == b else c.local_ns * self._dist[a, b] / 10 * c.remote_factor
                for a in ids for b in ids}

    def charge_lookups(self, n: int) -> None:
        """Charge ``n`` ``node_distance()`` lookups (``lookup_ns`` each)."""
        self.stats.dist_lookups += n
        self.now += n * self.cost.lookup_ns
        self.stats.word_ns += n * self.cost.lookup_ns

    def _access(self, line: _Line, write: bool) -> None:
        """Classify one line access by ``this_cpu``, time it, update the line.
        (The hottest code of the simulation: attribute lookups are hoisted.)"""
        c = self.this_cpu
        cpu_node = self.cpu_node
        n = cpu_node[c]
        bit = 1 << c
        st = self.stats
        sharers = line.sharers
        writer = line.writer
        if write:
            st.writes += 1
            if writer >= 0:
                src = cpu_node[writer]
                if src != n:
                    st.cross_node_writes += 1
            else:
                src = line.home
            others = sharers & ~bit
            if src == n and writer >= 0 and others & ~self._own_node_bits[c]:
                st.remote_copy_invalidations += 1
            line.sharers = bit
            line.writer = c
            if sharers == bit or (writer == c and not others):
                st.write_hits += 1
                return                  # a hit costs nothing
            # Ownership: every other copy is invalidated; the slowest
            # holder (or memory, if nobody holds it) sets the time.
            lat = self._lat
            cost = 0.0
            remote = False
            if others:
                for m, mk in self._node_items:
                    if others & mk:
                        x = lat[n, m]
                        if x > cost:
                            cost = x
                        if m != n:
                            remote = True
            else:
                cost = lat[n, src]
                remote = src != n
            if remote:
                st.write_remote += 1
            else:
                st.write_local += 1
        else:
            st.line_reads += 1
            if sharers & bit:
                st.read_hits += 1
                return
            lat = self._lat
            if sharers & self._own_node_bits[c]:
                cost = lat[n, n]
                st.read_local += 1
            else:
                src = cpu_node[writer] if writer >= 0 else line.home
                cost = lat[n, src]
                if src == n:
                    st.read_local += 1
                else:
                    st.read_remote += 1
            line.sharers = sharers | bit
        if cost:
            now = self.now
            start = now
            if self._serialize:
                start = line.book(now, cost, self.floor)
                st.wait_ns += start - now
            self.now = start + cost
            line.busy_ns += cost
            st.transfer_ns += cost

    def reset_stats(self) -> Stats:
        """Return the counts so far and start new ones."""
        old, self.stats = self.stats, Stats()
        return old

    # -- views -----------------------------------------------------------------
    def idle_cpus(self) -> int:
        """Every idle CPU (union of the masks in use), without accounting."""
        if self.per_node:
            return sum(m.cpu.bits for m in self.node_masks.values())
        return self.global_masks.cpu.bits

    def idle_cores(self) -> int:
        """CPUs whose whole core is idle (the smt masks), without accounting."""
        if self.per_node:
            return sum(m.smt.bits for m in self.node_masks.values())
        return self.global_masks.smt.bits

    def lines(self) -> dict[str, list[_Line]]:
        """Every idle-mask cache line in use, by mask name."""
        sets = list(self.node_masks.values()) if self.per_node else [self.global_masks]
        if self.shares_line:
            return {s.cpu.name.replace(".cpu", ".cpu+smt"): s.cpu.lines for s in sets}
        return {m.name: m.lines for s in sets for m in (s.cpu, s.smt)}


# --------------------------------------------------------------------------
# The node walk: include/linux/topology.h, mm/mempolicy.c
# --------------------------------------------------------------------------

def for_each_node_numadist(m: IdleMasks, node: int, unvisited: int) -> Iterator[int]:
    """``for_each_node_numadist(node, unvisited)``: the nodes of ``unvisited``
    by increasing distance from ``node`` (ties: lowest id), with its cost
    counted.

    The walk is :func:`numalab.kernel.sched.topology.for_each_node_numadist`
    (the shared port of ``include/linux/topology.h``); this wrapper charges
    what the kernel pays: every step calls ``nearest_node_nodemask()``, which
    looks up the distance to each node still unvisited -- (N-1) + (N-2) + ...
    lookups, O(N^2) for N nodes. A walk that runs to the end makes one more
    call on the empty mask (no lookup).

    >>> from numalab.topology.synthetic import from_synthetic
    >>> t = from_synthetic("numa:3 core:1", distances=[[10, 30, 20], [30, 10, 20], [20, 20, 10]])
    >>> m = IdleMasks(t)
    >>> list(for_each_node_numadist(m, 0, 0b110)), m.stats.dist_lookups
    ([2, 1], 3)
    """
    remaining = unvisited
    for n in _shared_numadist(m.topo, node, unvisited):
        m.charge_lookups(remaining.bit_count())
        yield n
        remaining &= ~(1 << n)


def node_visit_order(m_or_topo: "IdleMasks | Topology", node: int) -> list[int]:
    """Every other online node in the order the per-node search visits them
    from ``node`` (what ``for_each_node_numadist()`` yields once ``node`` is
    cleared from ``N_ONLINE``), without counting lookups. Accepts a Topology
    or an IdleMasks. This is the per-node array the kernel comment proposes
    to cache.

    >>> from numalab.topology.synthetic import from_synthetic
    >>> t = from_synthetic("numa:4 core:1", distances=[[10, 20, 30, 20], [20, 10, 20, 30],
    ...                                                  [30, 20, 10, 20], [20, 30, 20, 10]])
    >>> node_visit_order(t, 0)
    [1, 3, 2]
    """
    topo = m_or_topo.topo if isinstance(m_or_topo, IdleMasks) else m_or_topo
    online = sum(1 << n for n in topo.node_ids) or 1
    return list(_shared_numadist(topo, node, online & ~(1 << node)))


def numadist_walk_lookups(nr_nodes: int, visited: int | None = None) -> int:
    """Distance lookups of one full ``for_each_node_numadist()`` walk over
    ``nr_nodes - 1`` unvisited nodes: (N-1) + (N-2) + ... + 1 = N(N-1)/2.
    With ``visited`` < N-1, the walk stopped after that many nodes.

    >>> numadist_walk_lookups(8)
    28
    """
    k = nr_nodes - 1
    v = k if visited is None else min(visited, k)
    # the i-th call scans k - i nodes; a complete walk ends with one call on
    # an empty mask, which scans nothing
    return sum(k - i for i in range(v))


# --------------------------------------------------------------------------
# kernel/sched/ext/idle.c (7.2) and its callers in kernel/sched/idle.c
# --------------------------------------------------------------------------

def idle_cpumask(m: IdleMasks, node: int) -> ScxIdleCpus:
    """The idle masks of ``node``; ``NUMA_NO_NODE`` is the global pair."""
    return m.global_masks if node == NUMA_NO_NODE else m.node_masks[node]


def scx_cpu_node_if_enabled(m: IdleMasks, cpu: int) -> int:
    """``cpu``'s node with per-node masks, else ``NUMA_NO_NODE``."""
    if not m.per_node:
        return NUMA_NO_NODE
    return m.cpu_node[cpu]


def scx_idle_test_and_clear_cpu(m: IdleMasks, cpu: int) -> bool:
    """Claim ``cpu``: True when it was idle (and is now taken).

    With SMT the core leaves the idle-core mask whether or not the claim
    succeeds; the mask is read first so that an already-clear core is not
    stored to again (idle.c:79-110; the ``cpumask_intersects()`` guard is
    already in 6.12's ``kernel/sched/ext.c``).
    """
    m.fn = "scx_idle_test_and_clear_cpu"
    node = scx_cpu_node_if_enabled(m, cpu)
    idle_cpus = idle_cpumask(m, node).cpu
    if m.smt_active:
        smt = m.smt_mask[cpu]
        idle_smts = idle_cpumask(m, node).smt
        if idle_smts.intersects(smt):
            idle_smts.andnot(smt)
        elif idle_smts.test_cpu(cpu):
            idle_smts.clear_cpu_nonatomic(cpu)
    ok = idle_cpus.test_and_clear_cpu(cpu)
    if m.claims is not None:
        m.claims.append((cpu, ok))
    return ok


def pick_idle_cpu_in_node(m: IdleMasks, cpus_allowed: int, node: int, flags: int) -> int:
    """Pick and claim an idle CPU of ``cpus_allowed`` in ``node``'s masks
    (the global masks for ``NUMA_NO_NODE``); a whole idle core first when SMT
    is active; ``-EBUSY`` when none (or no idle core with
    ``SCX_PICK_IDLE_CORE``)."""
    while True:
        cpu = m.nr_cpu_ids
        m.fn = "pick_idle_cpu_in_node"
        if m.smt_active:
            cpu = idle_cpumask(m, node).smt.any_and_distribute(cpus_allowed)
            if cpu >= m.nr_cpu_ids and flags & SCX_PICK_IDLE_CORE:
                return -EBUSY
        if cpu >= m.nr_cpu_ids:
            m.fn = "pick_idle_cpu_in_node"
            cpu = idle_cpumask(m, node).cpu.any_and_distribute(cpus_allowed)
            if cpu >= m.nr_cpu_ids:
                return -EBUSY
        if scx_idle_test_and_clear_cpu(m, cpu):
            return cpu
        # lost the race (or a stale smt bit): retry


def pick_idle_cpu_from_online_nodes(m: IdleMasks, cpus_allowed: int, node: int, flags: int) -> int:
    """Search every other online node, nearest first (``node`` itself has
    been searched already). The kernel walks with ``for_each_node_numadist``;
    ``m.node_order == "cached"`` uses a precomputed order instead."""
    cpu = -EBUSY
    if not m.online_nodemask & ~(1 << node):
        return cpu                  # no other online node: nothing to walk
    m.stats.walks += 1
    if m.node_order == "cached":
        order: Iterator[int] | list[int] = m._order_cache[node]
    else:
        unvisited = m.online_nodemask & ~(1 << node)
        order = for_each_node_numadist(m, node, unvisited)
    for n in order:
        cpu = pick_idle_cpu_in_node(m, cpus_allowed, n, flags)
        if cpu >= 0:
            break
    return cpu


def scx_pick_idle_cpu(m: IdleMasks, cpus_allowed: int, node: int, flags: int) -> int:
    """Find and claim an idle CPU, starting from ``node``."""
    cpu = pick_idle_cpu_in_node(m, cpus_allowed, node, flags)
    if cpu >= 0:
        return cpu
    if node == NUMA_NO_NODE or flags & SCX_PICK_IDLE_IN_NODE:
        return -EBUSY
    return pick_idle_cpu_from_online_nodes(m, cpus_allowed, node, flags)


def scx_idle_update_selcpu_topology(m: IdleMasks) -> None:
    """Decide whether the LLC and NUMA steps of :func:`scx_select_cpu_dfl`
    apply (``scx_selcpu_topo_llc`` / ``scx_selcpu_topo_numa``).

    LLC step: the first online CPU's LLC is smaller than the online CPUs.
    NUMA step (flat masks only): its node is smaller than the online CPUs and
    some online CPU's LLC differs in size from its node.
    """
    online = m.online
    nr_online = online.bit_count()
    first = (online & -online).bit_length() - 1 if online else 0
    llc_w = m.llc_mask[first].bit_count()
    m.topo_llc = 0 < llc_w < nr_online
    m.topo_numa = False
    if not m.per_node:
        numa_w = m.node_mask.get(m.cpu_node[first], 0).bit_count()
        mismatch = any(m.llc_mask[c].bit_count() != m.node_mask[m.cpu_node[c]].bit_count()
                       for c in _cpus(online))
        m.topo_numa = 0 < numa_w < nr_online and mismatch


def scx_select_cpu_dfl(m: IdleMasks, prev_cpu: int, wake_flags: int = 0,
                       cpus_allowed: int | None = None, flags: int = 0) -> int:
    """The built-in ``ops.select_cpu()`` policy; returns a claimed idle CPU
    or ``-EBUSY``. Steps, in the kernel's order:

    with ``SCX_WAKE_SYNC`` first (idle.c:525-561): ``prev_cpu`` if it shares
    the waker's LLC and is idle (claimed), else the waker's CPU when its
    local DSQ is empty and its node's idle mask is not -- claimed first
    (``scx_idle_test_and_clear_cpu(cpu)``, idle.c:558: a store to the
    waker's idle mask), returned whether or not the claim succeeds;
    with SMT: 1. ``prev_cpu`` if its whole core is idle; 2. a whole idle core
    in ``prev_cpu``'s LLC; 3. ... in its node (flat masks, when LLC != node);
    4. ... anywhere (per-node: ``prev_cpu``'s node, then the others by
    distance); stop here with ``SCX_PICK_IDLE_CORE``. Then: 5. ``prev_cpu``;
    6. its SMT siblings; 7. an idle CPU in the LLC; 8. ... in the node;
    9. ... anywhere.
    """
    if not 0 <= prev_cpu < m.nr_cpu_ids:
        raise IdleError(f"prev_cpu {prev_cpu} is not a CPU of this machine")
    allowed = m.possible if cpus_allowed is None else cpus_allowed & m.possible
    if not allowed:
        return -EBUSY
    node = scx_cpu_node_if_enabled(m, prev_cpu)
    is_prev_allowed = bool(allowed >> prev_cpu & 1)
    llc_cpus = numa_cpus = 0
    if m.topo_numa:
        numa_cpus = m.node_mask.get(m.cpu_node[prev_cpu], 0) & allowed
    if m.topo_llc:
        llc_cpus = m.llc_mask[prev_cpu] & allowed

    if wake_flags & SCX_WAKE_SYNC:
        # the waker's CPU is the one running this code
        cpu = m.this_cpu
        if (is_prev_allowed and m.llc_mask[cpu] >> prev_cpu & 1
                and scx_idle_test_and_clear_cpu(m, prev_cpu)):
            return prev_cpu
        waker_node = scx_cpu_node_if_enabled(m, cpu)
        m.fn = "scx_select_cpu_dfl"
        if (not m.waker_exiting and m.local_dsq_nr[cpu] == 0
                and (not flags & SCX_PICK_IDLE_IN_NODE or waker_node == node)
                and not idle_cpumask(m, waker_node).cpu.empty()):
            if allowed >> cpu & 1:
                # 7.2 (idle.c:558) claims the waker's CPU; the result is not
                # looked at: the waker's CPU is returned either way
                scx_idle_test_and_clear_cpu(m, cpu)
                m.stats.sync_waker_picks += 1
                return cpu

    if m.smt_active:
        m.fn = "scx_select_cpu_dfl"
        if (is_prev_allowed and idle_cpumask(m, node).smt.test_cpu(prev_cpu)
                and scx_idle_test_and_clear_cpu(m, prev_cpu)):
            return prev_cpu
        if llc_cpus:
            cpu = pick_idle_cpu_in_node(m, llc_cpus, node, SCX_PICK_IDLE_CORE)
            if cpu >= 0:
                return cpu
        if numa_cpus:
            cpu = pick_idle_cpu_in_node(m, numa_cpus, node, SCX_PICK_IDLE_CORE)
            if cpu >= 0:
                return cpu
        cpu = scx_pick_idle_cpu(m, allowed, node, flags | SCX_PICK_IDLE_CORE)
        if cpu >= 0:
            return cpu
        if flags & SCX_PICK_IDLE_CORE:
            return -EBUSY

    if is_prev_allowed and scx_idle_test_and_clear_cpu(m, prev_cpu):
        return prev_cpu

    if m.smt_active:
        for cpu in _cpus(m.smt_mask[prev_cpu] & allowed):
            if cpu == prev_cpu:
                continue
            if scx_idle_test_and_clear_cpu(m, cpu):
                return cpu

    if llc_cpus:
        cpu = pick_idle_cpu_in_node(m, llc_cpus, node, 0)
        if cpu >= 0:
            return cpu
    if numa_cpus:
        cpu = pick_idle_cpu_in_node(m, numa_cpus, node, 0)
        if cpu >= 0:
            return cpu
    return scx_pick_idle_cpu(m, allowed, node, flags)


def update_builtin_idle(m: IdleMasks, cpu: int, idle: bool) -> None:
    """Set or clear ``cpu`` in its idle mask (its node's with per-node masks)
    and keep the idle-core mask in step: the core enters it only when all its
    threads are idle, and leaves it as soon as one is busy. The kernel stores
    unconditionally (``assign_cpu()``, ``cpumask_andnot()``), even when a
    waker's claim already cleared the bits; ``m.guard_exit`` reads first on
    the way out of idle (the alternative, not the kernel).

    >>> from numalab.topology.synthetic import from_synthetic
    >>> t = from_synthetic("numa:1 core:2 pu:2")
    >>> for guard in (False, True):
    ...     m = IdleMasks(t, guard_exit=guard)
    ...     m.this_cpu = 2
    ...     claimed = scx_idle_test_and_clear_cpu(m, 0)   # a waker on CPU 2 claims CPU 0
    ...     m.this_cpu = 0
    ...     before = m.stats.writes
    ...     update_builtin_idle(m, 0, False)              # CPU 0 leaves idle
    ...     print(guard, m.stats.writes - before)
    False 2
    True 0
    """
    m.fn = "update_builtin_idle"
    node = scx_cpu_node_if_enabled(m, cpu)
    idle_cpus = idle_cpumask(m, node).cpu
    if m.guard_exit and not idle:
        # the alternative, not the kernel: read first, store only a set bit
        if idle_cpus.test_cpu(cpu):
            idle_cpus.assign_cpu(cpu, False)
    else:
        idle_cpus.assign_cpu(cpu, idle)
    if m.smt_active:
        smt = m.smt_mask[cpu]
        idle_smts = idle_cpumask(m, node).smt
        if m.guard_exit and not idle:
            if idle_smts.intersects(smt):
                idle_smts.andnot(smt)
            return
        if idle:
            # racy in the kernel, self-correcting; sequential here
            if not idle_cpus.is_superset_of(smt):
                return
            idle_smts.or_(smt)
        else:
            idle_smts.andnot(smt)


def __scx_update_idle(m: IdleMasks, cpu: int, idle: bool, do_notify: bool = True,
                      prev_was_idle: bool | None = None) -> None:
    """``__scx_update_idle(rq, idle, do_notify)`` for ``cpu``'s runqueue
    (idle.c:751).

    The masks change on real transitions (``do_notify``) and on idle-to-idle
    refreshes: ``do_notify`` false while the idle task is ``rq->curr``
    (``prev_was_idle``; None, the default, reads ``m.curr_idle[cpu]``). Run
    it with ``m.this_cpu == cpu``: the kernel always runs it on the CPU itself.
    """
    if not 0 <= cpu < m.nr_cpu_ids:
        raise IdleError(f"CPU {cpu} is not a CPU of this machine")
    if prev_was_idle is None:
        prev_was_idle = m.curr_idle[cpu]
    if do_notify or prev_was_idle:
        update_builtin_idle(m, cpu, idle)


scx_update_idle = __scx_update_idle   # importable without the leading underscores


# kernel/sched/idle.c (7.2): the idle class's hooks that call scx_update_idle().
# In __schedule() rq->curr is still the previous task while they run.

def put_prev_task_idle(m: IdleMasks, cpu: int) -> None:
    """The idle task is switched out (idle.c:483-488): ``scx_update_idle(rq,
    false, true)`` -- the idle exit, a real transition."""
    __scx_update_idle(m, cpu, False, True)


def set_next_task_idle(m: IdleMasks, cpu: int) -> None:
    """The idle task is switched in (idle.c:490-502): ``scx_update_idle(rq,
    true, true)`` -- the idle entry, a real transition."""
    __scx_update_idle(m, cpu, True, True)


def pick_task_idle(m: IdleMasks, cpu: int) -> None:
    """The idle class is picked (idle.c:504-508): ``scx_update_idle(rq, true,
    false)``, which writes the masks only when the idle task was already
    ``rq->curr`` (the idle->idle refresh)."""
    __scx_update_idle(m, cpu, True, False)


def task_to_idle(m: IdleMasks, cpu: int) -> None:
    """``cpu``'s task blocks and nothing is queued: ``pick_task_idle()`` (a
    task is still ``rq->curr``: no write), then ``set_next_task_idle()``
    (the idle entry); the idle task becomes ``rq->curr``."""
    pick_task_idle(m, cpu)
    set_next_task_idle(m, cpu)
    m.curr_idle[cpu] = True


def idle_to_task(m: IdleMasks, cpu: int) -> None:
    """An idle ``cpu`` starts a task: ``put_prev_task_idle()`` (the idle
    exit); the task becomes ``rq->curr``."""
    put_prev_task_idle(m, cpu)
    m.curr_idle[cpu] = False


def idle_to_idle(m: IdleMasks, cpu: int) -> None:
    """An idle ``cpu`` reschedules (a kick, a claim whose task went
    elsewhere) and finds nothing to run: ``pick_task_idle()`` with the idle
    task as ``rq->curr`` refreshes the masks (``update_builtin_idle(cpu,
    true)``: ``assign_cpu()`` stores the bit again); ``put_prev_set_next_task()``
    returns early (``next == prev``), so no other hook runs."""
    pick_task_idle(m, cpu)


def reset_idle_masks(m: IdleMasks) -> None:
    """Every online CPU idle (what ``scx_idle_enable()`` starts from); the
    masks are written without accounting (this happens once, at load)."""
    for s in [m.global_masks, *m.node_masks.values()]:
        s.cpu.bits = s.smt.bits = 0
    if not m.per_node:
        m.global_masks.cpu.bits = m.online
        m.global_masks.smt.bits = m.online
        return
    for n, s in m.node_masks.items():
        s.cpu.bits = m.online & m.node_mask[n]
        s.smt.bits = m.online & m.node_mask[n]


def validate_node(m: IdleMasks, node: int) -> int:
    """What the ``*_node()`` kfuncs check before touching a per-node mask
    (``validate_node()``): per-node tracking on (else ``-EOPNOTSUPP`` and
    an scx error), ``NUMA_NO_NODE`` -> ``-ENOENT`` (not an error), the id in
    ``[0, nr_node_ids)`` and a possible node (else ``-EINVAL``, error).
    Returns the node or a negative errno; raises nothing."""
    if not m.per_node:
        return -95          # -EOPNOTSUPP
    if node == NUMA_NO_NODE:
        return -2           # -ENOENT
    if node < 0 or node >= m.nr_node_ids:
        return -22          # -EINVAL
    if not m.possible_nodemask >> node & 1:
        return -22
    return node


# --------------------------------------------------------------------------
# Replay: a recorded sequence of idle transitions and wakeups through the port
# --------------------------------------------------------------------------

class ReplayError(IdleError):
    """A recorded event the replay cannot run (unknown op, missing field)."""


_REPLAY_OPS = ("enter", "exit", "refresh", "select")


def _core_of(m: IdleMasks, cpu: int) -> int:
    """A core's id: its lowest (online) thread."""
    sib = m.smt_mask[cpu]
    return (sib & -sib).bit_length() - 1


def landing(m: IdleMasks, prev_cpu: int, waker: int, cpu: int) -> str:
    """Where a wakee landed, by place rather than CPU id: ``"-EBUSY"``,
    ``"prev_cpu"``, ``"prev core"`` (an SMT sibling of prev_cpu),
    ``"waker cpu"``, ``"prev node"`` (another core of prev_cpu's node) or
    ``"other node"``.

    >>> from numalab.topology.synthetic import from_synthetic
    >>> m = IdleMasks(from_synthetic("numa:2 core:2 pu:2"))
    >>> [landing(m, 0, 7, c) for c in (-16, 0, 1, 7, 2, 4)]
    ['-EBUSY', 'prev_cpu', 'prev core', 'waker cpu', 'prev node', 'other node']
    """
    if cpu < 0:
        return "-EBUSY"
    if cpu == prev_cpu:
        return "prev_cpu"
    if _core_of(m, cpu) == _core_of(m, prev_cpu):
        return "prev core"
    if cpu == waker:
        return "waker cpu"
    if m.cpu_node[cpu] == m.cpu_node[prev_cpu]:
        return "prev node"
    return "other node"


def _load_masks(m: IdleMasks, masks: dict) -> None:
    """Set the idle masks to a recorded state (no accounting): ``{node: (cpu,
    smt)}``, node -1 the global pair; a mode's masks missing from the record
    are left as they are."""
    for node, (cpu_bits, smt_bits) in masks.items():
        node = int(node)
        if node == NUMA_NO_NODE:
            pair = m.global_masks
        elif node in m.node_masks:
            pair = m.node_masks[node]
        else:
            raise ReplayError(f"recorded masks name node {node}, which {m.topo.name} lacks")
        pair.cpu.bits, pair.smt.bits = int(cpu_bits), int(smt_bits)


def replay(topo: Topology, events, per_node: bool = False, busy: Sequence[int] = (),
           cost: CostModel | None = None, layout: str = "own-line") -> dict:
    """Run a recorded sequence through the 7.2 port and count what it does.

    Inputs: the machine (a :class:`Topology`); ``per_node``
    (``SCX_OPS_BUILTIN_IDLE_PER_NODE``); ``busy``: CPUs running a task when
    the record starts (every other online CPU idle, as after
    ``reset_idle_masks()``); ``events``: dicts in time order, each with
    ``op`` and:

    * ``"enter"``, ``cpu``: the CPU's task blocks, it goes idle
      (:func:`task_to_idle`);
    * ``"exit"``, ``cpu``: an idle CPU starts a task (:func:`idle_to_task`);
    * ``"refresh"``, ``cpu``: an idle CPU reschedules into idle again
      (:func:`idle_to_idle`);
    * ``"select"``, ``prev_cpu``, ``waker`` (the CPU running
      ``select_cpu``), optional ``wake_flags`` (e.g. ``SCX_WAKE_SYNC``),
      ``flags`` (``SCX_PICK_IDLE_*``), ``local_dsq_nr`` (the waker's local
      DSQ length, default 0) or ``dsq_nr`` (every CPU's), ``allowed`` (the
      task's CPU mask; None: every CPU), ``exiting`` (the waker's
      ``PF_EXITING``), ``masks`` (``{node or -1: (cpu bits, smt bits)}``: the
      real kernel's idle masks at entry, loaded into the port before the call
      so that each select is checked from the kernel's own state) and ``pick``
      (the CPU the real kernel chose, or a negative errno):
      :func:`scx_select_cpu_dfl`.

    A select does not change which task runs where: the record's own
    ``exit``/``enter`` events do. Output: a dict with ``sites`` (``{"function
    / cpumask op / mask": {"reads": n, "writes": n}}``, each cpumask operation
    counted once), ``selects``, ``transitions`` (by op), ``writes``,
    ``line_writes`` and ``cross_node_writes`` (cache lines, from
    :class:`Stats`), ``writes_per_select`` (operations that store, over
    selects), ``picks`` (the port's, in order), ``claims`` (per select, the
    port's ``(cpu, claimed)`` tries), ``landed`` (counts of
    :func:`landing`), ``cross_node_picks``, ``mismatches`` (selects whose
    recorded ``pick`` differs from the port's: index, recorded, port) and
    ``recorded_picks`` (how many selects carried a recorded pick).

    >>> from numalab.topology.synthetic import from_synthetic
    >>> t = from_synthetic("numa:2 core:2 pu:2")
    >>> r = replay(t, [{"op": "select", "prev_cpu": 0, "waker": 5, "pick": 0},
    ...                {"op": "exit", "cpu": 0}, {"op": "enter", "cpu": 0}])
    >>> r["picks"], r["mismatches"], r["transitions"]
    ([0], [], {'enter': 1, 'exit': 1, 'refresh': 0})
    """
    m = IdleMasks(topo, per_node=per_node, cost=cost, layout=layout)
    for c in busy:
        if not m.online >> c & 1:
            raise ReplayError(f"busy CPU {c} is not an online CPU of {topo.name}")
        m.this_cpu = c
        idle_to_task(m, c)
    m.reset_stats()
    m.sites = {}
    picks: list[int] = []
    claims: list[list[tuple[int, bool]]] = []
    landed: dict[str, int] = {}
    mismatches: list[dict] = []
    transitions = {"enter": 0, "exit": 0, "refresh": 0}
    recorded = cross = 0
    for i, ev in enumerate(events):
        op = ev.get("op")
        if op not in _REPLAY_OPS:
            raise ReplayError(f"event {i}: op {op!r} is not one of {', '.join(_REPLAY_OPS)}")
        try:
            if op == "select":
                prev, waker = int(ev["prev_cpu"]), int(ev["waker"])
                m.this_cpu = waker
                if ev.get("dsq_nr") is not None:
                    for c, nr in enumerate(ev["dsq_nr"][:m.nr_cpu_ids]):
                        m.local_dsq_nr[c] = int(nr)
                else:
                    m.local_dsq_nr[waker] = int(ev.get("local_dsq_nr", 0))
                if ev.get("masks"):
                    _load_masks(m, ev["masks"])
                m.waker_exiting = bool(ev.get("exiting", False))
                m.claims = []
                allowed = ev.get("allowed")
                cpu = scx_select_cpu_dfl(m, prev, int(ev.get("wake_flags", 0)),
                                         None if allowed is None else int(allowed),
                                         int(ev.get("flags", 0)))
                claims.append(m.claims)
                m.claims = None
                picks.append(cpu)
                where = landing(m, prev, waker, cpu)
                landed[where] = landed.get(where, 0) + 1
                cross += cpu >= 0 and m.cpu_node[cpu] != m.cpu_node[prev]
                if "pick" in ev and ev["pick"] is not None:
                    recorded += 1
                    want = int(ev["pick"])
                    if (want < 0) != (cpu < 0) or (want >= 0 and want != cpu):
                        mismatches.append({"index": i, "recorded": want, "port": cpu})
            else:
                cpu = int(ev["cpu"])
                if not 0 <= cpu < m.nr_cpu_ids:
                    raise ReplayError(f"event {i}: CPU {cpu} is not a CPU of {topo.name}")
                m.this_cpu = cpu
                {"enter": task_to_idle, "exit": idle_to_task, "refresh": idle_to_idle}[op](m, cpu)
                transitions[op] += 1
        except KeyError as e:
            raise ReplayError(f"event {i} ({op}) lacks the field {e.args[0]!r}") from None
    sites = {f"{fn} / {op} / {mask}": {"reads": r, "writes": w}
             for (fn, op, mask), (r, w) in sorted(m.sites.items())}
    store_ops = sum(w for _, w in m.sites.values())
    st = m.stats
    return {"machine": topo.name, "per_node": bool(per_node), "sites": sites,
            "selects": len(picks), "transitions": transitions,
            "writes": store_ops, "line_writes": st.writes,
            "cross_node_writes": st.cross_node_writes,
            "writes_per_select": store_ops / len(picks) if picks else float("nan"),
            "picks": picks, "claims": claims, "landed": landed, "cross_node_picks": int(cross),
            "mismatches": mismatches, "recorded_picks": recorded}
