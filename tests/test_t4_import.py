"""Kernel Tuner T4 import validates every value (issue 15 item 13).

NaN, inf and negative run times were imported as measurements ("best -5000 µs" in the progress),
the string "123" became the run times [1, 2, 3], and deep nesting escaped as RecursionError.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from test_export import KT_FILE

from jupyter_ktune.results import Status
from jupyter_ktune.tuning.kerneltuner import T4Error, T4Warning, from_t4, import_t4, read_t4
from jupyter_ktune.tuning.store import Store, StoreKey


def doc_with(*runtimes, invalidity="correct"):
    """Build a T4 document whose results carry these ``times.runtimes``, one result each."""
    doc = copy.deepcopy(KT_FILE)
    good = doc["results"][0]
    doc["results"] = []
    for i, r in enumerate(runtimes):
        item = copy.deepcopy(good)
        item["configuration"] = {"block_size_x": 32 * (i + 1), "tile": 1}
        item["times"]["runtimes"] = r
        item["invalidity"] = invalidity
        doc["results"].append(item)
    return doc


@pytest.mark.parametrize("runtimes, shown", [
    ([0.5, float("nan")], "nan"),
    ([float("inf")], "inf"),
    ([-5000.0], "-5000.0"),
    ("123", "'123'"),          # not the runs [1, 2, 3]
    ([True, 1.0], "True"),     # not 1.0 ms
    ([[0.5]], "[0.5]"),
    (["0.5"], "'0.5'"),
    ({"a": 1}, "{'a': 1}"),
])
def test_a_run_time_that_is_not_a_finite_non_negative_number_is_refused(runtimes, shown):
    with pytest.raises(T4Error) as e:
        from_t4(doc_with([0.5], runtimes))
    lines = str(e.value).splitlines()
    assert lines[0].startswith("[ktune] 1 of 2 T4 results cannot be imported")
    assert "skip_bad=True" in lines[0]
    assert lines[1:] == [f"  result 1 times.runtimes holds {shown}, which is not a run time "
                         "(a finite, non-negative number of ms)"]


def test_a_negative_time_measurement_is_refused_too():
    doc = doc_with([])
    doc["results"][0]["measurements"] = [{"name": "time", "value": -5000, "unit": "ms"}]
    with pytest.raises(T4Error, match="result 0 the 'time' measurement holds -5000"):
        from_t4(doc)


def test_every_bad_result_gets_its_own_line_and_many_are_counted():
    doc = doc_with(*([[-1.0]] * 13), [0.5])
    with pytest.raises(T4Error) as e:
        from_t4(doc)
    lines = str(e.value).splitlines()
    assert lines[0].startswith("[ktune] 13 of 14 T4 results")
    assert [ln.split(" times")[0] for ln in lines[1:11]] == [f"  result {i}" for i in range(10)]
    assert lines[11] == "  ... and 3 more" and len(lines) == 12


def test_skip_bad_imports_the_rest_and_counts_what_it_left_out():
    with pytest.warns(T4Warning, match=r"skipped 2 of 3 T4 results .* result 0 times.runtimes"):
        rows = from_t4(doc_with([float("nan")], [0.5, 0.7], "123"), skip_bad=True)
    assert [r.times_ms.tolist() for r in rows] == [[0.5, 0.7]]


def test_a_failed_variant_keeps_its_status_but_never_unusable_times():
    rows = from_t4(doc_with([float("nan")], [-1.0], [0.5], invalidity="compile"))
    assert [r.status for r in rows] == [Status.COMPILE_ERROR] * 3
    assert rows[0].times_ms is None and rows[1].times_ms is None
    assert rows[2].times_ms.tolist() == [0.5]


def test_configuration_values_are_checked():
    doc = doc_with([0.5], [0.5], [0.5])
    doc["results"][0]["configuration"] = {"block_size_x": float("nan")}
    doc["results"][1]["configuration"] = {"block_size_x": [64]}
    doc["results"][2]["configuration"] = {"block_size_x": True}
    with pytest.raises(T4Error) as e:
        from_t4(doc)
    assert str(e.value).count("has no 'configuration' object") == 3


def test_deep_nesting_is_a_t4_error_not_a_recursion_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"schema_version": "1.0.0", "results": ' + "[" * 100_000 + "]" * 100_000
                    + "}")
    with pytest.raises(T4Error, match=r"^\[ktune\] .*deep.json nests too deep"):
        read_t4(path)
    deep: list = []
    for _ in range(5000):  # built in Python: json never saw it, repr() would recurse
        deep = [deep]
    doc = doc_with([0.5])
    doc["results"][0]["configuration"] = {"block_size_x": deep}
    with pytest.raises(T4Error, match=r"\(got \(nested too deep to show\)\)"):
        from_t4(doc)


def test_nan_written_by_json_as_a_literal_is_refused_from_a_file(tmp_path):
    path = tmp_path / "kt.json"
    path.write_text(json.dumps(doc_with([0.5], [float("nan")])))  # NaN literal, as Python writes
    assert "NaN" in path.read_text()
    with pytest.raises(T4Error, match="result 1 times.runtimes holds nan"):
        read_t4(path)


def test_import_writes_nothing_from_a_bad_file_unless_asked_to_skip(tmp_path):
    path = tmp_path / "kt.json"
    path.write_text(json.dumps(doc_with([0.5], [-5000.0])))
    key = StoreKey("src", "H200")
    with Store(tmp_path) as s:
        with pytest.raises(T4Error):
            import_t4(path, s, key)
        assert len(s) == 0
        with pytest.warns(T4Warning):
            assert import_t4(path, s, key, skip_bad=True) == 1
        (row,) = s.results(key)
        assert row.median_ms == 0.5 and np.all(row.times_ms >= 0)
