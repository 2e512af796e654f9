"""``numalab bench idle-inputs``: chapter 4's measured inputs on this machine."""

from __future__ import annotations

from .bitops import MIN_CPUS_FOR_CURVE

__all__ = ["render"]


def _arguments(p) -> None:
    p.add_argument("--quick", action="store_true", help="a smaller build and fewer iterations")
    p.add_argument("--runs", type=int, default=None,
                   help="how many times to repeat both measurements (default 5; the "
                        "median and range are reported)")


def _run(args) -> dict:
    from . import DEFAULT_RUNS, run_idle_inputs
    return run_idle_inputs(quick=args.quick, runs=args.runs or DEFAULT_RUNS)


def render(result: dict) -> str:
    """The ``idle-inputs`` dict as text.

    >>> print(render({"idle_rate": {"jobs": 2, "files": 8, "wall_s": 1.0, "cpu_s": 1.5,
    ...   "voluntary": 150, "run_mean_us": 10000.0, "voluntary_per_cpu_s": 100.0, "load": 0.75},
    ...   "bitops": {"flips": [{"threads": 1, "ns_per_flip_shared": 6.5,
    ...   "own_line_flips_per_s": 1}], "handoff": [], "cannot": ["a curve"]}}))
    build: make -j2 of 8 files: 1 s elapsed, 1.5 CPU-s, 150 voluntary switches
      mean run between voluntary switches 10000 us (100 per CPU-second), load 0.75
    bitmap: 1 writer(s) on one word: 6.5 ns per set+clear
    not measurable here: a curve
    """
    r, b = result["idle_rate"], result["bitops"]
    lines = [f"build: make -j{r['jobs']} of {r['files']} files: {r['wall_s']:g} s elapsed, "
             f"{r['cpu_s']:g} CPU-s, {r['voluntary']} voluntary switches",
             f"  mean run between voluntary switches {r['run_mean_us']:.0f} us "
             f"({r['voluntary_per_cpu_s']:g} per CPU-second), load {r['load']:g}"]
    for row in b["flips"]:
        lines.append(f"bitmap: {row['threads']} writer(s) on one word: "
                     f"{row['ns_per_flip_shared']:g} ns per set+clear")
    for h in b["handoff"]:
        lines.append(f"hand-off CPU {h['cpu_a']} -> {h['cpu_b']}: {h['ns']:g} ns")
    for c in b.get("cannot", []):
        lines.append(f"not measurable here: {c}")
    summary = result.get("summary") or {}
    if summary:
        lines.append(f"over {result.get('runs')} runs (median, range; load average "
                     f"{', '.join(str(r['loadavg_before']) for r in result.get('repeats', []))}):")
        for name, v in summary.items():
            lines.append(f"  {name}: {v['median']:g} ({v['low']:g} to {v['high']:g})")
    return "\n".join(lines)


try:
    from .bench import Benchmark, register
except ImportError:      # pragma: no cover - the bench command is not there
    pass
else:
    register(Benchmark(
        name="idle-inputs",
        help=f"chapter 4's inputs: a parallel build's voluntary-switch rate and a contended "
             f"bitmap (set_bit/test_and_clear_bit on one word; a curve needs "
             f"{MIN_CPUS_FOR_CURVE}+ CPUs)",
        add_arguments=_arguments, run=_run, render=render))
