"""Best-of, top-k, the bounded history and earlier versions, answered by SQL (issue 21)."""

from __future__ import annotations

from dataclasses import replace

from test_store import KEY, result

from jupyter_ktune.results import Status
from jupyter_ktune.tuning.store import Store, StoreKey


def filled(tmp_path):
    s = Store(tmp_path)
    key = replace(KEY, space="sig-1")
    for block, ms in [(64, 3.0), (128, 1.0), (256, 2.0), (512, 0.5), (1024, 4.0)]:
        status = Status.WRONG if block == 512 else Status.OK  # fastest, but wrong
        s.put(key, result(block, [ms, ms * 1.1, ms * 0.9], status=status))
    s.put(key, result(32, status=Status.COMPILE_ERROR, reason="line 3"))
    return s, key


def test_best_and_top_k_are_the_fastest_correct_results_in_order(tmp_path):
    s, key = filled(tmp_path)
    with s:
        assert s.best(key).config == {"BLOCK": 128}
        assert [r.config["BLOCK"] for r in s.top(key, 3)] == [128, 256, 64]
        assert s.best(StoreKey("other", KEY.device, KEY.toolchain)) is None
        plan = " ".join(str(r) for r in s._conn.execute(
            "EXPLAIN QUERY PLAN SELECT * FROM results WHERE source_hash=? AND problem=? AND "
            "device=? AND toolchain=? AND stage=? AND status=? AND median_ms IS NOT NULL "
            "ORDER BY median_ms LIMIT 1",
            (key.source_hash, key.problem, key.device, key.toolchain, "sweep", "ok")).fetchall())
        assert "results_by_median" in plan and "TEMP B-TREE" not in plan


def test_the_history_is_the_latest_rows_oldest_first_and_bounded(tmp_path):
    s, key = filled(tmp_path)
    with s:
        assert [r.config["BLOCK"] for r in s.history(key, 3)] == [512, 1024, 32]
        assert len(s.history(key)) == 6


def test_earlier_versions_are_found_by_kernel_name_and_space(tmp_path):
    s, key = filled(tmp_path)
    with s:
        edited = StoreKey("def456", KEY.device, KEY.toolchain, space="sig-1")
        other_space = StoreKey("fff000", KEY.device, KEY.toolchain, space="sig-2")
        s.put(edited, result(64, [1.0]))
        s.put(other_space, result(64, [1.0]))
        assert s.earlier_versions("scale", "sig-1", KEY.device, exclude="def456") == [key]
        assert [k.source_hash for k in s.earlier_versions("scale", "sig-1", KEY.device)] == \
            ["def456", key.source_hash]
