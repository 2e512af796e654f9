"""``numalab collect [-o PATH] [--name NAME]``: snapshot this machine."""

from __future__ import annotations

import argparse
import sys

from ..collect import collect


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
    # Tests collect from a fake tree; not for users.
    p.add_argument("--root", default="/", help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args) -> int:
    path = collect(root=args.root, output=args.output, name=args.name,
                   progress=lambda msg: print(f"numalab collect: {msg}", file=sys.stderr))
    print(path)
    return 0
