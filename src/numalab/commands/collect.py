"""``numalab collect [-o PATH] [--name NAME] [--bench [--runs N] [--quick]]``: snapshot this machine
(and optionally measure its cache-line latencies)."""

from __future__ import annotations

import argparse
import sys

from ..collect import collect
from ..measure.atomics import RUNS
from ..validate import option_integer


def add_parser(sub) -> None:
    p = sub.add_parser("collect", help="snapshot this machine's topology into a .tar.bz2",
                       description="Copy the sysfs/procfs files that describe this machine's "
                                   "CPUs, NUMA nodes, PCI devices, blk-mq queues and "
                                   "interrupts into a .tar.bz2 in hwloc-gather-topology's "
                                   "layout (readable by 'numalab show' and 'lstopo -i'). "
                                   "Runs unprivileged; files it cannot read are listed in "
                                   "NAME/numalab-manifest.json. Never overwrites a file.")
    p.add_argument("-o", "--output", metavar="PATH",
                   help="archive to write (NAME.tar.bz2), or a directory for it "
                        "(default: data/collected/ in the checkout)")
    p.add_argument("--name", help="the archive's top folder (default: from PATH, else "
                                  "ARCH-NCPUcpu-NNODESn-DATE; never the host name)")
    p.add_argument("--bench", action="store_true",
                   help="also run the atomics microbenchmark (core-to-core round trips, "
                        "refcount_t get/put against a per-CPU add; see 'numalab.measure.atomics') "
                        "--runs times, each run with its load average and host CPU, and store "
                        "them as NAME/numalab/bench.json; takes a few seconds per CPU pair and run")
    p.add_argument("--runs", type=option_integer(1, 1000), default=RUNS, metavar="N",
                   help=f"with --bench: runs of the whole benchmark (default {RUNS})")
    p.add_argument("--quick", action="store_true",
                   help="with --bench: fewer iterations (noisier, much faster)")
    # Tests collect from a fake tree; not for users.
    p.add_argument("--root", default="/", help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def _bench_files(quick: bool, runs: int = RUNS) -> dict[str, bytes]:
    """Run the atomics benchmark ``runs`` times; its JSON for
    ``collect(extra_files=...)``.
    Raises BenchUnavailable (a NumalabError: one line, exit 2) where it
    cannot run."""
    import json

    from ..measure.atomics import run_atomics_repeated

    def progress(done: int, total: int) -> None:
        if done == total or done % 16 == 0:
            print(f"numalab collect: bench: {done}/{total} CPU pairs", file=sys.stderr)

    result = run_atomics_repeated(runs, quick=quick, progress=progress)
    # chapter 4's measured inputs: a parallel build's switch rate, a contended bitmap
    from ..measure import run_idle_inputs
    result["idle_inputs"] = run_idle_inputs(quick=quick)
    print(f"numalab collect: bench: done in {result['seconds']} s", file=sys.stderr)
    return {"bench.json": (json.dumps(result, indent=1) + "\n").encode()}


def run(args) -> int:
    # benchmark first: a failure then leaves no half-made archive behind
    extra = _bench_files(args.quick, args.runs) if args.bench else None
    path = collect(root=args.root, output=args.output, name=args.name,
                   progress=lambda msg: print(f"numalab collect: {msg}", file=sys.stderr),
                   extra_files=extra)
    print(path)
    return 0
