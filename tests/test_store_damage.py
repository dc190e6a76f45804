"""A read-only or damaged store (issue 34 item 4): read with one warning, or one ``[ktune]`` line.

Read-only: the tests run as root, where ``chmod`` stops nothing, so the store is opened by a
child process running as an unprivileged user (``setpriv`` to uid 65534) where chmod does stop
it: a 444 file in a folder anyone can write, and a writable file in a 555 folder (no ``-wal`` or
``-shm`` can be made beside it). That is the case the issue found ("not a ktune results store
... Move it away"). Without root and ``setpriv`` the child runs as the current user; those tests
are skipped when that user can write the file anyway. The ``mode=ro`` connection tests of
``test_store_faults.py`` cover the same code without a second user.

Damaged: pages of a real store overwritten with zeros (the first page, later pages, the meta
table's page), and a file whose recorded version is older than its columns (``duplicate column
name: attempts``). Each gives one line naming the file and saying it was left untouched, and the
file's bytes are compared before and after.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_store import KEY, result

from jupyter_ktune.tuning.store import Store, StoreDamaged, StoreWarning

TESTS = Path(__file__).resolve().parent
PAGE = 4096
NOBODY = 65534
PROBE = """
import json, sys, warnings
sys.path.insert(0, {tests!r})
from test_store import KEY, result
from jupyter_ktune.tuning.store import Store
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    out = {{}}
    try:
        with Store({path!r}) as s:
            out["read"] = len(s.results(KEY))
            s.put(KEY, result(4096, [1.0]))
            s.put(KEY, result(8192, [1.0]))
            out["saving"], out["after"] = s.saving, len(s)
    except Exception as exc:
        out["error"] = f"{{type(exc).__name__}}: {{exc}}"
out["warnings"] = [str(w.message) for w in seen]
print(json.dumps(out))
"""


def _as_other_user() -> list[str]:
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: chmod cannot stop root")
    cmd = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    if not _other_user_can_import(tuple(cmd)):
        pytest.skip(f"uid {NOBODY} cannot import this environment's packages ({sys.prefix} is "
                    "not readable by other users; .ci/run makes its venv 755)")
    return cmd


@functools.cache
def _other_user_can_import(as_other: tuple[str, ...]) -> bool:
    """Whether the unprivileged user can run this interpreter with its packages: a venv made
    with ``mktemp -d`` is 0700, and the probe then fails on ``import numpy``, not on the store."""
    probe = subprocess.run([*as_other, sys.executable, "-c", "import numpy, jupyter_ktune"],
                           capture_output=True, text=True, timeout=120, cwd="/")
    return probe.returncode == 0


def _probe(path: Path) -> dict:
    cmd = [*_as_other_user(), sys.executable, "-c", PROBE.format(tests=str(TESTS),
                                                                 path=str(path))]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd="/")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _store(path: Path, rows: int = 3) -> Path:
    with Store(path) as s:
        for b in range(rows):
            s.put(KEY, result(b, [1.0 * b] * 50))
    return path


@pytest.fixture()
def shared_dir():
    """A folder outside pytest's private (0700) tmp, reachable by the other user."""
    d = Path(tempfile.mkdtemp(prefix="ktune-ro-"))
    d.chmod(0o755)
    yield d
    d.chmod(0o755)
    shutil.rmtree(d)


@pytest.mark.parametrize("where", ["a 444 file", "a 555 folder"])
def test_a_read_only_store_is_read_with_one_warning_and_new_results_stay_in_memory(shared_dir,
                                                                                    where):
    path = _store(shared_dir / ".ktune.sqlite")
    if where == "a 444 file":
        path.chmod(0o444)
        shared_dir.chmod(0o777)
    else:
        path.chmod(0o666)
        shared_dir.chmod(0o555)
    if not _as_other_user() and os.access(path.parent, os.W_OK) and os.access(path, os.W_OK):
        pytest.skip("this user can write the file: nothing is read-only here")
    before = _digest(path)
    out = _probe(path)
    assert "error" not in out, out["error"]  # was: "not a ktune results store ... Move it away"
    assert out["read"] == 3 and out["saving"] is False and out["after"] == 5
    (said,) = out["warnings"]
    assert said.startswith(f"[ktune] {path}: cannot write the store")
    assert "kept in memory" in said and "\n" not in said
    assert _digest(path) == before  # (SQLite may leave its -wal/-shm beside a 444 file)


def _zero(path: Path, first_page: int, pages: int = 1) -> None:
    data = bytearray(path.read_bytes())
    data[(first_page - 1) * PAGE:(first_page - 1 + pages) * PAGE] = bytes(pages * PAGE)
    path.write_bytes(bytes(data))


def _one_line_left_untouched(path: Path, text: str) -> None:
    assert text.startswith(f"[ktune] {path} is damaged") and "\n" not in text
    assert "left untouched" in text and "Move it away" in text


def _meta_page(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT rootpage FROM sqlite_master WHERE name='meta'").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.parametrize("damage", ["zeroed first page", "zeroed meta page",
                                    "recorded version older than its columns"])
def test_a_damaged_store_is_one_line_naming_it_and_is_left_untouched(tmp_path, damage):
    path = _store(tmp_path / "s.sqlite")
    if damage == "zeroed first page":
        _zero(path, 1)
    elif damage == "zeroed meta page":
        _zero(path, _meta_page(path))
    else:  # as a half-restored backup: v4 columns, meta saying v1
        conn = sqlite3.connect(path)
        conn.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
        conn.commit()
        conn.close()
    before = _digest(path)
    with pytest.raises(StoreDamaged) as e:
        Store(path)
    _one_line_left_untouched(path, str(e.value))
    if damage.startswith("recorded"):
        assert "duplicate column name: attempts" in str(e.value)
    assert e.value.__cause__ is None and e.value.__suppress_context__  # no sqlite traceback
    assert _digest(path) == before


def test_zeroed_later_pages_found_mid_sweep_are_one_warning_and_the_sweep_goes_on(tmp_path):
    path = _store(tmp_path / "s.sqlite", rows=200)
    _zero(path, 6, pages=4)
    before = _digest(path)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with Store(path) as s:
            s.results(KEY)
            s.put(KEY, result(4096, [2.0]))
            assert s.get(KEY, {"BLOCK": 4096}).median_ms == 2.0 and not s.saving
    said = [str(w.message) for w in seen if issubclass(w.category, StoreWarning)]
    assert len(said) == 1, said
    _one_line_left_untouched(path, said[0])
    assert "kept in memory" in said[0]
    assert _digest(path) == before


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(1, 60), min_size=1, max_size=4), st.booleans())
def test_no_damage_ends_in_a_raw_sqlite_error(tmp_path, pages, garbage):
    """Whatever pages are overwritten, opening and using the store either works, or says
    damaged in one line; never an sqlite3 traceback."""
    path = tmp_path / f"h{len(pages)}{int(garbage)}.sqlite"
    path.unlink(missing_ok=True)
    _store(path, rows=200)
    data = bytearray(path.read_bytes())
    for p in pages:
        if p * PAGE <= len(data):
            data[(p - 1) * PAGE:p * PAGE] = (bytes(range(256)) * 16 if garbage
                                              else bytes(PAGE))
    path.write_bytes(bytes(data))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreWarning)
        try:
            s = Store(path)
        except StoreDamaged as exc:
            _one_line_left_untouched(path, str(exc))
            return
        with s:
            s.results(KEY)
            s.top(KEY, 3)
            s.put(KEY, result(4096, [1.0]))
            assert s.get(KEY, {"BLOCK": 4096}) is not None
            len(s)
