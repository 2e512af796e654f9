"""Error types. Every error a user can cause by their input is a NumalabError;
the CLI prints it as one line and exits with status 2."""

from __future__ import annotations


class NumalabError(Exception):
    """Base of every error caused by input (a bad dump, a bad option)."""


# Control characters shown escaped: a path or a synthetic string from
# someone else may hold a newline (or a terminal escape sequence), and the
# message must stay one harmless line.
_ESCAPES = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F]}
_ESCAPES.update({0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"})


def one_line(text: str) -> str:
    """``text`` with control characters escaped.

    >>> one_line("a\\nb")
    'a\\\\nb'
    """
    return text.translate(_ESCAPES)


class TopologyError(NumalabError):
    """A topology dump or description that cannot be read.

    ``path`` names the file (or member) at fault; ``str()`` gives
    ``"PATH: problem"`` so that one line says where and what (control
    characters escaped; ``path`` and ``problem`` keep the raw text).
    """

    def __init__(self, path: str | None, problem: str):
        self.path = str(path) if path is not None else None
        self.problem = problem
        super().__init__(one_line(f"{self.path}: {problem}" if self.path else problem))


class UnsafeArchiveError(TopologyError):
    """A tar member that would write outside the dump (absolute path, ``..``,
    device file, or a link pointing outside); it is refused, never extracted."""


class ParameterError(NumalabError, ValueError):
    """A number or option given to a model, a benchmark or the command line
    that is out of range, not finite or of the wrong type (NaN, an infinite
    duration, a negative count, a seed numpy cannot take...). The message
    names the parameter, says what it must be and shows the value given."""
