"""Checks for the numbers a user types or a caller passes.

One place decides what "a valid number" means for every model, benchmark
and command-line option: finite (no NaN, no infinity), in range, of the
right type (an integer where a count is meant, never a bool). The models
call the checkers at their boundary and get a :class:`ParameterError`
(a NumalabError and a ValueError) naming the parameter; ``argparse`` gets
the same rules through the ``option_*`` factories, used as ``type=``, so a
bad option is one line and exit status 2, before anything runs.

>>> number("alpha", 0.5, 0, 1)
0.5
>>> number("alpha", float("nan"), 0, 1)
Traceback (most recent call last):
numalab.errors.ParameterError: alpha must be a number in [0, 1], not nan
"""

from __future__ import annotations

import argparse
import math
import numbers
from collections.abc import Callable, Iterable
from typing import Any

from .errors import ParameterError, one_line

__all__ = ["ParameterError", "MAX_SEED", "number", "integer", "seed", "one_of", "budget",
           "option_number", "option_integer", "option_seed"]

MAX_SEED = 2 ** 64 - 1     # numpy's SeedSequence takes any int >= 0; one 64-bit word is plenty


def _bound(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


def _need(kind: str, lo, hi, lo_open: bool, hi_open: bool) -> str:
    """What a value must be, in words: ``"a number in (0, 1]"``, ``"an integer >= 1"``."""
    if lo is not None and hi is not None:
        left, right = "(" if lo_open else "[", ")" if hi_open else "]"
        return f"{kind} in {left}{_bound(lo)}, {_bound(hi)}{right}"
    if lo is not None:
        return f"{kind} {'>' if lo_open else '>='} {_bound(lo)}"
    if hi is not None:
        return f"{kind} {'<' if hi_open else '<='} {_bound(hi)}"
    return "a finite number" if kind == "a number" else kind


def _in_range(v, lo, hi, lo_open: bool, hi_open: bool) -> bool:
    if lo is not None and (v < lo or (lo_open and v == lo)):
        return False
    if hi is not None and (v > hi or (hi_open and v == hi)):
        return False
    return True


def _number_problem(x: Any, lo, hi, lo_open: bool, hi_open: bool) -> tuple[float | None, str]:
    """(the value as a float, or None when it is not valid; the requirement)."""
    need = _need("a number", lo, hi, lo_open, hi_open)
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        return None, need
    try:
        v = float(x)
    except (OverflowError, ValueError):
        return None, need
    if not math.isfinite(v) or not _in_range(v, lo, hi, lo_open, hi_open):
        return None, need
    return v, need


def _integer_problem(x: Any, lo, hi) -> tuple[int | None, str]:
    need = _need("an integer", lo, hi, False, False)
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        return None, need
    v = int(x)
    return (v if _in_range(v, lo, hi, False, False) else None), need


def _show(x: Any) -> str:
    """``repr(x)`` on one line, cut to 60 characters."""
    r = one_line(repr(x))
    return r if len(r) <= 60 else r[:57] + "..."


def number(name: str, x: Any, lo: float | None = None, hi: float | None = None, *,
           lo_open: bool = False, hi_open: bool = False,
           error: type[Exception] = ParameterError) -> float:
    """``x`` as a float when it is a finite real number (not a bool) within
    the bounds (closed unless ``lo_open`` / ``hi_open``); else ``error``
    (default :class:`ParameterError`) naming ``name``.

    >>> number("load", 1, 0, 1, lo_open=True)
    1.0
    >>> number("load", 0, 0, 1, lo_open=True)
    Traceback (most recent call last):
    numalab.errors.ParameterError: load must be a number in (0, 1], not 0
    >>> number("duration_ms", float("inf"), 0)
    Traceback (most recent call last):
    numalab.errors.ParameterError: duration_ms must be a number >= 0, not inf
    """
    v, need = _number_problem(x, lo, hi, lo_open, hi_open)
    if v is None:
        raise error(f"{name} must be {need}, not {_show(x)}")
    return v


def integer(name: str, x: Any, lo: int | None = None, hi: int | None = None, *,
            error: type[Exception] = ParameterError) -> int:
    """``x`` as an int when it is an integer (Python or numpy; not a bool,
    not a float such as 2.0) within ``[lo, hi]``; else ``error``.

    >>> integer("rounds", 4, 1)
    4
    >>> integer("rounds", 2.0, 1)
    Traceback (most recent call last):
    numalab.errors.ParameterError: rounds must be an integer >= 1, not 2.0
    """
    v, need = _integer_problem(x, lo, hi)
    if v is None:
        raise error(f"{name} must be {need}, not {_show(x)}")
    return v


def seed(x: Any, name: str = "seed", *, error: type[Exception] = ParameterError) -> int:
    """A random seed: an integer in ``[0, MAX_SEED]`` (what numpy's
    generators take).

    >>> seed(7)
    7
    >>> seed(-1)
    Traceback (most recent call last):
    numalab.errors.ParameterError: seed must be an integer in [0, 18446744073709551615], not -1
    """
    return integer(name, x, 0, MAX_SEED, error=error)


def one_of(name: str, x: Any, options: Iterable, *,
           error: type[Exception] = ParameterError) -> Any:
    """``x`` when it is one of ``options``; else ``error`` listing them.

    >>> one_of("mode", "shared", ("shared", "percpu"))
    'shared'
    >>> one_of("mode", "x", ("shared", "percpu"))
    Traceback (most recent call last):
    numalab.errors.ParameterError: mode must be one of 'shared', 'percpu', not 'x'
    """
    opts = list(options)
    try:
        ok = x in opts
    except TypeError:        # an unhashable value against a set of options
        ok = False
    if not ok:
        raise error(f"{name} must be one of {', '.join(map(repr, opts))}, not {_show(x)}")
    return x


def budget(what: str, events: float, limit: float, hint: str, *, unit: str = "simulated events",
           error: type[Exception] = ParameterError) -> float:
    """Refuse a run whose estimated number of simulated events is not a
    finite number at most ``limit`` (a run that would not end in a human
    time, or never: zero-length steps); ``hint`` says which knob to turn.

    >>> budget("run", 1e3, 1e6, "shorten it")
    1000.0
    >>> budget("run", float("inf"), 1e6, "shorten it")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    numalab.errors.ParameterError: run: simulated time would not advance ...; shorten it
    >>> budget("run", 2e7, 1e6, "shorten it")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    numalab.errors.ParameterError: run: about 2e+07 simulated events, more than ... allowed; ...
    """
    if not math.isfinite(events):
        raise error(f"{what}: simulated time would not advance (unbounded number of {unit}); "
                    f"{hint}")
    if events > limit:
        raise error(f"{what}: about {events:.3g} {unit}, more than the {limit:.3g} "
                    f"allowed; {hint}")
    return float(events)


# -- argparse ``type=`` functions ------------------------------------------------

def option_number(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
                  hi_open: bool = False) -> Callable[[str], float]:
    """An ``argparse`` ``type=`` function: the text as a finite float within
    the bounds, else ``argparse.ArgumentTypeError`` (argparse then prints
    ``argument --X: must be ..., not '...'`` on one line and exits 2).

    >>> option_number(0, 1)("0.25")
    0.25
    >>> option_number(0, 1)("nan")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: must be a number in [0, 1], not 'nan'
    """
    def parse(text: str) -> float:
        try:
            x: Any = float(text)
        except ValueError:
            x = None
        v, need = _number_problem(x, lo, hi, lo_open, hi_open)
        if v is None:
            raise argparse.ArgumentTypeError(f"must be {need}, not {_show(text)}")
        return v
    parse.__name__ = "number"
    return parse


def option_integer(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
    """An ``argparse`` ``type=`` function for an integer within ``[lo, hi]``.

    >>> option_integer(1, 8)("3")
    3
    >>> option_integer(1, 8)("0")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: must be an integer in [1, 8], not '0'
    """
    def parse(text: str) -> int:
        try:
            x: Any = int(text)
        except ValueError:        # "1.5", "nan", or more digits than int() takes
            x = None
        v, need = _integer_problem(x, lo, hi)
        if v is None:
            raise argparse.ArgumentTypeError(f"must be {need}, not {_show(text)}")
        return v
    parse.__name__ = "integer"
    return parse


def option_seed() -> Callable[[str], int]:
    """An ``argparse`` ``type=`` function for a seed (see :func:`seed`).

    >>> option_seed()("42")
    42
    """
    return option_integer(0, MAX_SEED)
