"""Exports: triton.Config list, C++ header, Pallas table, and Kernel Tuner's T4 JSON round trip."""

from __future__ import annotations

import ast
import json

import numpy as np
import pytest

from jupyter_ktune.results import Status
from jupyter_ktune.space import Config, Param, Space
from jupyter_ktune.tuning.kerneltuner import from_t4, import_t4, read_t4, to_t4, write_t4
from jupyter_ktune.tuning.report import Evaluation, TuneReport, Verdict, decide, ratio_ci
from jupyter_ktune.tuning.store import Store, StoredResult, StoreKey

SPACE = Space((Param("BLOCK_M", (64, 128)), Param("SWIZZLE", ("none", "128B")),
               Param("num_warps", (4, 8))))


def row(m, sw, w, ms, status=Status.OK, n=40, seed=0):
    times = None if ms is None else ms * (1 + 0.01 * np.random.default_rng(seed).random(n))
    return StoredResult(Config({"BLOCK_M": m, "SWIZZLE": sw, "num_warps": w}), status,
                        times_ms=times, kernel="mm", backend="triton", device="H200",
                        created=1.7e9)


ROWS = [row(128, "128B", 8, 0.010), row(64, "none", 4, 0.020, seed=1),
        row(128, "none", 4, None, Status.COMPILE_ERROR), row(64, "128B", 8, 0.015, seed=2)]


def report():
    return TuneReport("mm", "triton", "greedy", SPACE, "H200",
                      tuple(Evaluation(r, i) for i, r in enumerate(ROWS)),
                      final=(ROWS[0], ROWS[3]), verdict=decide([ROWS[0], ROWS[3]]),
                      valid_configs=8)


def test_verdict_is_significant_for_a_clear_gap_and_not_for_noise():
    v = report().verdict
    assert v.significant and v.winner == ROWS[0].config and v.lo > 1
    assert "faster than" in v.text() and "95% CI" in v.text()
    rng = np.random.default_rng(0)
    a, b = 1 + 0.05 * rng.random(30), 1 + 0.05 * rng.random(30)
    r, lo, hi = ratio_ci(a, b, seed=1)
    assert lo < 1 < hi
    same = decide([StoredResult(ROWS[0].config, Status.OK, times_ms=a),
                   StoredResult(ROWS[3].config, Status.OK, times_ms=b)])
    assert not same.significant and "not distinguishable" in same.text()
    assert ratio_ci(a, b, seed=1) == ratio_ci(a, b, seed=1)  # seeded


def test_triton_export_is_python_with_launch_options_as_keywords():
    text = report().export("triton", k=2, key=("M", "N"))
    ast.parse(text)
    assert "triton.Config({'BLOCK_M': 128, 'SWIZZLE': '128B'}, num_warps=8)" in text
    assert "@triton.autotune(configs=configs, key=['M', 'N'])" in text
    assert text.index("'BLOCK_M': 128") < text.index("'BLOCK_M': 64")


def test_cpp_header_holds_the_winner_as_constants():
    text = report().export("cpp")
    assert text.startswith("#pragma once")
    assert "constexpr int KT_MM_BLOCK_M = 128;" in text
    assert "constexpr int KT_MM_SWIZZLE = 128;  // 128B" in text
    assert "constexpr int KT_MM_num_warps = 8;" in text


def test_pallas_table_is_a_dict_literal():
    text = report().export("pallas")
    table = ast.literal_eval(text.split("= ", 1)[1])
    assert table == {("mm", "H200"): {"BLOCK_M": 128, "SWIZZLE": "128B", "num_warps": 8}}


def test_unknown_export_lists_the_kinds():
    with pytest.raises(ValueError, match="cpp.*kernel_tuner.*pallas.*triton"):
        report().export("onnx")


# A results file exactly as Kernel Tuner 1.x writes it (file_utils.store_output_file)
KT_FILE = {"schema_version": "1.0.0", "results": [
    {"timestamp": "2026-01-01T10:00:00+00:00",
     "configuration": {"block_size_x": 128, "tile": 2},
     "times": {"compilation": 0.41, "benchmark": 0.02, "framework": 0.001,
               "search_algorithm": 0.0, "validation": 0.0, "runtimes": [0.5, 0.52, 0.49]},
     "invalidity": "correct", "correctness": 1,
     "measurements": [{"name": "time", "value": 0.503, "unit": "ms"}], "objectives": ["time"]},
    {"timestamp": "2026-01-01T10:00:01+00:00",
     "configuration": {"block_size_x": 1024, "tile": 8},
     "times": {"compilation": 0.3, "benchmark": 0, "framework": 0, "search_algorithm": 0,
               "validation": 0, "runtimes": []},
     "invalidity": "compile", "correctness": 1, "measurements": [], "objectives": ["time"]},
]}


def test_kernel_tuner_t4_round_trip(tmp_path):
    path = tmp_path / "kt_results.json"
    path.write_text(json.dumps(KT_FILE))
    rows = read_t4(path, kernel="k", device="H200")
    assert rows[0].config == {"block_size_x": 128, "tile": 2}
    assert rows[0].times_ms.tolist() == [0.5, 0.52, 0.49] and rows[0].ok
    assert rows[1].status is Status.COMPILE_ERROR and rows[1].times_ms is None
    out = write_t4(tmp_path / "again", rows)
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == "1.0.0"
    for a, b in zip(doc["results"], KT_FILE["results"], strict=True):
        assert a["configuration"] == b["configuration"]
        assert a["invalidity"] == b["invalidity"]
        assert a["times"]["runtimes"] == b["times"]["runtimes"]
        assert set(a) >= {"configuration", "times", "invalidity", "correctness"}
    assert [r.config for r in from_t4(doc)] == [r.config for r in rows]
    assert json.loads(report().export("kernel_tuner"))["results"][2]["invalidity"] == "compile"
    assert to_t4([])["results"] == []


def test_t4_import_into_the_store_counts_as_measured(tmp_path):
    path = tmp_path / "kt.json"
    path.write_text(json.dumps(KT_FILE))
    key = StoreKey("src", "H200")
    with Store(tmp_path) as s:
        assert import_t4(path, s, key, kernel="k", backend="cuda") == 2
        got = s.get(key, {"block_size_x": 128, "tile": 2})
        assert got.median_ms == 0.5 and got.ok
    with pytest.raises(ValueError, match="T4"):
        from_t4({"schema_version": "2.0.0", "results": []})
    assert Verdict(ROWS[0].config, None).text().startswith("winner")
