"""bench/first_minute_ab.py's turns and pairs: a side's place in its pair alternates, and the
pairs are read as pairs (the median of new - base, and how many new won), which a drift of
the host over the run moves less than two medians. In call 2 of
bench/results/first_minute_ab/2026-12-07-0900 the side that always ran second read torch's
import 0.5 s slower in 4 of 5 pairs with no change on that path."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("first_minute_ab",
                                               ROOT / "bench" / "first_minute_ab.py")
ab = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ab)


def test_each_side_runs_first_in_half_the_reps():
    firsts = [ab.side_order(i)[0] for i in range(6)]
    assert firsts.count("base") == firsts.count("new") == 3
    assert all(sorted(ab.side_order(i)) == ["base", "new"] for i in range(6))


def test_pairs_are_read_rep_by_rep():
    base = [{"t": 3.0}, {"t": 3.4}, {"error": "timed out"}, {"t": 3.2}]
    new = [{"t": 2.8}, {"t": 3.5}, {"t": 2.0}, {"t": 3.0}]
    diff, lower, n = ab.paired(base, new, "t")
    assert n == 3  # the rep whose base failed is no pair
    assert lower == 2
    assert abs(diff - (-0.2)) < 1e-9  # median of -0.2, +0.1, -0.2


def test_no_pair_without_numbers_on_both_sides():
    assert ab.paired([{"t": None}], [{"t": 1.0}], "t") is None
