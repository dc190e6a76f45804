"""The order an exhaustive sweep hands configs to the compile pool: costliest compiles first,
interleaved with the cheapest so the GPU has work at once.

An exhaustive sweep's result does not depend on its order, but its wall time does: it ends no
sooner than its slowest compile ends. In fla's activation kernels one config (``B=8192`` with
one warp: 256 elements a thread) takes ptxas 9-18 s, 40-55 % of ``triton.autotune``'s whole
sweep, and in declaration order it was handed to the pool 25th of 30, after the pool had filled
with others (bench/results/corpus_vs_autotune/2026-12-01-1046 and -1306, "pool compile
longest"). Longest-processing-time-first is the classic schedule for that; alternating it with
the cheapest configs keeps the first results as early as before (a cheap compile is back in a
fraction of a second), so the panel's first point does not wait for the slowest compile.

The cost is a proxy, not a measurement: for Triton, the tile elements each thread handles (the
product of the integer constexpr tunables over ``32 * num_warps``), which is what unrolled code
and ptxas time grow with. Other backends keep declaration order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from jupyter_ktune.space import Config
from jupyter_ktune.tuning.report import LAUNCH_OPTIONS  # not tile sizes (num_warps divides them)


def triton_compile_cost(config: Config) -> float:
    """Tile elements per thread: the integer non-launch tunables multiplied, over the threads."""
    tile = math.prod(float(v) for k, v in config.items()
                     if k not in LAUNCH_OPTIONS and isinstance(v, int) and not isinstance(v, bool)
                     and v > 0)
    warps = config.get("num_warps", 4)
    return tile / (32 * (warps if isinstance(warps, int) and warps > 0 else 4))


def interleaved(configs: Iterable[Config], cost: dict[Config, float]) -> list[Config]:
    """Costliest, cheapest, second costliest, second cheapest, ...; ties keep their order."""
    ranked = sorted(configs, key=lambda c: -cost[c])  # stable: declaration order among ties
    out: list[Config] = []
    lo, hi = 0, len(ranked) - 1
    while lo <= hi:
        out.append(ranked[lo])
        if lo != hi:
            out.append(ranked[hi])
        lo, hi = lo + 1, hi - 1
    return out


def compile_first(backend: str, configs: Sequence[Config]) -> list[Config] | None:
    """The pool order for ``configs`` of ``backend`` (one whose ``compile_cost_order`` is set),
    or None to keep declaration order."""
    from jupyter_ktune.backends import get_backend

    if not get_backend(backend).compile_cost_order or len(configs) < 3:
        return None
    cost = {c: triton_compile_cost(c) for c in configs}
    if len(set(cost.values())) < 2:
        return None
    return interleaved(configs, cost)
