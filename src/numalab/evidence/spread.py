"""Headlines with their spread: over seeds, and over an assumed parameter's range.

>>> s = over_seeds(lambda seed: 10 + seed, seeds=range(5))
>>> s.median, s.low, s.high, s.n
(12.0, 10.0, 14.0, 5)
>>> s.text("%")
'12 % (median of 5 seeds, range 10-14 %)'
>>> over_range(lambda x: 2 * x, "x", [1, 2, 3])["result"].tolist()
[2, 4, 6]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import median
from typing import Callable, Iterable

from .roles import Value, fmt

__all__ = ["Spread", "over_seeds", "over_range", "MIN_SEEDS"]

#: The fewest seeds a simulated headline may be reported over.
MIN_SEEDS = 5


@dataclass(frozen=True)
class Spread:
    """A simulated quantity over several seeds."""
    values: tuple[float, ...]
    seeds: tuple[int, ...]

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def median(self) -> float:
        return float(median(self.values))

    @property
    def low(self) -> float:
        return float(min(self.values))

    @property
    def high(self) -> float:
        return float(max(self.values))

    def text(self, unit: str = "", digits: int = 3) -> str:
        u = f" {unit}" if unit else ""
        return (f"{fmt(self.median, digits)}{u} (median of {self.n} seeds, "
                f"range {fmt(self.low, digits)}-{fmt(self.high, digits)}{u})")

    def value(self, role: str = "predicted", unit: str = "", source: str = "") -> Value:
        """The median as a :class:`Value` whose spread is the seed range."""
        return Value(self.median, role, unit, source, spread=(self.low, self.high))


def over_seeds(fn: Callable[[int], float], seeds: Iterable[int] = range(MIN_SEEDS)) -> Spread:
    """Run ``fn(seed)`` for every seed (at least :data:`MIN_SEEDS`)."""
    seeds = tuple(seeds)
    if len(seeds) < MIN_SEEDS:
        raise ValueError(f"a simulated headline needs at least {MIN_SEEDS} seeds, not {len(seeds)}")
    vals = tuple(float(fn(s)) for s in seeds)
    if not all(math.isfinite(v) for v in vals):
        raise ValueError(f"non-finite result over seeds {seeds}: {vals}")
    return Spread(vals, seeds)


def over_range(fn: Callable[[float], float], name: str, values: Iterable[float]):
    """A sensitivity table: ``fn(v)`` for each value ``v`` of the assumed
    parameter ``name``; columns ``parameter``, ``value``, ``result``."""
    import pandas as pd
    rows = [{"parameter": name, "value": v, "result": fn(v)} for v in values]
    return pd.DataFrame(rows, columns=["parameter", "value", "result"])
