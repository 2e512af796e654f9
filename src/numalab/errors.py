"""Error types. Every error a user can cause by their input is a NumalabError;
the CLI prints it as one line and exits with status 2."""

from __future__ import annotations


class NumalabError(Exception):
    """Base of every error caused by input (a bad dump, a bad option)."""


class TopologyError(NumalabError):
    """A topology dump or description that cannot be read.

    ``path`` names the file (or member) at fault; ``str()`` gives
    ``"PATH: problem"`` so that one line says where and what.
    """

    def __init__(self, path: str | None, problem: str):
        self.path = str(path) if path is not None else None
        self.problem = problem
        super().__init__(f"{self.path}: {problem}" if self.path else problem)


class UnsafeArchiveError(TopologyError):
    """A tar member that would write outside the dump (absolute path, ``..``,
    device file, or a link pointing outside); it is refused, never extracted."""
