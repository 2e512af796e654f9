"""Which published figures a model was fitted to, and what is left to test it.

A model calibrated on a patch's numbers reproduces them by construction, so
comparing it with them says how well the fit went, nothing more. Only a
figure the fit did not use can test the model. :class:`Calibration` keeps the
split explicit:

>>> cal = Calibration("probe model", fitted={"nvme 001 before": 50.1})
>>> cal.compare("nvme 001 before", model=50.3).kind
'fit quality'
>>> cal.compare("nvme 000 after", model=34.0, published=34.2).kind
'held-out test'
>>> cal.predicted("nvme 001 before", 50.3)
Traceback (most recent call last):
...
numalab.evidence.calibration.FittedTargetError: 'nvme 001 before' was used to fit probe model: a model value compared with it is fit quality, not a prediction
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .roles import Value

__all__ = ["Calibration", "Comparison", "FittedTargetError"]


class FittedTargetError(ValueError):
    """A fitted target was presented as something the model predicts."""


@dataclass(frozen=True)
class Comparison:
    """A model value next to a published one, labelled by what it can show."""
    target: str
    model: float
    published: float
    kind: str            # "fit quality" or "held-out test"

    @property
    def rel_error(self) -> float:
        """model / published - 1 (nan when the published figure is 0)."""
        return self.model / self.published - 1 if self.published else float("nan")

    def row(self) -> dict:
        return {"target": self.target, "model": self.model, "published": self.published,
                "rel_error": self.rel_error, "comparison": self.kind,
                "role": "fitted" if self.kind == "fit quality" else "predicted"}


@dataclass
class Calibration:
    """A model's calibration: the published targets it was fitted to
    (``fitted``: name -> published value) and the parameters it produced
    (``params``: name -> :class:`Value` with role ``fitted``)."""
    model: str
    fitted: dict[str, float] = field(default_factory=dict)
    params: dict[str, Value] = field(default_factory=dict)

    def fit(self, target: str, published: float) -> None:
        """Record that ``target`` (a published figure) was used in the fit."""
        self.fitted[target] = published

    def param(self, name: str, value: float, unit: str = "", source: str = "") -> Value:
        """Record a fitted parameter; returns it as a ``fitted`` :class:`Value`."""
        v = Value(value, "fitted", unit, source or f"fitted: {self.model}")
        self.params[name] = v
        return v

    def is_fitted(self, target: str) -> bool:
        return target in self.fitted

    def compare(self, target: str, model: float, published: float | None = None) -> Comparison:
        """Compare a model value with a published one; the label says whether
        the figure was seen by the fit. ``published`` defaults to the fitted
        value for a fitted target and is required otherwise."""
        if target in self.fitted:
            pub = self.fitted[target] if published is None else published
            return Comparison(target, model, pub, "fit quality")
        if published is None:
            raise ValueError(f"{target!r} was not fitted: give its published value")
        return Comparison(target, model, published, "held-out test")

    def predicted(self, target: str, value: float, unit: str = "", source: str = "") -> Value:
        """A model value to be compared with ``target``: a ``predicted``
        :class:`Value`, or :class:`FittedTargetError` when ``target`` was fitted."""
        if target in self.fitted:
            raise FittedTargetError(f"{target!r} was used to fit {self.model}: a model value "
                                    "compared with it is fit quality, not a prediction")
        return Value(value, "predicted", unit, source or f"{self.model}, not fitted to {target}")

    def table(self, comparisons: list[Comparison]):
        """A DataFrame of comparisons with their ``comparison`` and ``role`` columns."""
        import pandas as pd
        return pd.DataFrame([c.row() for c in comparisons])
