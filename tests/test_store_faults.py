"""The store under faults (issue 15 item 11): a row that cannot be decoded, a newer schema, a
read-only file or folder, a full disk, and transient failures retried once on resume.

Tests run as root, where ``chmod`` stops nothing; read-only files are made by opening the
store's connection with SQLite's ``mode=ro`` (the errors are SQLite's own), a folder that cannot
be created is a path under a regular file, and a full disk is SQLite's ``max_page_count``, which
makes SQLite itself answer "database or disk is full".
"""

from __future__ import annotations

import sqlite3
import warnings

import pytest
from test_reliability_store import write_v1_store
from test_store import KEY, result
from test_sweep import LINE, NS

from jupyter_ktune.api import parse_cell
from jupyter_ktune.results import Status
from jupyter_ktune.tuning import store_schema as store_module
from jupyter_ktune.tuning import tune
from jupyter_ktune.tuning.store import (
    SCHEMA_VERSION,
    Store,
    StoredResult,
    StoreError,
    StoreKey,
    StoreWarning,
)


def _filled(path, blocks=(64, 128, 256)):
    with Store(path) as s:
        for b in blocks:
            s.put(KEY, result(b, [1.0 * b, 2.0 * b]))
    return path


def _raw(path, sql, *args):
    conn = sqlite3.connect(path)
    conn.execute(sql, args)
    conn.commit()
    conn.close()


@pytest.fixture()
def read_only(monkeypatch):
    """Call it, and every store opened from then on gets a read-only connection."""
    real = store_module.connect

    def patch():
        monkeypatch.setattr(store_module, "connect",
                            lambda path, mode="rwc": real(path, "ro" if mode == "rwc" else mode))

    return patch


def _warnings(fn):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(w.message) for w in seen if issubclass(w.category, StoreWarning)]


# -- a row that cannot be decoded ------------------------------------------------------------
def test_undecodable_rows_are_skipped_counted_and_warned_about_once(tmp_path):
    path = _filled(tmp_path / "s.sqlite")
    _raw(path, "UPDATE results SET times_ms = '{not json' WHERE config = '{\"BLOCK\":64}'")
    _raw(path, "UPDATE results SET status = 'exploded' WHERE config = '{\"BLOCK\":128}'")
    with Store(path) as s:
        rows, said = _warnings(lambda: (s.results(KEY), s.results(KEY), s.get(KEY, {"BLOCK": 64})))
        assert [r.config["BLOCK"] for r in rows[0]] == [256] == [r.config["BLOCK"] for r in rows[1]]
        assert rows[2] is None  # a resume times it again
        assert s.skipped == 2
        assert len(said) == 1 and "skipped a result that cannot be read" in said[0]
        s.put(KEY, result(64, [5.0]))  # timed again: the row is whole
        assert s.skipped == 1 and s.get(KEY, {"BLOCK": 64}).median_ms == 5.0


def test_a_sweep_over_a_store_with_an_undecodable_row_completes_and_mends_it(worker, tmp_path):
    spec = parse_cell(LINE, "# ktune: BLOCK in [1, 2, 4]\ndef scale(x, y, n):\n    y[:] = 2 * x\n",
                      NS)
    tune(spec, "exhaustive", store=tmp_path, workers=[worker], top_k=0)
    _raw(tmp_path / ".ktune.sqlite", "UPDATE results SET times_ms = '[1, [2' "
         "WHERE config = '{\"BLOCK\":2}'")
    with pytest.warns(StoreWarning, match="skipped a result"):
        again = tune(spec, "exhaustive", store=tmp_path, workers=[worker], top_k=0)
    assert {e.result.config["BLOCK"]: e.cached for e in again.evaluations} == \
        {1: True, 2: False, 4: True}
    with Store(tmp_path) as s:
        assert len(s.results(stage=None)) == 3 and s.skipped == 0


# -- a newer schema --------------------------------------------------------------------------
def test_a_store_from_a_newer_ktune_is_one_error_naming_the_version_and_the_fix(tmp_path):
    path = _filled(tmp_path / "s.sqlite")
    _raw(path, "UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    with pytest.raises(StoreError) as e:
        Store(path)
    text = str(e.value)
    assert text.startswith(f"[ktune] {path}: the store was written by a newer ktune")
    assert "store schema 7" in text and f"reads up to {SCHEMA_VERSION}" in text
    assert "pip install -U jupyter_ktune" in text and "store= another path" in text
    assert "\n" not in text


def test_a_read_only_store_from_a_newer_ktune_is_the_same_error(tmp_path, read_only):
    path = _filled(tmp_path / "s.sqlite")
    _raw(path, "UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    read_only()
    with pytest.raises(StoreError, match="store schema 7"):
        Store(path)


# -- read-only file and folder ---------------------------------------------------------------
def test_an_existing_read_only_store_is_read_and_new_results_stay_in_memory(tmp_path, read_only):
    path = _filled(tmp_path / "s.sqlite")
    read_only()
    with Store(path) as s:
        assert sorted(r.config["BLOCK"] for r in s.results(KEY)) == [64, 128, 256]
        _, said = _warnings(lambda: (s.put(KEY, result(512, [9.0])), s.put(KEY, result(1024))))
        assert not s.saving and s.get(KEY, {"BLOCK": 512}).median_ms == 9.0 and len(s) == 5
        assert len(said) == 1 and "results are kept in memory" in said[0]
        assert "readonly database" in said[0] and "store= a writable path" in said[0]
    conn = sqlite3.connect(path)  # the file is as it was
    assert conn.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 3


def test_a_sweep_over_a_read_only_store_serves_its_rows_and_warns_once(worker, tmp_path,
                                                                        read_only):
    """Marking stored rows with the input set's shapes (issue 34) is a write too: on a
    read-only file it ended the sweep with "attempt to write a readonly database"."""
    spec = parse_cell(LINE, "# ktune: BLOCK in [1, 2, 4]\ndef scale(x, y, n):\n    y[:] = 2 * x\n",
                      NS)
    tune(spec, "exhaustive", budget=2, store=tmp_path, workers=[worker], top_k=0)
    read_only()
    again, said = _warnings(lambda: tune(spec, "exhaustive", store=tmp_path, workers=[worker],
                                         top_k=0))
    assert [e.cached for e in again.evaluations] == [True, True, False]
    assert len(said) == 1 and "kept in memory" in said[0]
    with Store(tmp_path) as s:
        assert len(s) == 2


def test_an_old_read_only_store_is_read_through_mode_ro(tmp_path, read_only):
    path = write_v1_store(tmp_path / "v1.sqlite")  # cannot be migrated in place read-only
    read_only()
    with Store(path) as s:
        assert not s.saving and s.schema_found == 1
        (row,) = s.results(StoreKey("h", "d"))
        assert row.median_ms == 1.5 and row.attempts == 1
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta").fetchone()[0] == "1"  # untouched


def test_a_store_that_cannot_be_created_keeps_results_in_memory(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the store's folder should be")
    s = Store(blocker / "sub" / ".ktune.sqlite")
    _, said = _warnings(lambda: s.put(KEY, result(64, [1.0])))
    assert not s.saving and s.get(KEY, {"BLOCK": 64}).median_ms == 1.0
    assert len(said) == 1 and "cannot write the store" in said[0]
    s.close()
    assert blocker.read_text().startswith("a file")


def test_a_new_store_in_a_read_only_folder_keeps_results_in_memory(tmp_path, monkeypatch):
    def refuse(path, mode="rwc"):
        if path != ":memory:":
            raise sqlite3.OperationalError("unable to open database file")
        return real(path, mode)

    real = store_module.connect
    monkeypatch.setattr(store_module, "connect", refuse)
    with Store(tmp_path) as s:
        _, said = _warnings(lambda: s.put(KEY, result(64, [1.0])))
        assert not s.saving and len(s) == 1
        assert "unable to open database file" in said[0]
    assert not (tmp_path / ".ktune.sqlite").exists()


# -- a full disk -----------------------------------------------------------------------------
def test_a_full_disk_mid_sweep_keeps_every_result_in_memory_with_one_warning(tmp_path):
    path = _filled(tmp_path / "s.sqlite", blocks=(64,))
    with Store(path) as s:
        s._conn.execute("VACUUM")  # no free pages left by the v4 migration's rebuild
        pages = s._conn.execute("PRAGMA page_count").fetchone()[0]
        s._conn.execute(f"PRAGMA max_page_count = {pages}")  # SQLite answers SQLITE_FULL
        _, said = _warnings(lambda: [s.put(KEY, result(b, [0.5] * 2000)) for b in (1, 2, 3)])
        assert len(said) == 1 and "database or disk is full" in said[0]
        assert not s.saving and len(s) == 4
        assert s.get(KEY, {"BLOCK": 64}).median_ms == 96.0  # the rows saved before are kept
        assert s.get(KEY, {"BLOCK": 3}).times_ms.size == 2000
    with Store(path) as s:
        assert len(s) == 1


def test_other_database_errors_still_raise(tmp_path):
    with Store(tmp_path) as s:
        s._conn.execute("DROP TABLE results")
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            s.put(KEY, result(64, [1.0]))


# -- transient failures on resume ------------------------------------------------------------
CRASHY = """# ktune: BLOCK in [1, 2, 4]
import os
def scale(x, y, n):
    if os.path.exists(%r + str(BLOCK)):
        os.abort()
    y[:] = 2 * x
"""


def test_a_crashed_variant_is_run_once_more_on_resume_and_then_kept(worker, tmp_path):
    marks = tmp_path / "crash-"
    for block in (2, 4):
        (tmp_path / f"crash-{block}").touch()
    spec = parse_cell(LINE, CRASHY % str(marks), NS)

    def sweep():
        report = tune(spec, "exhaustive", store=tmp_path / "s.sqlite", workers=[worker], top_k=0)
        return {e.result.config["BLOCK"]: (e.result.status, e.cached) for e in report.evaluations}

    assert sweep() == {1: (Status.OK, False), 2: (Status.CRASHED, False),
                       4: (Status.CRASHED, False)}
    (tmp_path / "crash-2").unlink()  # the crash was the machine's: 2 runs now
    assert sweep() == {1: (Status.OK, True), 2: (Status.OK, False), 4: (Status.CRASHED, False)}
    assert sweep() == {1: (Status.OK, True), 2: (Status.OK, True), 4: (Status.CRASHED, True)}
    with Store(tmp_path / "s.sqlite") as s:
        attempts = {r.config["BLOCK"]: r.attempts for r in s.results(stage=None)}
    assert attempts == {1: 1, 2: 1, 4: 2}


@pytest.mark.parametrize("status, attempts, retry", [
    (Status.CRASHED, 1, True), (Status.TIMEOUT, 1, True), (Status.TIMEOUT, 2, False),
    (Status.WRONG, 1, False), (Status.COMPILE_ERROR, 1, False), (Status.OK, 1, False),
])
def test_only_transient_failures_are_retried_and_only_once(status, attempts, retry):
    assert StoredResult(config={}, status=status, attempts=attempts).retry is retry
