"""The ``numalab`` command.

Each sub-command lives in ``numalab/commands/NAME.py`` and exposes
``add_parser(subparsers)``, which registers its options and sets
``func(args) -> int``. Errors caused by input (NumalabError) are printed as
one line on stderr with exit status 2, never as a traceback; so are
command-line mistakes (an unknown option, a value that is not a finite
number in range: see :mod:`numalab.validate`), without argparse's usage
block.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from . import __version__
from .errors import NumalabError, one_line

COMMANDS = ["show", "collect", "build", "probe", "idle", "group_cpus", "bench", "lab"]


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``numalab CMD: error: MESSAGE`` and
    exit status 2 (the usage is one ``--help`` away). Sub-command parsers
    are of the same class (``add_subparsers`` uses the parent's)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see '{self.prog} --help')\n")


def make_parser() -> argparse.ArgumentParser:
    parser = Parser(
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
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:          # --help, --version, or a one-line usage error
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    try:
        return int(args.func(args) or 0)
    except NumalabError as e:
        print(f"numalab {args.command}: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"numalab {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
