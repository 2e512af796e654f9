"""Roles of the numbers a chapter reports.

>>> Value(3.77, "predicted", "%", source="idle_sim on dgx-b200").text()
'3.77 % (predicted)'
>>> Value(42.25, "fitted", "ns", source="kperf TX idle").role
'fitted'
>>> Value(1.0, "guessed")
Traceback (most recent call last):
...
ValueError: role must be one of measured, fitted, predicted, assumed, published; not 'guessed'
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["ROLES", "ROLE_MEANING", "Value", "role_table", "fmt"]

ROLES = ("measured", "fitted", "predicted", "assumed", "published")

ROLE_MEANING = {
    "measured": "measured on a machine or a real kernel (which one is said)",
    "fitted": "calibrated to a published figure: not evidence for the model",
    "predicted": "computed without the figure it is compared with",
    "assumed": "a parameter with no measurement behind it (source or range given)",
    "published": "a figure from the patch itself, quoted",
}


def fmt(x: float, digits: int = 3) -> str:
    """A number with ``digits`` significant digits, no exponent for ordinary
    magnitudes, integers without a decimal point.

    >>> fmt(3.7712), fmt(1234.7), fmt(0.000123), fmt(28), fmt(float("nan"))
    ('3.77', '1235', '0.000123', '28', 'nan')
    """
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    if not math.isfinite(x):
        return str(x)
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    s = f"{x:.{digits}g}"
    if "e" in s:
        mant, exp = s.split("e")
        e = int(exp)
        if -6 <= e < 15:
            s = f"{x:.{max(0, digits - 1 - e)}f}"
    return s


@dataclass(frozen=True)
class Value:
    """A number with its role, unit and where it came from.

    ``spread`` is an optional ``(low, high)`` range (over seeds or over an
    assumed parameter's range); ``source`` says which machine, fit, patch or
    assumption it comes from.
    """
    value: float
    role: str
    unit: str = ""
    source: str = ""
    spread: tuple[float, float] | None = None
    extra: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}; not {self.role!r}")

    def text(self, digits: int = 3) -> str:
        """``"3.77 % (predicted)"``, with the range when there is one."""
        unit = f" {self.unit}" if self.unit else ""
        rng = ""
        if self.spread is not None:
            rng = f", range {fmt(self.spread[0], digits)}-{fmt(self.spread[1], digits)}{unit}"
        return f"{fmt(self.value, digits)}{unit} ({self.role}{rng})"

    def row(self, name: str) -> dict:
        """A table row: quantity, value, unit, role, range, source."""
        return {"quantity": name, "value": self.value, "unit": self.unit, "role": self.role,
                "range": (None if self.spread is None else
                          f"{fmt(self.spread[0])} to {fmt(self.spread[1])}"),
                "source": self.source}


def role_table(values: dict[str, Value]):
    """A DataFrame of named values with their role column.

    >>> role_table({"gain": Value(4.0, "published", "%", "patch 003")})[["quantity", "role"]]
      quantity       role
    0     gain  published
    """
    import pandas as pd
    return pd.DataFrame([v.row(k) for k, v in values.items()],
                        columns=["quantity", "value", "unit", "role", "range", "source"])
