"""When an adaptive measurement stops (``measure.timing.time_kernel``): the step sizes, the
precision rule and the race against a sweep's incumbent.

The rules read the times taken so far and the plan's knobs (``TimingPlan``: ``rel_precision``,
``race_ms``, ``race_margin``); they never touch the device.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from jupyter_ktune.render import counted
from jupyter_ktune.stats import median_ci, relative_ci_halfwidth


def step_sizes(first: int, batch: int) -> Iterator[int]:
    """Runs per step of the adaptive loop: ``first``, doubling up to ``batch``."""
    step = first
    while True:
        yield step
        step = min(step * 2, batch)


def event_tick_ms(times: np.ndarray) -> float:
    """The event clock's quantum as these times show it (the smallest gap between distinct
    values), or 0 when they do not look quantised (fewer than 4 repeats a value on average)."""
    values = np.unique(np.round(np.asarray(times, dtype=np.float64), 9))
    if values.size < 2 or values.size * 4 > len(times):
        return 0.0
    return float(np.diff(values).min())


def precise(times: np.ndarray, plan: Any, tick_ms: float) -> bool:
    """The stopping rule on precision: the median's CI within ``rel_precision``, or no wider
    than one tick of the event clock."""
    if relative_ci_halfwidth(times) <= plan.rel_precision:
        return True
    lo, hi = median_ci(times)
    return tick_ms > 0 and hi - lo <= tick_ms * 1.001


def raced_out(times: np.ndarray, floor_ms: float, plan: Any) -> str:
    """``"; stopped: clearly slower ..."`` when the CI of the median is above the incumbent."""
    lo, _hi = median_ci(times)
    lo -= floor_ms
    if plan.race_ms is not None and lo > plan.race_ms * (1 + plan.race_margin):
        return (f"; raced: stopped after {counted(times.size, 'run')}, its median's 95% CI "
                f"starts at {lo:.4g} ms, over {plan.race_margin:.0%} above the incumbent's "
                f"{plan.race_ms:.4g} ms")
    return ""
