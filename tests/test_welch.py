"""numalab.evidence.welch computes Student's t and the noncentral t with the
scipy.special functions scipy.stats calls itself (importing scipy.stats costs
each notebook a second): the values must be scipy.stats' own, bit for bit."""

from __future__ import annotations

import doctest
import math

import pytest
from scipy import stats

from numalab.evidence import welch as W

def same(a: float, b: float) -> bool:
    """Equal, bit for bit, or both NaN (scipy gives NaN where the noncentral
    t's far tail underflows, through either door)."""
    return a == b or (math.isnan(a) and math.isnan(b))


CASES = [(0.0, 3.0), (1.61, 17.9), (2.37, 4.0), (0.5, 1.2), (12.0, 30.0), (3.3, 250.0)]


@pytest.mark.parametrize("x,df", CASES)
def test_t_matches_scipy_stats(x, df):
    assert W._t_sf(x, df) == float(stats.t.sf(x, df))
    for q in (0.5, 0.9, 0.975, 0.995):
        assert W._t_ppf(q, df) == float(stats.t.ppf(q, df))


@pytest.mark.parametrize("x,df", CASES)
@pytest.mark.parametrize("nc", [0.0, 0.7, 2.5, 8.0])
def test_noncentral_t_matches_scipy_stats(x, df, nc):
    assert same(W._nct_sf(x, df, nc), float(stats.nct.sf(x, df, nc)))
    assert same(W._nct_cdf(-x, df, nc), float(stats.nct.cdf(-x, df, nc)))


def test_difference_and_power_as_with_scipy_stats():
    d = W.difference(52.431, 2.895, 10, 50.342, 2.895, 10)
    assert d.p == float(2 * stats.t.sf(abs(d.t), d.dof))
    half = float(stats.t.ppf(0.975, d.dof)) * d.se
    assert d.interval() == (d.diff - half, d.diff + half)
    crit = float(stats.t.ppf(0.975, 18.0))
    ncp = abs(2.089) / math.sqrt(2 * 2.895 ** 2 / 10)
    assert W.power(2.089, 2.895, 2.895, 10) == float(stats.nct.sf(crit, 18.0, ncp)
                                                    + stats.nct.cdf(-crit, 18.0, ncp))


def test_module_doctests():
    result = doctest.testmod(W)
    assert result.attempted > 0 and result.failed == 0
