"""``numalab bench lab``: boots per hour of ``numalab lab sweep`` on this
machine, one boot at a time (a LocalCluster of one worker) and with
``--workers`` workers (default 2), on a given matrix; and the projected wall
time of a larger matrix on W workers from the measured per-boot times.

Each run boots the whole matrix into a fresh temporary results folder (no
dump reused). Figures: wall seconds, boots per hour, each boot's seconds
(as the worker timed it), the load average before and after. Reported,
never asserted: a benchmark measures this machine at this moment, and on a
machine shared with other jobs the parallel speed-up is what the cores left
over allow.
"""

from __future__ import annotations

import heapq
import os
import sys
import tempfile
import time
from pathlib import Path

from ..validate import integer

__all__ = ["project_wall", "run_lab_bench", "sweep_projection", "merge_sweeps", "render"]


def project_wall(per_boot: list[float], boots: int, workers: int,
                 startup: float = 0.0) -> float:
    """Projected wall seconds of ``boots`` boots on ``workers`` workers: the
    measured per-boot seconds repeated in turn until there are ``boots``,
    handed longest first to the worker that is free first (what Dask's
    scheduler does with equal-priority tasks, to within its overhead), plus
    ``startup`` (the cluster's start). Assumes each worker has a core of its
    own: TCG boots are single-threaded and CPU-bound.

    >>> project_wall([10.0, 20.0], boots=4, workers=2)
    30.0
    >>> project_wall([10.0], boots=5, workers=2, startup=3.0)
    33.0
    """
    integer("boots", boots, 0, 10 ** 7)
    integer("workers", workers, 1, 10 ** 5)
    if not per_boot:
        raise ValueError("no measured boot")
    times = sorted((per_boot[i % len(per_boot)] for i in range(boots)), reverse=True)
    free = [0.0] * workers
    for t in times:
        heapq.heapreplace(free, free[0] + t)
    return max(free) + startup


def _load() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def run_lab_bench(matrix: str, workers: int = 2, project: tuple[int, ...] = (200, 500),
                  project_workers: tuple[int, ...] = (1, 2, 8, 32),
                  say=lambda line: None) -> dict:
    """Run ``matrix`` once with one worker, once with ``workers``; output
    ``{"runs": [{"workers", "wall_s", "boots", "boots_per_hour", "per_boot_s",
    "failed", "load_before", "load_after"}], "projection": [{"boots",
    "workers", "wall_s"}]}`` (projected from the one-worker run's boots)."""
    from ..lab.sweep import run_sweep
    runs = []
    for w in (1, workers):
        with tempfile.TemporaryDirectory(prefix="numalab-bench-lab-") as tmp:
            before = _load()
            t0 = time.monotonic()
            s = run_sweep(matrix, Path(tmp) / "results", workers=w,
                          say=lambda m, w=w: say(f"[{w} worker(s)] {m}"), dashboard=False)
            wall = time.monotonic() - t0
        booted = [r for r in s["tasks"] if r["status"] == "booted"]
        runs.append({"workers": w, "wall_s": round(wall, 1), "boots": len(booted),
                     "failed": s["counts"]["failed"],
                     "boots_per_hour": round(len(booted) / wall * 3600, 1) if wall else None,
                     "per_boot_s": [r["seconds"] for r in booted],
                     "load_before": before, "load_after": _load()})
        say(f"{w} worker(s): {len(booted)} boots in {wall:.0f} s")
    base = runs[0]["per_boot_s"] or runs[-1]["per_boot_s"]
    startup = max(0.0, runs[0]["wall_s"] - sum(base)) if base else 0.0
    proj = [{"boots": n, "workers": w,
             "wall_s": round(project_wall(base, n, w, startup), 0)}
            for n in project for w in project_workers] if base else []
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count()
    return {"benchmark": "lab", "matrix": str(matrix), "cpus": cpus, "runs": runs,
            "startup_s": round(startup, 1), "projection": proj}


def sweep_projection(summary: dict, workers: tuple[int, ...] = (1, 2, 8, 32)) -> dict:
    """A finished sweep (its ``sweep.json`` as a dict) projected on other
    worker counts, without booting: its booted tasks' measured seconds
    (as the workers timed them) through :func:`project_wall`, with the
    sweep's start-up overhead (measured wall minus the projection on the
    sweep's own worker count, at least 0). Output: ``{"matrix", "boots",
    "failed", "wall_s", "sweep_workers", "per_boot_s", "startup_s",
    "projection": [{"boots", "workers", "wall_s"}]}``.

    >>> r = sweep_projection({"matrix": "m.toml", "wall_seconds": 35.0, "workers": 2,
    ...     "tasks": [{"status": "booted", "seconds": s} for s in (10.0, 20.0, 30.0)]}, (1, 3))
    >>> r["startup_s"], [p["wall_s"] for p in r["projection"]]
    (5.0, [65.0, 35.0])
    """
    booted = [r for r in summary["tasks"] if r["status"] == "booted"]
    per = [float(r["seconds"]) for r in booted]
    if not per:
        raise ValueError("the sweep booted nothing (every dump was already there?)")
    own = int(summary.get("workers") or 1)
    wall = float(summary["wall_seconds"])
    startup = max(0.0, wall - project_wall(per, len(per), own))
    return {"matrix": summary.get("matrix"), "boots": len(per),
            "failed": sum(1 for r in summary["tasks"] if r["status"] == "failed"),
            "wall_s": wall, "sweep_workers": own, "per_boot_s": per,
            "startup_s": round(startup, 1),
            "projection": [{"boots": len(per), "workers": w,
                            "wall_s": round(project_wall(per, len(per), w, startup), 0)}
                           for w in workers]}


def merge_sweeps(summaries: list[dict]) -> dict:
    """Runs of one matrix made one after the other (a rerun boots only what
    the earlier ones did not) as one sweep: every booted task, the walls
    added. All runs must have had the same worker count.

    >>> m = merge_sweeps([{"matrix": "a", "wall_seconds": 10.0, "workers": 2, "tasks": [1]},
    ...                   {"matrix": "b", "wall_seconds": 5.0, "workers": 2, "tasks": [2]}])
    >>> m["wall_seconds"], m["tasks"], m["matrix"]
    (15.0, [1, 2], 'a + b')
    """
    if not summaries:
        raise ValueError("no sweep")
    workers = {s.get("workers") for s in summaries}
    if len(workers) != 1:
        raise ValueError(f"the runs had different worker counts: {sorted(map(str, workers))}")
    return {"matrix": " + ".join(str(s.get("matrix")) for s in summaries),
            "wall_seconds": sum(float(s["wall_seconds"]) for s in summaries),
            "workers": workers.pop(), "tasks": [t for s in summaries for t in s["tasks"]]}


def _num(x) -> str:
    return "?" if x is None else f"{x:.2f}"


def _hours(s: float) -> str:
    return f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.0f} min"


def render(result: dict) -> str:
    """The ``lab`` dict as text."""
    if "sweep_workers" in result:
        per = result["per_boot_s"]
        lines = [f"sweep of {result['matrix']}: {result['boots']} boots ({result['failed']} "
                 f"failed) in {result['wall_s']:.0f} s wall on {result['sweep_workers']} "
                 f"worker(s); per boot {min(per):.0f}-{max(per):.0f} s, sum {sum(per):.0f} s; "
                 f"start-up {result['startup_s']:.0f} s",
                 "projected (the same boots, one core per worker):"]
        for p in result["projection"]:
            lines.append(f"  {p['boots']:>6} boots on {p['workers']:>3} worker(s): "
                         f"{_hours(p['wall_s'])}")
        return "\n".join(lines)
    lines = [f"matrix {result['matrix']}, {result['cpus']} usable CPU(s)"]
    for r in result["runs"]:
        per = r["per_boot_s"]
        lines.append(f"{r['workers']} worker(s): {r['boots']} boots ({r['failed']} failed) in "
                     f"{r['wall_s']:.0f} s wall = {r['boots_per_hour'] or 0:.0f} boots/hour; "
                     f"per boot {min(per, default=0):.0f}-{max(per, default=0):.0f} s; load "
                     f"{_num(r['load_before'])} -> {_num(r['load_after'])}")
    if result["projection"]:
        lines.append(f"projected (one-worker boot times, {result['startup_s']:.0f} s startup, "
                     "one core per worker):")
        for p in result["projection"]:
            lines.append(f"  {p['boots']:>6} boots on {p['workers']:>3} worker(s): "
                         f"{_hours(p['wall_s'])}")
    return "\n".join(lines)


def _arguments(p) -> None:
    from ..validate import option_integer
    p.add_argument("--matrix", default=None,
                   help="the sweep matrix to boot (default data/lab/sweep/matrix.toml)")
    p.add_argument("--workers", type=option_integer(1, 256), default=2,
                   help="workers of the parallel run (default 2)")
    p.add_argument("--from-sweep", metavar="SWEEP.json", nargs="+", default=None,
                   help="boot nothing: project a finished sweep's measured boots "
                        "(RESULTS/sweep.json; several files: the runs of one matrix, one "
                        "after the other) on 1, 2, 8 and 32 workers")


def _run(args) -> dict:
    from ..datasets import repo_root
    if getattr(args, "from_sweep", None):
        import json
        return sweep_projection(merge_sweeps([json.loads(Path(f).read_text())
                                              for f in args.from_sweep]))
    matrix = args.matrix or str(repo_root() / "data" / "lab" / "sweep" / "matrix.toml")
    return run_lab_bench(matrix, args.workers,
                         say=lambda line: print(line, file=sys.stderr, flush=True))


from .bench import Benchmark, register  # noqa: E402 (bench imports this module only by name)

register(Benchmark(
    name="lab",
    help="boots/hour of numalab lab sweep here, one at a time vs --workers (QEMU), and "
         "the projected wall time of larger matrices",
    add_arguments=_arguments, run=_run, render=render))
