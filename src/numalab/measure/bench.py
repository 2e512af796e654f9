"""Benchmarks behind ``numalab bench TARGET``.

Each target registers a :class:`Benchmark`: a name, a one-line help, a
function adding its options to an argparse parser, and a function running it
(``run(args) -> dict``, the figures ``--json`` prints) plus one rendering the
dict as text. ``numalab bench group-cpus`` is the first; others (``bench
atomics`` ...) are added with :func:`register` in their own module, listed in
``_MODULES`` so the command imports them.

Benchmarks measure this machine at this moment: figures vary with load, so
they are reported, never asserted by tests.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..validate import integer, number, option_integer, option_number
from ..validate import seed as _seed

__all__ = ["Benchmark", "register", "targets", "calls_per_second",
           "GROUP_CPUS_CASES", "GROUP_CPUS_COMMAND_CASES",
           "time_group_cpus_command", "group_cpus_configs", "run_group_cpus_sweep"]


@dataclass(frozen=True)
class Benchmark:
    name: str
    help: str
    add_arguments: Callable
    run: Callable[..., dict]
    render: Callable[[dict], str]


_TARGETS: dict[str, Benchmark] = {}
MAX_SECONDS = 3600.0          # one timed measurement
MAX_CONFIGS = 10 ** 7         # sweep configurations
MAX_JOBS = 256                # sweep processes
# Modules that register further targets when imported.
_MODULES: tuple[str, ...] = ("numalab.measure.atomics", "numalab.measure.target",
                             "numalab.measure.book", "numalab.measure.lab")


def register(bench: Benchmark) -> Benchmark:
    """Add a target; the name is what follows ``numalab bench``."""
    _TARGETS[bench.name] = bench
    return bench


def targets() -> dict[str, Benchmark]:
    """All registered targets, by name (importing the modules that define them)."""
    for mod in _MODULES:
        try:
            importlib.import_module(mod)
        except ImportError:     # a target whose module is not there yet
            pass
    return dict(_TARGETS)


def calls_per_second(fn: Callable[[int], object], seconds: float = 1.0,
                     min_calls: int = 3) -> tuple[float, int]:
    """Call ``fn(i)`` for i = 0, 1, ... for about ``seconds``; return (calls/s, calls).

    One untimed warm-up call first (it fills per-topology caches).
    ``seconds`` is a number in (0, MAX_SECONDS], ``min_calls`` an integer >= 1.

    >>> rate, calls = calls_per_second(lambda i: None, seconds=0.01)
    >>> calls >= 3 and rate > 0
    True
    """
    number("seconds", seconds, 0, MAX_SECONDS, lo_open=True)
    integer("min_calls", min_calls, 1, 10 ** 9)
    fn(0)
    n = 0
    start = time.perf_counter()
    while True:
        fn(n)
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds and n >= min_calls:
            return n / elapsed, n


# ---------------------------------------------------------------------------
# group-cpus
# ---------------------------------------------------------------------------

GROUP_CPUS_CASES = (
    # (synthetic topology, groups, target calls/s)
    ("numa:2 cluster:24 core:2 pu:1", 62, 5000),
    ("numa:8 cluster:128 core:4 pu:1", 512, 100),
)

# ``numalab group-cpus`` end to end (topology built, masks, one-pass metrics,
# text rendered), in this process: (topology, groups, devices, variant, target s)
GROUP_CPUS_COMMAND_CASES = (
    ("pack:8 numa:8 cluster:16 core:4 pu:2", 4096, 1, "mainline", 1.0),
    ("pack:8 numa:8 cluster:16 core:4 pu:2", 3000, 16, "rotate", 5.0),
)


def time_group_cpus_command(topology: str, groups: int, devices: int = 1,
                            variant: str = "mainline", repeats: int = 3) -> list[float]:
    """Seconds of ``numalab group-cpus TOPOLOGY -g groups -d devices --variant
    variant`` in this process (topology parsed afresh each time, the text
    output rendered but not printed), ``repeats`` times.

    >>> len(time_group_cpus_command("numa:1 core:2 pu:1", 2, repeats=2))
    2
    """
    from ..commands.group_cpus import compute, render
    from ..topology import load
    integer("repeats", repeats, 1, 1000)
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        render(compute(load(topology), groups, devices, variant))
        out.append(time.perf_counter() - start)
    return out


_SWEEP_SHAPES = (
    "numa:1 core:8 pu:2", "numa:2 core:8 pu:2", "numa:2 cluster:24 core:2 pu:1",
    "numa:2 cluster:12 core:4 pu:2", "numa:4 core:16 pu:2", "numa:4 cluster:8 core:4 pu:1",
    "pack:2 numa:2 cluster:4 core:4 pu:2", "numa:8 core:8 pu:2", "numa:8 cluster:4 core:4 pu:2",
    "numa:2 core:64 pu:2", "numa:1 cluster:32 core:4 pu:1", "numa:3 cluster:5 core:3 pu:2",
)


def group_cpus_configs(n: int = 10_000, seed: int = 0) -> list[tuple[str, int, str, int]]:
    """``n`` sweep configurations ``(shape, groups, variant, devices)``, from ``seed``.

    >>> len(group_cpus_configs(4)), group_cpus_configs(4) == group_cpus_configs(4)
    (4, True)
    """
    integer("n", n, 0, MAX_CONFIGS)
    _seed(seed)
    rng = random.Random(seed)
    sizes = {}
    from ..topology import load
    for s in _SWEEP_SHAPES:
        sizes[s] = load(s).possible.bit_count()
    out = []
    for i in range(n):
        s = _SWEEP_SHAPES[i % len(_SWEEP_SHAPES)]
        out.append((s, rng.randint(1, 2 * sizes[s]), ("mainline", "rotate")[(i // 2) % 2],
                    rng.randint(1, 4)))
    return out


_WORKER_TOPOS: dict = {}


def _sweep_chunk(chunk: list[tuple[str, int, str, int]]) -> tuple[int, int]:
    """Run configurations; return (sum of max dedicated vectors per CPU, calls)."""
    from ..kernel.lib.group_cpus import prepare, spread_devices
    from ..models.irq.load import irq_load
    from ..topology import load
    digest = calls = 0
    for shape, groups, variant, devices in chunk:
        view = _WORKER_TOPOS.get(shape)
        if view is None:
            view = _WORKER_TOPOS[shape] = prepare(load(shape))
        devs = spread_devices(groups, view, devices, variant)
        digest += max(irq_load(devs, view.possible).dedicated)
        calls += devices
    return digest, calls


def run_group_cpus_sweep(n: int = 10_000, jobs: int = 2, seed: int = 0) -> dict:
    """Time ``n`` configurations over ``jobs`` processes; the digest checks the work."""
    integer("n", n, 1, MAX_CONFIGS)
    integer("jobs", jobs, 1, MAX_JOBS)
    configs = group_cpus_configs(n, seed)
    size = max(1, len(configs) // (jobs * 8))
    chunks = [configs[i:i + size] for i in range(0, len(configs), size)]
    start = time.perf_counter()
    if jobs <= 1:
        parts = [_sweep_chunk(c) for c in chunks]
    else:
        ctx = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
        with ctx.Pool(jobs) as pool:
            parts = pool.map(_sweep_chunk, chunks)
    elapsed = time.perf_counter() - start
    return {"configurations": len(configs), "jobs": jobs, "seconds": elapsed,
            "configurations_per_second": len(configs) / elapsed if elapsed else 0.0,
            "calls": sum(p[1] for p in parts), "digest": sum(p[0] for p in parts)}


def _group_cpus_args(p) -> None:
    p.add_argument("--seconds", type=option_number(0, MAX_SECONDS, lo_open=True), default=1.0,
                   help=f"time per measurement, 0 < S <= {MAX_SECONDS:g} (default 1)")
    p.add_argument("--repeats", type=option_integer(1, 1000), default=3,
                   help="runs of each numalab group-cpus command case, 1..1000 (default 3)")
    p.add_argument("--sweep", action="store_true",
                   help="also time a sweep of --configs configurations over --jobs processes")
    p.add_argument("--configs", type=option_integer(1, MAX_CONFIGS), default=10_000,
                   help=f"sweep size, 1..{MAX_CONFIGS} (default 10000)")
    p.add_argument("--jobs", type=option_integer(1, MAX_JOBS), default=2,
                   help=f"sweep processes, 1..{MAX_JOBS} (default 2)")


def _group_cpus_run(args) -> dict:
    from ..kernel.lib.group_cpus import group_cpus_evenly, prepare
    from ..topology import load
    number("--seconds", args.seconds, 0, MAX_SECONDS, lo_open=True)
    integer("--configs", args.configs, 1, MAX_CONFIGS)
    integer("--jobs", args.jobs, 1, MAX_JOBS)
    rows = []
    for shape, groups, target in GROUP_CPUS_CASES:
        view = prepare(load(shape))
        for variant in ("mainline", "rotate"):
            rate, calls = calls_per_second(
                lambda i, v=variant: group_cpus_evenly(groups, view, v, i), args.seconds)
            rows.append({"topology": shape, "cpus": view.possible.bit_count(), "groups": groups,
                         "variant": variant, "calls_per_second": rate, "calls": calls,
                         "target": target, "meets_target": rate >= target})
    commands = []
    for shape, groups, devices, variant, target in GROUP_CPUS_COMMAND_CASES:
        secs = time_group_cpus_command(shape, groups, devices, variant, args.repeats)
        commands.append({"topology": shape, "groups": groups, "devices": devices,
                         "variant": variant, "seconds_min": min(secs),
                         "seconds_max": max(secs), "runs": len(secs), "target_seconds": target,
                         "meets_target": max(secs) < target})
    out = {"benchmark": "group-cpus", "cases": rows, "commands": commands}
    if args.sweep:
        out["sweep"] = run_group_cpus_sweep(args.configs, args.jobs)
    return out


def _group_cpus_render(res: dict) -> str:
    lines = [f"{'topology':<32} {'cpus':>5} {'groups':>6} {'variant':<9} "
             f"{'calls/s':>9} {'target':>7}  ok"]
    for r in res["cases"]:
        lines.append(f"{r['topology']:<32} {r['cpus']:>5} {r['groups']:>6} {r['variant']:<9} "
                     f"{r['calls_per_second']:>9.0f} {r['target']:>7}  "
                     f"{'yes' if r['meets_target'] else 'NO'}")
    for c in res.get("commands", []):
        lines.append(f"numalab group-cpus \"{c['topology']}\" -g {c['groups']} -d {c['devices']} "
                     f"--variant {c['variant']}: {c['seconds_min']:.2f}-{c['seconds_max']:.2f} s "
                     f"over {c['runs']} runs (target < {c['target_seconds']:g} s)  "
                     f"{'yes' if c['meets_target'] else 'NO'}")
    if "sweep" in res:
        s = res["sweep"]
        lines.append(f"sweep: {s['configurations']} configurations ({s['calls']} calls) on "
                     f"{s['jobs']} process(es) in {s['seconds']:.2f} s "
                     f"({s['configurations_per_second']:.0f}/s); digest {s['digest']}")
    return "\n".join(lines)


register(Benchmark("group-cpus", "calls/s of group_cpus_evenly() (mainline and rotate) and "
                   "the time of two large numalab group-cpus commands",
                   _group_cpus_args, _group_cpus_run, _group_cpus_render))
