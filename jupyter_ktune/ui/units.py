"""Time units for the panel's figures: one unit per figure, chosen from the values it shows.

The figures hold times in ms internally and draw them in the unit that keeps the largest value
between 1 and 1000 (ns, µs, ms, s), so an axis reads "110.8 ms", never "1.200e+6 µs". Single
values are formatted by :func:`jupyter_ktune.render.fmt_time`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

#: (unit, milliseconds per unit), largest first
UNITS: tuple[tuple[str, float], ...] = (("s", 1e3), ("ms", 1.0), ("µs", 1e-3), ("ns", 1e-6))


def time_unit(values_ms: Iterable[float | None]) -> tuple[str, float]:
    """Pick the unit for a set of times in ms, and its size in ms: ``("ms", 1.0)`` for 110.8 ms.

    The largest finite positive value decides; no values at all gives µs.
    """
    finite = [abs(v) for v in values_ms if v is not None and math.isfinite(v) and v != 0]
    if not finite:
        return "µs", 1e-3
    top = max(finite)
    for name, size in UNITS:
        if top >= size:
            return name, size
    return UNITS[-1]


def scaled(values_ms: Iterable[float | None], size_ms: float) -> list[float]:
    """Values in ms expressed in a unit of ``size_ms`` ms (None and NaN become NaN)."""
    return [v / size_ms if v is not None and math.isfinite(v) else float("nan")
            for v in values_ms]
