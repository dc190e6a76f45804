"""Strategies over a constrained space, and the replay machinery of bench/search_efficiency.py."""

from __future__ import annotations

import math

import pytest

from jupyter_ktune.space import Config, Constraint, Param, Space
from jupyter_ktune.tuning.search import (
    DEFAULT_STRATEGY,
    STRATEGIES,
    evaluations_to_within,
    make_strategy,
    replay,
)

SPACE = Space((Param("BM", (16, 32, 64, 128, 256)), Param("BN", (16, 32, 64, 128, 256)),
               Param("BK", (16, 32, 64)), Param("W", (2, 4, 8)), Param("S", (1, 2, 3, 4))),
              (Constraint("(BM * BK + BK * BN) * 2 * S <= 100000"),))


def synthetic_matmul(c: Config) -> float | None:
    """A smooth-but-bumpy model of a GEMM's time: tile efficiency, occupancy, pipelining."""
    bm, bn, bk, w, s = c["BM"], c["BN"], c["BK"], c["W"], c["S"]
    if bm * bn // (32 * w) > 512:  # too many registers per thread: fails
        return None
    tiles = math.ceil(4096 / bm) * math.ceil(4096 / bn)
    waves = math.ceil(tiles / 132)
    per_tile = (bm * bn * 4096) / (bm * bn / (bm + bn)) ** 0.9 / (1 + 0.4 * min(s, 3))
    return waves * per_tile * (1 + 0.15 * abs(math.log2(w * 32 / max(bm, bn)))) / (1 + bk / 128)


RECORDED = {c: synthetic_matmul(c) for c in SPACE.configs()}
SMALL = Space((Param("BM", (16, 32, 64, 128)), Param("BN", (16, 32, 64)), Param("W", (2, 4, 8))),
              (Constraint("BM * BN <= 4096"),))
SMALL_RECORDED = {c: synthetic_matmul(Config({**dict(c), "BK": 32, "S": 3}))
                  for c in SMALL.configs()}
BEST = min(v for v in RECORDED.values() if v is not None)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_every_strategy_covers_the_valid_space_without_repeats(name):
    trace = replay(name, SMALL, SMALL_RECORDED, seed=3)
    configs = [c for c, _ in trace]
    assert len(configs) == len(set(configs)) == len(SMALL_RECORDED)
    assert all(not SMALL.violations(c) for c in configs)


def test_random_is_seeded():
    a = [c for c, _ in replay("random", SPACE, RECORDED, seed=1, budget=10)]
    b = [c for c, _ in replay("random", SPACE, RECORDED, seed=1, budget=10)]
    c = [c for c, _ in replay("random", SPACE, RECORDED, seed=2, budget=10)]
    assert a == b != c


def test_strategies_may_be_asked_ahead_of_results():
    s = make_strategy("greedy", SPACE, seed=0)
    asked = [s.ask() for _ in range(20)]
    assert len(set(asked)) == 20
    for c in asked:
        s.tell(c, RECORDED[c])
    assert s.ask() not in asked


def test_model_based_strategies_beat_random_on_the_synthetic_space():
    cap = len(RECORDED) // 3  # the replay stops there; "never" counts as the cap

    def median_evals(name, seeds=7):
        runs = sorted(evaluations_to_within(replay(name, SPACE, RECORDED, seed=k, budget=cap),
                                            BEST) or cap for k in range(seeds))
        return runs[len(runs) // 2]

    greedy, tpe, rnd = median_evals("greedy"), median_evals("tpe", seeds=3), median_evals("random")
    assert greedy < rnd and tpe < rnd
    assert greedy <= 0.25 * len(RECORDED)
    assert DEFAULT_STRATEGY in STRATEGIES


def test_unknown_strategy_and_wrong_type():
    with pytest.raises(ValueError, match="Choose one of"):
        make_strategy("anneal", SPACE)
    with pytest.raises(TypeError):
        make_strategy(3, SPACE)
