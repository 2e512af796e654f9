import math

import pytest

from numalab.evidence.welch import difference


def test_idle_mask_claim_is_suggestive_only():
    d = difference(52.431, 2.895, 10, 50.342, 2.895, 10)
    assert d.se == pytest.approx(2.895 * math.sqrt(0.2))
    assert d.t == pytest.approx(-2.089 / d.se)
    assert 0.1 < d.p < 0.2
    assert "suggestive" not in d.sentence("s") and "within the noise" in d.sentence("s")


def test_devmem_throughput_claim():
    d = difference(45.31, 3.17, 5, 48.67, 0.01, 5)
    assert d.sd_ratio == pytest.approx(3.36 / 3.17)
    assert d.dof == pytest.approx(4, rel=0.01)   # the noisy side dominates
    assert 0.05 < d.p < 0.2


def test_large_difference_is_clear():
    assert difference(10, 0.1, 10, 12, 0.1, 10).p < 1e-6


def test_needs_two_runs():
    with pytest.raises(ValueError):
        difference(1, 1, 1, 2, 1, 5)
