"""``numalab bench book``: how long the README's ``make book`` takes here.

Each run clones the checkout's committed ``HEAD`` into a temporary folder
(a fresh clone: no ``.numalab-cache``, no ``_build``), builds the full book
there with this interpreter (the virtual environment is reused, as after a
first ``make book``; the clone's own ``src/`` is imported), then builds it
again with nothing changed. Figures: the wall time of both builds, each
chapter's execution time as the build reports it, and the load average
before and after, so a loaded machine shows in the result. Reported, never
asserted: a benchmark measures this machine at this moment.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..errors import NumalabError

__all__ = ["parse_build_output", "run_book_bench", "render", "summarise"]

_DONE = re.compile(r"^notebooks/(?P<stem>[\w.-]+)\.ipynb: done in (?P<s>[0-9.]+) s$")
_HTML = re.compile(r"^html: done in (?P<s>[0-9.]+) s$")


def parse_build_output(text: str) -> dict:
    """Per-chapter execution seconds and the Sphinx time from ``numalab build``'s lines.

    >>> parse_build_output("notebooks/01-machine.ipynb: done in 7.3 s\\n"
    ...                    "html: done in 20.0 s\\n")
    {'chapters': {'01-machine': 7.3}, 'sphinx_s': 20.0}
    """
    chapters, sphinx = {}, None
    for line in text.splitlines():
        m = _DONE.match(line.strip())
        if m:
            chapters[m["stem"]] = float(m["s"])
        m = _HTML.match(line.strip())
        if m:
            sphinx = float(m["s"])
    return {"chapters": chapters, "sphinx_s": sphinx}


def _load() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def _timed_build(clone: Path, args: list[str], timeout: float) -> tuple[float, str]:
    env = dict(os.environ, PYTHONPATH=str(clone / "src"), PYTHONHASHSEED="0")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "numalab", "build", *args], cwd=clone,
                          env=env, capture_output=True, text=True, timeout=timeout)
    secs = time.monotonic() - t0
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
        raise NumalabError("numalab bench book: the build failed:\n  " + "\n  ".join(tail))
    return secs, proc.stdout


def run_book_bench(repo: Path, runs: int = 3, jobs: int | None = None,
                   timeout: float = 3600.0, say=lambda line: None) -> dict:
    """Clone ``repo``'s HEAD ``runs`` times; time a full build and a no-change rebuild.

    Returns ``{"runs": [{"full_s", "rebuild_s", "chapters", "sphinx_s",
    "load_before", "load_after"}, ...], "jobs", "commit", "cpus"}``.
    """
    repo = Path(repo).resolve()
    if not (repo / ".git").exists():
        raise NumalabError(f"{repo}: not a git checkout (numalab bench book clones HEAD)")
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    extra = [] if jobs is None else ["--jobs", str(jobs)]
    out = []
    for i in range(runs):
        with tempfile.TemporaryDirectory(prefix="numalab-bench-book-") as tmp:
            clone = Path(tmp) / "numalab"
            subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(repo), str(clone)],
                           check=True, capture_output=True)
            # Tests and a few data checks look for ../shared beside the checkout;
            # the build does not, so nothing is linked.
            before = _load()
            full, text = _timed_build(clone, extra, timeout)
            rebuild, _ = _timed_build(clone, extra, timeout)
            row = {"full_s": full, "rebuild_s": rebuild, **parse_build_output(text),
                   "load_before": before, "load_after": _load()}
            out.append(row)
            say(f"run {i + 1}/{runs}: full build {full:.1f} s, no-change rebuild "
                f"{rebuild:.2f} s (load {before} -> {row['load_after']})")
            shutil.rmtree(clone, ignore_errors=True)
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count()
    return {"benchmark": "book", "commit": commit, "jobs": jobs, "cpus": cpus, "runs": out}


def summarise(values: list[float]) -> dict:
    """Min, median and max of a list of seconds.

    >>> summarise([3.0, 1.0, 2.0])
    {'min': 1.0, 'median': 2.0, 'max': 3.0}
    """
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def render(result: dict) -> str:
    """The ``book`` dict as text: min/median/max per figure."""
    runs = result["runs"]
    lines = [f"commit {result['commit']}, {len(runs)} fresh clone(s), {result['cpus']} usable "
             f"CPU(s), --jobs {result['jobs'] or 'default'}"]

    def row(name, vals):
        s = summarise(vals)
        lines.append(f"{name:<28} min {s['min']:7.1f} s  median {s['median']:7.1f} s  "
                     f"max {s['max']:7.1f} s")

    row("full build", [r["full_s"] for r in runs])
    row("no-change rebuild", [r["rebuild_s"] for r in runs])
    stems = sorted({s for r in runs for s in r["chapters"]})
    for stem in stems:
        row(f"  {stem}", [r["chapters"][stem] for r in runs if stem in r["chapters"]])
    if all(r["sphinx_s"] is not None for r in runs):
        row("  jupyter-book (Sphinx)", [r["sphinx_s"] for r in runs])
    loads = [x for r in runs for x in (r["load_before"], r["load_after"]) if x is not None]
    if loads:
        lines.append(f"load average (1 min) between {min(loads):.2f} and {max(loads):.2f}")
    return "\n".join(lines)


def _arguments(p) -> None:
    from ..validate import option_integer, option_number
    p.add_argument("--runs", type=option_integer(1, 20), default=3,
                   help="fresh clones built, 1..20 (default 3)")
    p.add_argument("--jobs", type=option_integer(1, 64), default=None,
                   help="passed to numalab build (default: its own default, the usable CPUs)")
    p.add_argument("--repo", default=None,
                   help="the checkout whose HEAD is cloned (default: this checkout)")
    p.add_argument("--timeout", type=option_number(0, 86400, lo_open=True), default=3600.0,
                   help="seconds one build may take (default 3600)")


def _run(args) -> dict:
    from ..datasets import repo_root
    repo = Path(args.repo) if args.repo else repo_root()
    return run_book_bench(repo, args.runs, args.jobs, args.timeout,
                          say=lambda line: print(line, file=sys.stderr, flush=True))


from .bench import Benchmark, register  # noqa: E402 (bench imports this module only by name)

register(Benchmark(
    name="book",
    help="time make book's build on fresh clones of HEAD (full, then no-change), "
         "min/median/max over --runs",
    add_arguments=_arguments, run=_run, render=render))
