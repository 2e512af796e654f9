"""The ``numalab`` command.

Each sub-command lives in ``numalab/commands/NAME.py`` and exposes
``add_parser(subparsers)``, which registers its options and sets
``func(args) -> int``. Errors caused by input (NumalabError) are printed as
one line on stderr with exit status 2, never as a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from . import __version__
from .errors import NumalabError

COMMANDS = ["show", "collect", "build", "probe", "idle", "group_cpus", "bench"]


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="numalab",
        description="How the Linux kernel places work on NUMA machines: "
                    "read topologies, run the kernel ports and models, build the book.")
    parser.add_argument("--version", action="version", version=f"numalab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(f"numalab.commands.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except NumalabError as e:
        print(f"numalab {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"numalab {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
