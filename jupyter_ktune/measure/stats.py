"""Small statistics for timings: robust centre, spread and a distribution-free CI of the median.

GPU run times are skewed (a clock ramp, an interrupt, a neighbour), so the project reports the
median and the interquartile range, and decides when to stop timing by the width of the median's
confidence interval rather than by a fixed count.
"""

from __future__ import annotations

import math

import numpy as np

_Z = {0.90: 1.6449, 0.95: 1.9600, 0.99: 2.5758}


def median_ci(samples: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Confidence interval of the median from order statistics (no normality assumed).

    Uses the binomial(n, 1/2) normal approximation for the ranks, ``n/2 -/+ z*sqrt(n)/2``, which is
    accurate from about n = 10; below that the interval is the sample range.

    Examples
    --------
    >>> lo, hi = median_ci(np.arange(100.0))
    >>> 39 <= lo < 49.5 < hi <= 60
    True
    """
    x = np.sort(np.asarray(samples, dtype=float))
    n = x.size
    if n == 0:
        raise ValueError("[ktune] median_ci needs at least one sample")
    if n < 10:
        return float(x[0]), float(x[-1])
    z = _Z.get(round(confidence, 2))
    if z is None:
        raise ValueError(f"[ktune] confidence must be one of {sorted(_Z)}, got {confidence}")
    half = z * math.sqrt(n) / 2
    lo = max(int(math.floor(n / 2 - half)) - 1, 0)
    hi = min(int(math.ceil(n / 2 + half)), n - 1)
    return float(x[lo]), float(x[hi])


def relative_ci_halfwidth(samples: np.ndarray, confidence: float = 0.95) -> float:
    """Half the median CI's width over the median: the stopping rule of adaptive timing."""
    lo, hi = median_ci(samples, confidence)
    med = float(np.median(samples))
    return (hi - lo) / 2 / med if med > 0 else math.inf
