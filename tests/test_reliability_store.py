"""Store integrity (issue 9): two notebooks writing one store, schema migration, and where
ktune writes; plus the check that there is no server extension (so no endpoint to protect)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tomllib

from jupyter_ktune.errors import KtuneError
from jupyter_ktune.results import Status
from jupyter_ktune.tune.store import _SCHEMA_V1, SCHEMA_VERSION, Store, StoreKey

ROOT = Path(__file__).parent.parent
TESTS = Path(__file__).parent
ROWS = 300

WRITER = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from test_store import result
    from jupyter_ktune.tune.store import Store, StoreKey
    sys.stdin.readline()  # both start together
    s = Store({path!r})
    key = StoreKey("notebook-{who}", "NVIDIA H200", "")
    shared = StoreKey("shared", "NVIDIA H200", "")
    for i in range({rows}):
        s.put(key, result(i, [1.0 + i, 2.0]))
        s.put(shared, result(i % 50, [float(i)]))  # both write the same 50 keys too
    s.close()
""")


@pytest.mark.parametrize("attempt", range(3))  # the open race showed up once in ~5 runs
def test_two_processes_writing_one_new_store_leave_it_whole(tmp_path, attempt):
    path = tmp_path / ".ktune.sqlite"  # does not exist yet: both create and migrate it
    procs = [subprocess.Popen([sys.executable, "-c", WRITER.format(
        tests=str(TESTS), path=str(path), who=who, rows=ROWS)], stdin=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True) for who in "ab"]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    with Store(path) as s:
        assert s._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        for who in "ab":
            rows = s.results(StoreKey(f"notebook-{who}", "NVIDIA H200", ""))
            assert sorted(r.config["BLOCK"] for r in rows) == list(range(ROWS))
        assert len(s.results(StoreKey("shared", "NVIDIA H200", ""))) == 50
        assert len(s) == 2 * ROWS + 50


def test_a_version_0_file_is_migrated_and_a_version_1_file_is_read(tmp_path):
    old = tmp_path / "v0.sqlite"
    conn = sqlite3.connect(old)  # version 0: a file with no ktune tables (and an unrelated one)
    conn.execute("CREATE TABLE notes (t TEXT)")
    conn.commit()
    conn.close()
    with Store(old) as s:
        assert s.schema_found == 0 and len(s) == 0
        s.put(StoreKey("h", "d"), _result())
    v1 = tmp_path / "v1.sqlite"  # a version 1 file written by hand, as ktune 1 lays it out
    conn = sqlite3.connect(v1)
    conn.executescript(_SCHEMA_V1)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    conn.execute("INSERT INTO results VALUES ('h', '{\"BLOCK\":64}', 'd', '', 'sweep', 'k', "
                 "'cuda', 'ok', '', 1.5, '[1.5]', 'events', NULL, NULL, 0)")
    conn.commit()
    conn.close()
    with Store(v1) as s:
        assert s.schema_found == 1 == SCHEMA_VERSION
        (row,) = s.results(StoreKey("h", "d"))
        assert row.status is Status.OK and row.median_ms == 1.5


def test_a_file_that_is_not_a_store_is_a_ktune_error_naming_it(tmp_path):
    bad = tmp_path / ".ktune.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(KtuneError, match=r"^\[ktune\] .*\.ktune\.sqlite"):
        Store(tmp_path)


def _result():
    from test_store import result

    return result(1, [1.0])


# -- security ---------------------------------------------------------------------------------
def test_the_only_server_endpoint_is_the_authenticated_read_only_bokehjs_route():
    """A server endpoint must come with Jupyter's auth and XSRF checks (issue 9). The one there
    is (issue 17: BokehJS served instead of stored in every notebook) is read-only and goes
    through jupyter_server's AuthenticatedFileHandler; anything else fails this test."""
    from types import SimpleNamespace

    from jupyter_server.base.handlers import AuthenticatedFileHandler

    from jupyter_ktune.server import load

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "jupyter_server" not in project["project"]["dependencies"]
    shared = project["tool"]["hatch"]["build"]["targets"]["wheel"].get("shared-data", {})
    assert [k for k, v in shared.items() if "jupyter_server_config.d" in v] == \
        ["jupyter-config/jupyter_server_config.d"]
    for py in (ROOT / "jupyter_ktune").rglob("*.py"):
        text = py.read_text()
        for marker in ("APIHandler", "tornado.web", "RequestHandler"):
            assert marker not in text, f"{py}: {marker}: a server endpoint needs auth + XSRF"
        if "_jupyter_server_extension" in text or "load_jupyter_server_extension" in text:
            assert py.name == "__init__.py" and "jupyter_ktune.server" in text
    added: list = []
    app = SimpleNamespace(web_app=SimpleNamespace(settings={"base_url": "/"},
                                                  add_handlers=lambda _h, hs: added.extend(hs)),
                          log=SimpleNamespace(info=lambda *a: None))
    load(app)
    assert [(route, handler) for route, handler, _kw in added] == \
        [("/ktune/static/bokeh/(.*)", AuthenticatedFileHandler)]


WRITE_AUDIT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    import numpy as np
    from jupyter_ktune.spec import parse_cell
    from jupyter_ktune.tune import tune
    from test_sweep import LINE, NS, SRC
    from jupyter_ktune.runner.client import DeviceWorker
    with DeviceWorker() as w:
        r = tune(parse_cell(LINE, SRC, NS), "random", budget=4, workers=[w], top_k=1)
    assert len(r.evaluations) == 4
""")


def test_a_sweep_writes_only_beside_the_notebook_and_in_the_temp_dir(tmp_path):
    nb, home, tmp = (tmp_path / d for d in ("notebook", "home", "tmp"))
    for d in (nb, home, tmp):
        d.mkdir()
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp)}
    env.pop("KTUNE_CACHE_DIR", None)
    subprocess.run([sys.executable, "-c", WRITE_AUDIT.format(tests=str(TESTS))], cwd=nb,
                   env=env, check=True, timeout=120)
    assert [p.name for p in nb.iterdir()] and all(p.name.startswith(".ktune.sqlite")
                                                 for p in nb.iterdir())
    assert not any(home.rglob("*")), list(home.rglob("*"))  # nothing in ~ (no ceilings on CPU)
    assert not any(tmp.iterdir()), list(tmp.iterdir())  # worker logs are removed on close
