"""``numalab build [--data PATH ...] [--jobs N] [--only CHAPTER] [--quick]``:
execute the chapter notebooks and render the book into ``_build/html``."""

from __future__ import annotations

import os
import sys

from ..validate import option_integer

MAX_JOBS = 64


def add_parser(sub) -> None:
    p = sub.add_parser(
        "build", help="execute the notebooks and render the book (incremental)",
        description="Execute notebooks/*.ipynb with papermill (only those whose inputs "
                    "changed since the last build: the cache is .numalab-cache/), then "
                    "render the book with jupyter-book into _build/html. A failing "
                    "notebook is named with its cell and leaves the previous book as "
                    "it was.")
    p.add_argument("--data", nargs="+", action="extend", metavar="PATH",
                   help="datasets for the chapters that read machines: sysfs dumps "
                        "(directory or .tar.bz2), hwloc .xml, lscpu .csv, .toml "
                        "descriptions or synthetic strings (default: data/ and "
                        "../shared/topologies/hwloc)")
    p.add_argument("--jobs", "-j", type=option_integer(1, MAX_JOBS), default=None, metavar="N",
                   help=f"notebooks executed at once, each in its own process, 1..{MAX_JOBS} "
                        f"(default: the CPUs this process may use, {usable_cpus()} here)")
    p.add_argument("--only", metavar="CHAPTER",
                   help="execute just this chapter (name like 03-probing, or number "
                        "like 3); the others come from the cache")
    p.add_argument("--quick", action="store_true",
                   help="pass quick=True: small sweeps (what the tests use)")
    p.add_argument("--force", action="store_true",
                   help="execute again even when the cache has a result")
    p.set_defaults(func=run)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, so a container's
    or ``taskset``'s limit counts), at most MAX_JOBS; 1 when unknown."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(n, MAX_JOBS))


def run(args) -> int:
    from ..build import build

    def say(line: str) -> None:
        print(line, flush=True)

    # Kernels started by papermill inherit this: same inputs, same hashes.
    os.environ.setdefault("PYTHONHASHSEED", "0")
    status = build(data=args.data, jobs=args.jobs or usable_cpus(), only=args.only, quick=args.quick,
                   force=args.force, say=say)
    sys.stdout.flush()
    return status
