"""How much a published before/after difference stands above its noise.

Patches report means and standard deviations over a few runs. The question a
reviewer asks first is whether the difference is larger than the error of a
difference of two means. This module answers it with Welch's t statistic and
its two-sided p value (scipy.special), nothing more: it cannot know whether the runs
were independent or picked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


# Student's t and the noncentral t from scipy.special, the functions
# scipy.stats.t and scipy.stats.nct call themselves (scipy 1.17: t.sf is
# stdtr(df, -x), t.ppf is stdtrit(df, q), nct.cdf is nctdtr(df, nc, x), nct.sf
# is _nct_sf clipped to [0, 1]); importing scipy.stats costs every notebook
# that compares two means a second or more. tests/test_welch.py holds them
# equal to scipy.stats.


def _t_sf(x: float, df: float) -> float:
    from scipy import special
    return float(special.stdtr(df, -x))


def _t_ppf(q: float, df: float) -> float:
    from scipy import special
    return float(special.stdtrit(df, q))


def _nct_cdf(x: float, df: float, nc: float) -> float:
    from scipy import special
    return float(special.nctdtr(df, nc, x))


def _nct_sf(x: float, df: float, nc: float) -> float:
    import numpy as np
    from scipy.special import _ufuncs
    with np.errstate(over="ignore"):
        return float(np.clip(_ufuncs._nct_sf(x, df, nc), 0, 1))


__all__ = ["Difference", "difference", "power"]


@dataclass(frozen=True)
class Difference:
    diff: float          # mean_after - mean_before
    se: float            # standard error of that difference
    t: float             # diff / se (Welch)
    dof: float           # Welch-Satterthwaite degrees of freedom
    p: float             # two-sided p value
    sd_ratio: float      # |diff| / sd of the "before" runs

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """The ``level`` confidence interval of ``diff`` (Welch's t, ``dof``
        degrees of freedom).

        >>> lo, hi = difference(52.431, 2.895, 10, 50.342, 2.895, 10).interval()
        >>> round(lo, 2), round(hi, 2)
        (-4.81, 0.63)
        """
        half = _t_ppf(0.5 + level / 2, self.dof) * self.se
        return self.diff - half, self.diff + half

    def sentence(self, unit: str) -> str:
        """One line for a notebook: the difference, its error and what they say."""
        verdict = ("clearly above the noise" if self.p < 0.01 else
                   "suggestive, not conclusive" if self.p < 0.1 else "within the noise")
        return (f"difference {self.diff:+.3g} {unit}, standard error {self.se:.3g} {unit}: "
                f"t = {self.t:.2f} on {self.dof:.1f} degrees of freedom, p = {self.p:.2g} "
                f"({verdict}); {abs(self.sd_ratio):.2f} standard deviations of the 'before' runs")


def difference(mean_before: float, sd_before: float, n_before: int,
               mean_after: float, sd_after: float, n_after: int) -> Difference:
    """Welch's comparison of two published means.

    >>> d = difference(52.431, 2.895, 10, 50.342, 2.895, 10)
    >>> round(d.se, 3), round(d.t, 2)
    (1.295, -1.61)
    >>> 0.1 < d.p < 0.2
    True
    """
    if n_before < 2 or n_after < 2:
        raise ValueError("each side needs at least two runs")
    va, vb = sd_before ** 2 / n_before, sd_after ** 2 / n_after
    se = math.sqrt(va + vb)
    diff = mean_after - mean_before
    if se == 0:
        return Difference(diff, 0.0, math.inf if diff else 0.0, math.inf, 0.0 if diff else 1.0,
                          math.inf if diff else 0.0)
    dof = (va + vb) ** 2 / ((va ** 2 / (n_before - 1) if va else 0) +
                            (vb ** 2 / (n_after - 1) if vb else 0))
    t = diff / se
    p = 2 * _t_sf(abs(t), dof)
    return Difference(diff, se, t, dof, float(p),
                      diff / sd_before if sd_before else math.inf)


def power(effect: float, sd_before: float, sd_after: float, n: int,
          alpha: float = 0.05) -> float:
    """The chance that a two-sided Welch test at level ``alpha``, on ``n``
    runs per side with these standard deviations, finds a true difference
    of ``effect`` (the noncentral t distribution).

    >>> round(power(52.431 - 50.342, 2.895, 2.895, 10), 2)
    0.33
    """
    if n < 2:
        raise ValueError("each side needs at least two runs")
    va, vb = sd_before ** 2 / n, sd_after ** 2 / n
    se = math.sqrt(va + vb)
    if se == 0:
        return 1.0 if effect else alpha
    dof = (va + vb) ** 2 / ((va ** 2 + vb ** 2) / (n - 1))
    crit = _t_ppf(1 - alpha / 2, dof)
    ncp = abs(effect) / se
    return _nct_sf(crit, dof, ncp) + _nct_cdf(-crit, dof, ncp)
