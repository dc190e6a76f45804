"""The verdict's bootstrap draws each resample's median from two order statistics (gamma
spacings) instead of drawing n indices per resample: the distribution must be the same."""

from __future__ import annotations

import numpy as np
import pytest

from jupyter_ktune.stats import bootstrap_medians


def brute_force(x: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    return np.median(x[rng.integers(0, x.size, (resamples, x.size))], axis=1)


def ks(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov distance, exact on discrete values (ties included)."""
    grid = np.union1d(a, b)
    fa = np.searchsorted(np.sort(a), grid, side="right") / a.size
    fb = np.searchsorted(np.sort(b), grid, side="right") / b.size
    return float(np.max(np.abs(fa - fb)))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 9, 10, 37, 100, 101])
def test_bootstrap_medians_have_the_distribution_of_resampled_medians(n):
    rng = np.random.default_rng(n)
    x = np.round(rng.gamma(2.0, 1.0, n) + 1, 1)  # skewed, with ties, as run times are
    fast = bootstrap_medians(x, 40_000, np.random.default_rng(1))
    slow = brute_force(x, 40_000, np.random.default_rng(2))
    # KS critical distance at alpha = 0.001 for two samples of 40,000: about 0.0138
    assert ks(fast, slow) < 0.0138, (n, ks(fast, slow))


def test_bootstrap_medians_of_a_constant_are_the_constant_and_empty_input_is_refused():
    assert np.all(bootstrap_medians(np.full(8, 2.5), 100, np.random.default_rng(0)) == 2.5)
    with pytest.raises(ValueError, match="at least one sample"):
        bootstrap_medians(np.array([]), 10, np.random.default_rng(0))
