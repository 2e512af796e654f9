"""``numalab idle TOPOLOGY``: sched_ext's idle masks under a parallel-build load."""

from __future__ import annotations

import json

from ..errors import NumalabError
from ..models.idle.sim import MAX_MS, RUN_US_RANGE
from ..validate import option_number, option_seed


def add_parser(sub) -> None:
    p = sub.add_parser(
        "idle", help="simulate sched_ext's built-in idle CPU selection (flat or per-node masks)",
        description="Run a parallel-build-like load (one task per CPU, run/sleep phases) "
                    "through a port of sched_ext's scx_select_cpu_dfl() and count the "
                    "idle-cpumask traffic: words read, writes, cache lines taken from another "
                    "node, picks outside prev_cpu's node, failed picks, and the modelled time. "
                    "TOPOLOGY is anything 'numalab show' reads, or 'dgx-b200' / 'dgx-1' "
                    "for the two machines of the per-node idle mask series.")
    p.add_argument("topology", metavar="TOPOLOGY")
    p.add_argument("--per-node", action="store_true",
                   help="per-node idle masks (SCX_OPS_BUILTIN_IDLE_PER_NODE)")
    p.add_argument("--compare", action="store_true",
                   help="run both modes and print the predicted build times")
    p.add_argument("--load", type=option_number(0, 1, lo_open=True), default=None, metavar="L",
                   help="fraction of time each task wants to run, 0 < L <= 1 (default 0.85)")
    p.add_argument("--run-us", type=option_number(*RUN_US_RANGE), default=None, metavar="US",
                   help=f"mean run phase in microseconds, "
                        f"{RUN_US_RANGE[0]:g}..{RUN_US_RANGE[1]:g} (default 49)")
    p.add_argument("--seed", type=option_seed(), default=0, metavar="S",
                   help="random seed, an integer >= 0 (default 0)")
    p.add_argument("--duration", type=option_number(0, MAX_MS, lo_open=True), default=None,
                   metavar="MS", help=f"simulated milliseconds measured, 0 < MS <= {MAX_MS:g} "
                                      f"(default 10)")
    p.add_argument("--cached-order", action="store_true",
                   help="visit remote nodes from a cached per-node order instead of "
                        "for_each_node_numadist()")
    p.add_argument("--sync", type=option_number(0, 1), default=None, metavar="F",
                   help="fraction of wakeups flagged SCX_WAKE_SYNC, 0..1 (default 0)")
    p.add_argument("--guard-exit", action="store_true",
                   help="read-guard the idle-exit stores of update_builtin_idle() "
                        "(an alternative to per-node masks, not kernel code)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def _topology(text: str):
    from ..models.idle.sim import dgx1, dgx_b200
    from ..topology import load
    key = text.strip().lower()
    if key in ("dgx-b200", "dgxb200", "b200"):
        return dgx_b200()
    if key in ("dgx-1", "dgx1"):
        return dgx1()
    return load(text)


def _params(args):
    from ..models.idle.sim import SimParams
    kw = {}
    if args.load is not None:
        kw["load"] = args.load
    if args.run_us is not None:
        kw["run_mean_us"] = args.run_us
    if args.duration is not None:
        kw["duration_ms"] = args.duration
    if args.cached_order:
        kw["node_order"] = "cached"
    if args.sync is not None:
        kw["sync_frac"] = args.sync
    if args.guard_exit:
        kw["guard_exit"] = True
    return SimParams(per_node=args.per_node, **kw).check()


def render(r) -> str:
    """Human-readable summary of one SimResult."""
    t = r.total
    mode = "per-node" if r.params.per_node else "flat"
    pd = r.per_decision()
    lines = [
        f"{r.machine}: {r.cpus} CPUs, {r.nodes} nodes, {mode} idle masks, "
        f"load {r.params.load:g}, run {r.params.run_mean_us:g} us, seed {r.seed}",
        f"  decisions {r.decisions}   failed picks {r.failed_picks}   "
        f"picks outside prev_cpu's node {r.picks_outside_node}",
        f"  idle enter {r.idle_enter}   idle exit {r.idle_exit}   "
        f"utilisation {100 * r.utilisation:.1f}%",
        f"  words read {t.words_read} ({pd['words_read']:.1f}/decision)   "
        f"line reads {t.line_reads} (remote {t.read_remote}, local {t.read_local})",
        f"  writes {t.writes} ({pd['writes']:.2f}/decision): hits {t.write_hits}, "
        f"local {t.write_local}, remote {t.write_remote}; "
        f"last written from another node {t.cross_node_writes}",
        f"  node walks {t.walks}   distance lookups {t.dist_lookups}   "
        f"busiest line {100 * r.max_line_busy:.0f}% busy",
        f"  modelled time: transfers {t.transfer_ns / 1e3:.1f} us, queueing {t.wait_ns / 1e3:.1f} us, "
        f"{pd['overhead_ns']:.0f} ns/decision; overhead {100 * r.overhead_fraction:.2f}% "
        f"of useful CPU time" + ("  SATURATED (busiest line has no steady state)"
                                 if r.saturated else ""),
    ]
    return "\n".join(lines)


def run(args) -> int:
    from ..models.idle.sim import compare, simulate
    topo = _topology(args.topology)
    try:
        params = _params(args)
    except ValueError as e:
        if isinstance(e, NumalabError):
            raise
        raise NumalabError(str(e)) from None
    if args.compare:
        c = compare(topo, params, args.seed)
        if args.json:
            out = {k: (v.to_dict() if hasattr(v, "to_dict") else v) for k, v in c.items()}
            print(json.dumps(out, indent=1, sort_keys=True))
        else:
            print(render(c["flat"]))
            print(render(c["per_node"]))
            if not c["capable"]:
                print(f"note: {c['why_not']}")
            if c["saturated"]:
                print("predicted build time: not given -- a saturated idle-mask line is an "
                      "unbounded queue, not a gain")
            else:
                print(f"predicted build time: flat {c['before_s']:.3f} s -> per-node "
                      f"{c['after_s']:.3f} s ({c['gain_thr_pct']:+.2f}% faster by throughput; "
                      f"{c['gain_pct']:+.2f}% by the (1+f) formula)")
        return 0
    r = simulate(topo, params, args.seed)
    if args.json:
        print(json.dumps(r.to_dict(), indent=1, sort_keys=True))
    else:
        print(render(r))
    return 0
