"""``numalab bench TARGET [options] [--json]``: time the models on this machine.

Targets come from :mod:`numalab.measure.bench` (``group-cpus`` today); each has
its own options, see ``numalab bench TARGET --help``.
"""

from __future__ import annotations

import json

from ..measure.bench import targets


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="benchmark a model (numalab bench group-cpus ...)",
                       description="Measure how fast numalab's ports run here. Figures depend "
                                   "on the machine and its load.")
    tsub = p.add_subparsers(dest="target", metavar="TARGET")
    tsub.required = True
    for name, b in sorted(targets().items()):
        tp = tsub.add_parser(name, help=b.help, description=b.help)
        b.add_arguments(tp)
        tp.add_argument("--json", action="store_true", help="machine-readable output")
        tp.set_defaults(func=run, bench=b)


def run(args) -> int:
    result = args.bench.run(args)
    print(json.dumps(result) if args.json else args.bench.render(result))
    return 0
