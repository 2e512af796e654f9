"""Contention model: one shared reference count versus per-CPU counters.

``refcount_t`` is one atomic word. Every ``refcount_inc()`` / ``refcount_dec()``
is a locked read-modify-write, so the CPU doing it must own the cache line
holding the word. When the previous writer was another CPU, the line has to
travel; how long that takes depends on where the previous writer sits: the
SMT sibling (same core), the same cluster or last-level cache, the same NUMA
node, or another node (further still with a larger SLIT distance).

``percpu_ref`` in percpu mode turns get/put into ``this_cpu_add()`` on a
counter private to each CPU: no line ever moves, whatever the number of CPUs.

The model simulates ``k`` CPUs, each handling *items* (skb fragments on the
devmem hot path). An item costs ``work_ns`` of other work and ``ops_per_item``
reference operations. In ``"shared"`` mode the operations queue for the one
cache line (first come, first served) and each costs a transfer from its
previous owner; in ``"percpu"`` mode each costs ``op_local_ns``. Two regimes:

* **saturated** (``rate_per_cpu=None``): every CPU processes items back to
  back; the output is the throughput the counter allows.
* **offered load** (``rate_per_cpu`` items/s per CPU, Poisson arrivals): the
  output is each CPU's busy share at that throughput, the quantity the patch
  reports as "worker CPU idle %" (idle = 1 - busy).

Simplifications, stated: a stalled CPU counts as busy (it is, in the
kernel: a locked RMW spins in hardware); transfers are serialised on the line
(no overlap of two transfers of one line); work per item is constant; the
cost of ``rcu_read_lock()`` around percpu operations is folded into
``op_local_ns``.
"""

from __future__ import annotations

import heapq
from dataclasses import asdict, dataclass, fields

import numpy as np

from ...errors import ParameterError
from ...topology.model import Topology
from ...validate import budget, integer, number, one_of
from ...validate import seed as _seed

__all__ = ["Latencies", "relation", "transfer_ns", "simulate", "percpu_expected", "sweep_flows"]

# Ranges of the inputs:
MAX_LATENCY_NS = 1e6      # one cache-line operation
MAX_WORK_NS = 1e12        # one item's other work
MAX_OPS = 1e6             # reference operations per item
MAX_RATE = 1e12           # offered items/s per CPU
MAX_DURATION_NS = 1e12    # simulated time (1000 s)
# A run simulating more events (item ends + reference operations) than this
# would take many minutes, or never end when an item takes no time.
MAX_EVENTS = 2e7


@dataclass(frozen=True)
class Latencies:
    """Cache-line costs in nanoseconds.

    op_local_ns:   an atomic RMW on a line this CPU already owns (and the
                   cost of a percpu ``this_cpu_add``)
    smt_ns:        line last written by the SMT sibling on the same core
    cluster_ns:    ... by a CPU of the same cluster or sharing the LLC
    node_ns:       ... by a CPU of the same NUMA node, other LLC
    remote_ns:     ... by a CPU of another node at SLIT distance 20;
                   other distances scale it linearly (d / 20)
    The defaults are *assumed* (no measurement behind them): the devmem
    chapter uses only their ratios, 1/3 : 1 : 2 : 4 for SMT : LLC : node :
    remote, scaled to one fitted LLC transfer, and shows how its results move
    over a range of ratios. Measured values come from
    :func:`from_round_trips`.
    """

    op_local_ns: float = 2.0
    smt_ns: float = 15.0
    cluster_ns: float = 45.0
    node_ns: float = 90.0
    remote_ns: float = 180.0

    def __post_init__(self):
        for f in fields(self):
            number(f.name, getattr(self, f.name), 0, MAX_LATENCY_NS)

    @classmethod
    def from_round_trips(cls, bench: dict, topo: Topology, base: "Latencies | None" = None
                         ) -> "Latencies":
        """Replace the defaults by half the measured round trips of
        ``numalab bench atomics`` (``bench["latency"]``), per relation class.
        Classes the machine has no pair for keep their default."""
        base = base or cls()
        lat = bench.get("latency", {})
        cpus, mat = lat.get("cpus", []), lat.get("round_trip_ns", [])
        groups: dict[str, list[float]] = {}
        for i, a in enumerate(cpus):
            for j, b in enumerate(cpus):
                if i < j and mat[i][j] is not None and a in topo.cpus and b in topo.cpus:
                    groups.setdefault(relation(topo, a, b), []).append(mat[i][j] / 2)
        values = asdict(base)
        for rel, xs in groups.items():
            key = {"smt": "smt_ns", "cluster": "cluster_ns", "node": "node_ns",
                   "remote": "remote_ns"}[rel]
            values[key] = float(np.median(xs))
        return cls(**values)


def relation(topo: Topology, a: int, b: int) -> str:
    """How CPU ``b`` relates to CPU ``a``: "self", "smt", "cluster", "node", "remote".

    >>> from numalab.topology.model import CPU, Topology, Node
    >>> t = Topology("t", cpus={0: CPU(0, node=0, thread_siblings=3, cluster_cpus=3, llc_cpus=3),
    ...                         1: CPU(1, node=0, thread_siblings=3, cluster_cpus=3, llc_cpus=3)},
    ...              nodes={0: Node(0, 3)})
    >>> relation(t, 0, 1)
    'smt'
    """
    if a == b:
        return "self"
    ca, cb = topo.cpus[a], topo.cpus[b]
    if ca.thread_siblings >> b & 1:
        return "smt"
    if (ca.cluster_cpus >> b & 1) or (ca.llc_cpus >> b & 1):
        return "cluster"
    if ca.node == cb.node:
        return "node"
    return "remote"


def transfer_ns(topo: Topology, prev: int, cpu: int, lat: Latencies) -> float:
    """Cost of an atomic RMW by ``cpu`` on a line last written by ``prev``."""
    rel = relation(topo, prev, cpu)
    if rel == "self":
        return lat.op_local_ns
    if rel == "remote":
        d = topo.distance(topo.cpus[prev].node, topo.cpus[cpu].node)
        return lat.remote_ns * d / 20.0
    return {"smt": lat.smt_ns, "cluster": lat.cluster_ns, "node": lat.node_ns}[rel]


def _per_cpu(value, k: int, name: str, lo: float, hi: float, *, lo_open: bool = False,
             optional: bool = False) -> list:
    """A scalar broadcast to ``k`` CPUs, or a per-CPU sequence checked for
    length; every value a finite number in range (or None when ``optional``).

    >>> _per_cpu(2, 3, "ops_per_item", 0, 10)
    [2.0, 2.0, 2.0]
    >>> _per_cpu([1, -1], 2, "work_ns", 0, 10)
    Traceback (most recent call last):
    numalab.errors.ParameterError: work_ns[1] must be a number in [0, 10], not -1
    """
    if value is None and optional:
        return [None] * k
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        return [number(name, value, lo, hi, lo_open=lo_open)] * k
    vals = list(value)
    if len(vals) != k:
        raise ParameterError(f"{name}: {len(vals)} values for {k} CPUs")
    return [None if v is None and optional else number(f"{name}[{i}]", v, lo, hi, lo_open=lo_open)
            for i, v in enumerate(vals)]


def _events_bound(work: list[float], opsf: list[float], rates: list, cheapest_ns: float,
                  duration_ns: float) -> float:
    """About how many events (item ends plus reference operations) a run
    makes at most: CPU ``i`` finishes at most ``duration / (work + ops x
    cheapest)`` items (fewer when its offered ``rates[i]`` items/s is lower),
    each with ``1 + ops`` events. Infinite when an item can take no time.

    >>> round(_events_bound([300.0], [2.0], [None], 2.0, 1e6))   # 1e6 / 304 items x 3
    9868
    >>> _events_bound([0.0], [0.0], [None], 2.0, 1e6)
    inf
    """
    events = 0.0
    for w, o, r in zip(work, opsf, rates):
        item_ns = w + o * cheapest_ns
        items = duration_ns / item_ns if item_ns > 0 else float("inf")
        if r is not None:
            items = min(items, r * duration_ns / 1e9)
        events += items * (1 + o)
    return events


def simulate(topo: Topology, cpus: list[int], mode: str = "shared", *,
             work_ns: float | list[float] = 300.0, ops_per_item: float | list[float] = 2,
             rate_per_cpu: float | list[float] | None = None, duration_ns: float = 2e6,
             lat: Latencies | None = None, seed: int = 0,
             local_ns: float | list[float] | None = None, hold_ns: float = 0.0) -> dict:
    """Simulate ``len(cpus)`` CPUs taking references on one object.

    Inputs: the topology, the CPUs doing the work (a CPU may appear once),
    ``mode`` "shared" (refcount_t) or "percpu" (percpu_ref in percpu mode),
    per-item work and reference operations, optional offered load per CPU
    (items/s), simulated time, latencies, seed.

    ``work_ns``, ``ops_per_item`` and ``rate_per_cpu`` are either one value
    for every CPU or one value per CPU (so CPUs with different jobs -- a
    sender that takes references, a completion CPU that drops them -- share
    one line). A fractional ``ops_per_item`` x gives each item floor(x) or
    floor(x) + 1 operations at random, x on average (for "one reference in
    every few items").

    ``local_ns`` (one value, or one per CPU; default ``lat.op_local_ns``):
    the cost of an operation on a line the CPU already holds, so gets
    (``lock cmpxchg``) and puts (``lock xadd``) can cost differently.

    ``hold_ns`` (default 0: one transfer per operation whenever the writer
    changes): hand-off batching. When another CPU's request takes the line
    away, the previous holder may go on using it for ``hold_ns`` after the
    transfer starts (until the request reaches it: about half a transfer on
    real hardware), each operation at its local cost. Larger values mean
    more operations per transfer.

    Output: dict with ``items_per_s``, ``ops_per_s``, ``busy`` (mean CPU busy
    share, 0..1), ``ref_share`` (share of CPU time in reference operations,
    stalls included), ``mean_op_ns``, and per CPU (in the order of ``cpus``)
    ``busy_per_cpu``, ``items_per_cpu`` (items/s), ``ref_share_per_cpu`` and
    ``lag_ns_per_cpu`` (offered load only: how long the oldest waiting item
    has been waiting at the end; it grows with ``duration_ns`` when the CPU
    cannot keep up).

    >>> from numalab.topology.model import CPU, Topology, Node
    >>> t = Topology("t", cpus={i: CPU(i, node=0, thread_siblings=1 << i, cluster_cpus=1 << i)
    ...                         for i in range(4)}, nodes={0: Node(0, 15)})
    >>> s = simulate(t, [0, 1, 2, 3], "shared"); p = simulate(t, [0, 1, 2, 3], "percpu")
    >>> p["items_per_s"] > s["items_per_s"]
    True
    """
    one_of("mode", mode, ("shared", "percpu"))
    if isinstance(cpus, (str, bytes)) or not hasattr(cpus, "__iter__"):
        raise ParameterError(f"cpus must be a list of CPUs, not {cpus!r}")
    cpus = list(cpus)
    if len(set(cpus)) != len(cpus) or not cpus:
        raise ParameterError("cpus must be a non-empty list of distinct CPUs")
    for c in cpus:
        if integer("cpus: CPU", c, 0) not in topo.cpus:
            raise ParameterError(f"cpus: CPU {c} is not a CPU of {topo.name}")
    lat = Latencies() if lat is None else lat
    if not isinstance(lat, Latencies):
        raise ParameterError(f"lat must be a Latencies, not {type(lat).__name__}")
    number("duration_ns", duration_ns, 0, MAX_DURATION_NS, lo_open=True)
    number("hold_ns", hold_ns, 0, MAX_LATENCY_NS)
    _seed(seed)
    rng = np.random.default_rng(seed)
    k = len(cpus)
    work = _per_cpu(work_ns, k, "work_ns", 0, MAX_WORK_NS)
    opsf = _per_cpu(ops_per_item, k, "ops_per_item", 0, MAX_OPS)
    rates = _per_cpu(rate_per_cpu, k, "rate_per_cpu", 0, MAX_RATE, lo_open=True, optional=True)
    local = _per_cpu(lat.op_local_ns if local_ns is None else local_ns, k, "local_ns", 0,
                     MAX_LATENCY_NS)
    busy = [0.0] * k
    ref_time = [0.0] * k
    done_items = [0] * k
    ops = 0
    op_time = 0.0
    line_free = 0.0
    owner = 0          # index into cpus of the line's last writer
    prev, prev_leave = -1, -1.0   # the holder the line is leaving, and until when it may use it
    # cost of an RMW by CPU j after CPU i wrote the line: computed once, the
    # loop below runs it millions of times
    cost_table = ([[local[j] if a == b else transfer_ns(topo, a, b, lat)
                    for j, b in enumerate(cpus)] for a in cpus]
                  if mode == "shared" else [])
    # Simulated time must advance, and the run must end in a human time.
    cheapest = min(min(row) for row in cost_table) if cost_table else min(local)
    events = _events_bound(work, opsf, rates, cheapest, duration_ns)
    budget(f"{k} CPUs over {duration_ns:g} ns", events, MAX_EVENTS,
           "an item must take time (work_ns > 0 or ops_per_item with non-zero latencies); "
           "shorten duration_ns or give more work per item", error=ParameterError)
    # events: (time the item's work ends, seq, cpu index, ops left for the item)
    events: list[tuple[float, int, int, int]] = []
    seq = 0

    def n_ops(i: int) -> int:
        whole = int(opsf[i])
        frac = opsf[i] - whole
        return whole + (1 if frac > 0 and rng.random() < frac else 0)

    arrivals = [rng.exponential(1e9 / r) if r is not None else 0.0 for r in rates]

    def start_item(i: int, now: float) -> None:
        nonlocal seq
        start = now if rates[i] is None else max(now, arrivals[i])
        # only the part of the work inside the simulated window counts as busy
        busy[i] += max(0.0, min(start + work[i], duration_ns) - min(start, duration_ns))
        heapq.heappush(events, (start + work[i], seq, i, n_ops(i)))
        seq += 1

    for i in range(k):
        start_item(i, rng.uniform(0, work[i]) if rates[i] is None else 0.0)
    while events:
        t, _, i, left = heapq.heappop(events)
        if t > duration_ns:
            continue
        if left == 0:
            done_items[i] += 1
            if rates[i] is not None:
                arrivals[i] += rng.exponential(1e9 / rates[i])
            start_item(i, t)
            continue
        if mode == "shared":
            if i == prev and t < prev_leave:
                # the request taking the line away has not reached this CPU yet
                done = t + local[i]
            else:
                start = max(t, line_free)
                if i != owner:
                    prev, prev_leave = owner, start + hold_ns
                done = start + cost_table[owner][i]
                line_free = done
                owner = i
        else:
            done = t + local[i]
        stall = min(done, duration_ns) - t
        busy[i] += stall
        ref_time[i] += stall
        ops += 1
        op_time += done - t
        heapq.heappush(events, (done, seq, i, left - 1))
        seq += 1
    secs = duration_ns / 1e9
    busy_per_cpu = [min(1.0, b / duration_ns) for b in busy]
    # how far each CPU's queue lags behind its arrivals at the end: a few
    # items' time when it keeps up, growing with the duration when it cannot
    lag = [max(0.0, duration_ns - arrivals[i]) if rates[i] is not None else 0.0
           for i in range(k)]
    return {
        "mode": mode,
        "cpus": len(cpus),
        "items_per_s": sum(done_items) / secs,
        "ops_per_s": ops / secs,
        "busy": float(np.mean(busy_per_cpu)),
        "ref_share": float(np.mean(ref_time) / duration_ns),
        "mean_op_ns": op_time / ops if ops else 0.0,
        "busy_per_cpu": busy_per_cpu,
        "items_per_cpu": [d / secs for d in done_items],
        "ref_share_per_cpu": [r / duration_ns for r in ref_time],
        "lag_ns_per_cpu": lag,
    }


def percpu_expected(work_ns: float, ops_per_item: float, rate: float | None,
                    lat: Latencies | None = None) -> dict:
    """What :func:`simulate` converges to in ``"percpu"`` mode, without simulating.

    In percpu mode no CPU waits for another, so each CPU is a separate
    machine: an item costs ``work_ns + ops_per_item * op_local_ns``.
    Saturated (``rate=None``): items/s per CPU = 1e9 / cost, busy = 1.
    Offered load: items/s = rate (while below capacity), busy = rate * cost.
    Used for sweeps with many CPUs, where simulating every item is slow.

    >>> r = percpu_expected(48.0, 1, 1e7, Latencies(op_local_ns=2.0))
    >>> round(r["busy"], 3), r["items_per_s"]
    (0.5, 10000000.0)
    """
    lat = Latencies() if lat is None else lat
    if not isinstance(lat, Latencies):
        raise ParameterError(f"lat must be a Latencies, not {type(lat).__name__}")
    number("work_ns", work_ns, 0, MAX_WORK_NS)
    number("ops_per_item", ops_per_item, 0, MAX_OPS)
    if rate is not None:
        number("rate", rate, 0, MAX_RATE, lo_open=True)
    cost = work_ns + ops_per_item * lat.op_local_ns
    if cost <= 0:
        raise ParameterError("an item costs no time (work_ns and ops_per_item x op_local_ns "
                             "are 0): the throughput would be infinite")
    cap = 1e9 / cost
    if rate is None or rate >= cap:
        return {"items_per_s": cap, "busy": 1.0, "ref_share": ops_per_item * lat.op_local_ns / cost}
    return {"items_per_s": float(rate), "busy": rate * cost / 1e9,
            "ref_share": rate * ops_per_item * lat.op_local_ns / 1e9}


def sweep_flows(topo: Topology, placements: dict[str, list[int]], flows: list[int], *,
                work_ns: float = 300.0, ops_per_item: int = 2, duration_ns: float = 1e6,
                lat: Latencies | None = None, seed: int = 0):
    """Saturated throughput of both counters against the number of flows.

    ``placements`` maps a placement name ("same node", "spread", ...) to an
    ordered list of CPUs; ``n`` flows use its first ``n`` CPUs. Returns a tidy
    DataFrame: placement, flows, mode, items_per_s, ops_per_s, busy,
    ref_share, mean_op_ns.
    """
    import pandas as pd

    rows = []
    for name, order in placements.items():
        for n in flows:
            if n > len(order):
                continue
            for mode in ("shared", "percpu"):
                r = simulate(topo, order[:n], mode, work_ns=work_ns, ops_per_item=ops_per_item,
                             duration_ns=duration_ns, lat=lat, seed=seed)
                rows.append({"placement": name, "flows": n,
                             **{k: v for k, v in r.items() if not k.endswith("_per_cpu")}})
    return pd.DataFrame(rows)


def bench_comparison_cached(topo: Topology, bench: dict, cache_dir=None, **kw):
    """:func:`bench_comparison` with an on-disk cache: the same topology,
    record, arguments and model source give the stored table (the
    comparison is deterministic for its seeds; a change to any of them
    computes it again). ``cache_dir`` defaults to the checkout's
    ``.numalab-cache/refcount-bench`` (memory only outside a checkout), so
    a chapter and its evidence page compute a comparison once."""
    from pathlib import Path
    from ...diskcache import cached, key_digest
    cpus = [(c, i.node, i.thread_siblings, i.llc_cpus) for c, i in sorted(topo.cpus.items())]
    nodes = sorted(topo.node_ids)
    dist = [[topo.distance(a, b) for b in nodes] for a in nodes] if topo.nodes else None
    key = {"bench": bench, "topo": [topo.name, cpus, nodes, dist], "kw": kw,
           "code": key_digest(Path(__file__).read_text())}
    memo = key_digest(key)
    if memo not in _BENCH_MEMO:
        _BENCH_MEMO[memo] = cached("refcount-bench", key, lambda: bench_comparison(topo, bench, **kw),
                                   cache_dir)
    return _BENCH_MEMO[memo].copy()


_BENCH_MEMO: dict = {}


def bench_comparison(topo: Topology, bench: dict, hold_shares: tuple[float, ...] = (0.0, 0.5, 1.0),
                     seeds: tuple[int, ...] = tuple(range(5)), duration_ns: float = 2e5,
                     fallback_local_ns: float | None = None):
    """:func:`simulate` against the ``refops`` benchmark of ``bench`` (a
    ``numalab bench atomics`` record measured on ``topo``), thread count by
    thread count, operation by operation.

    The model gets only measured inputs: the transfer costs from the
    benchmark's round trips (:meth:`Latencies.from_round_trips`, half a round
    trip per transfer); each arm's local cost from its one-thread run without
    work; each thread's work between operations from the one-thread run at
    that work level (so every one-thread row is fit quality, role "fitted").
    Rows with two threads or more are predictions (role "predicted"), made
    for each assumed hand-off window ``hold_ns`` = share x transfer in
    ``hold_shares`` (0: one transfer per operation whenever the writer
    changes), each the median over ``seeds`` with its range.

    A record with several runs (``collect --bench``) is read as the median
    over runs, its range the lowest and highest run median; round trips are
    the median over runs. Each arm's local cost comes from its zero-work
    row when the record has one (``local`` "measured"), else it is
    ``fallback_local_ns`` when given (e.g. the same machine's cost from
    another run set), else ``Latencies().op_local_ns``; either way ``local``
    is "assumed".

    DataFrame: threads, work_ns, arm, measured (median Mops/s), measured_low,
    measured_high (the runs' range; one run: its trials' range), runs, hold_share, model (median Mops/s over
    seeds), model_low, model_high, local, role.
    """
    import pandas as pd

    from ...measure.atomics import median_latency, runs_of, spread_over_runs
    from ...evidence import over_seeds

    if not isinstance(bench, dict) or not any((r.get("refops") or {}).get("rows")
                                              for r in runs_of(bench)):
        raise ParameterError("this benchmark record has no refops rows")
    # every run of the record: the median over runs, the runs' range
    tab = spread_over_runs(bench).rename(columns={"mops": "mops_median", "run_low": "mops_low",
                                                  "run_high": "mops_high", "runs": "trials"})
    single = tab["trials"] == 1          # one run: its trials' range is all there is
    tab.loc[single, "mops_low"] = tab.loc[single, "trial_low"]
    tab.loc[single, "mops_high"] = tab.loc[single, "trial_high"]
    tab["counter"] = ["percpu" if a == "percpu add" else "refcount_t" for a in tab["arm"]]
    tab["ns_per_op_per_thread"] = tab["threads"] / tab["mops_median"] * 1e3
    ref = bench.get("refops") or {}
    cpus = [c for c in ref.get("cpus_used", sorted(topo.cpus)) if c in topo.cpus]
    lat = Latencies.from_round_trips({"latency": median_latency(bench)}, topo)
    one = tab[tab["threads"] == 1].set_index(["arm", "work_ns"])["ns_per_op_per_thread"]

    fallback = lat.op_local_ns if fallback_local_ns is None else float(fallback_local_ns)

    def local_of(arm: str) -> float:
        return float(one.get((arm, 0), fallback))

    def op_arm(arm: str, index: int) -> str:
        if arm == "refcount_t split":
            return "refcount_t put" if index % 2 else "refcount_t get"
        return arm

    rows = []
    for r in tab.itertuples():
        n = int(r.threads)
        if n > len(cpus):
            continue
        arms = [op_arm(r.arm, i) for i in range(n)]
        if any((a, r.work_ns) not in one.index for a in arms):
            continue
        local = [local_of(a) for a in arms]
        work = [max(0.0, float(one[(a, r.work_ns)]) - loc) for a, loc in zip(arms, local)]
        mode = "percpu" if r.counter == "percpu" else "shared"
        placed = [cpus[i % len(cpus)] for i in range(n)]
        if len(set(placed)) < n:
            continue
        far = max((transfer_ns(topo, a, b, lat) for a in placed for b in placed if a != b),
                  default=0.0)
        # enough simulated hand-offs, not more events than needed
        dur = min(duration_ns, max(2e4, 1.5e4 * (sum(work) / n + sum(local) / n)))
        for share in (hold_shares if mode == "shared" and n > 1 else (0.0,)):
            sp = over_seeds(lambda s: simulate(
                topo, placed, mode, work_ns=work, ops_per_item=1, duration_ns=dur,
                lat=lat, seed=s, local_ns=local, hold_ns=share * far)["ops_per_s"] / 1e6,
                seeds=seeds)
            rows.append({"threads": n, "work_ns": r.work_ns, "arm": r.arm,
                         "measured": r.mops_median, "measured_low": r.mops_low,
                         "measured_high": r.mops_high, "runs": r.trials,
                         "hold_share": share, "model": sp.median, "model_low": sp.low,
                         "model_high": sp.high,
                         "local": "measured" if all((a, 0) in one.index for a in arms)
                         else "assumed",
                         "role": "fitted" if n == 1 else "predicted"})
    return pd.DataFrame(rows)
