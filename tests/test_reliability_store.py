"""Store integrity (issue 9): two notebooks writing one store, schema migration, and where
ktune writes; plus the check that the server extension's endpoints are read-only and
authenticated.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

import jupyter_ktune
from jupyter_ktune.errors import KtuneError
from jupyter_ktune.results import Status
from jupyter_ktune.tuning.store import SCHEMA_V1, SCHEMA_VERSION, Store, StoreKey

TESTS = Path(__file__).parent
ROWS = 300

WRITER = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from test_store import result
    from jupyter_ktune.tuning.store import Store, StoreKey
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


def write_v1_store(path):
    """Write a version 1 file by hand, as ktune 1 lays it out, with one row."""
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA_V1)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    conn.execute("INSERT INTO results VALUES ('h', '{\"BLOCK\":64}', 'd', '', 'sweep', 'k', "
                 "'cuda', 'ok', '', 1.5, '[1.5]', 'events', NULL, NULL, 0)")
    conn.commit()
    conn.close()
    return path


def test_a_version_0_file_and_a_version_1_file_are_migrated_and_read(tmp_path):
    old = tmp_path / "v0.sqlite"
    conn = sqlite3.connect(old)  # version 0: a file with no ktune tables (and an unrelated one)
    conn.execute("CREATE TABLE notes (t TEXT)")
    conn.commit()
    conn.close()
    with Store(old) as s:
        assert s.schema_found == 0 and len(s) == 0
        s.put(StoreKey("h", "d"), _result())
    v1 = write_v1_store(tmp_path / "v1.sqlite")
    with Store(v1) as s:  # migrated to v4 (attempts, space, median index, problem), row read
        assert s.schema_found == 1 and SCHEMA_VERSION == 4
        (row,) = s.results(StoreKey("h", "d"))
        # stored without its problem: no sweep's key (which always names one) is served it
        assert s.results(StoreKey("h", "d", problem="0123456789abcdef")) == []
        assert row.status is Status.OK and row.median_ms == 1.5 and row.attempts == 1
        assert s.best(StoreKey("h", "d")).median_ms == 1.5  # the v1 median column, by SQL
    with Store(v1) as s:
        assert s.schema_found == 4 and len(s) == 1


def test_a_file_that_is_not_a_store_is_a_ktune_error_naming_it(tmp_path):
    bad = tmp_path / ".ktune.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(KtuneError, match=r"^\[ktune\] .*\.ktune\.sqlite"):
        Store(tmp_path)


def _result():
    from test_store import result

    return result(1, [1.0])


# -- security ---------------------------------------------------------------------------------
def test_the_server_endpoints_are_the_authenticated_read_only_bokehjs_and_backends_routes():
    """A server endpoint must come with Jupyter's auth and XSRF checks (issue 9). There are two,
    both read-only: BokehJS (issue 17: served instead of stored in every notebook) through
    jupyter_server's AuthenticatedFileHandler, and the backends' editor grammars (issue 37: the
    labextension asks the registry) through an APIHandler whose one method is an authenticated
    GET; anything else fails this test (``tests/test_server.py`` asks the route without a token).

    It reads what is installed (the wheel's metadata, files and modules), not the checkout: a
    server extension reaches a user through these only.
    """
    from types import SimpleNamespace

    from jupyter_server.base.handlers import APIHandler, AuthenticatedFileHandler

    from jupyter_ktune.server import load

    dist = metadata.distribution("jupyter_ktune")
    assert not [r for r in dist.requires or [] if r.startswith("jupyter_server") and
                "extra ==" not in r], dist.requires
    configs = [Path(str(f)).name for f in dist.files or []
               if "jupyter_server_config.d" in str(f) or "jupyter_notebook_config.d" in str(f)]
    assert configs == ["jupyter_ktune.json"], configs
    package = Path(jupyter_ktune.__file__).parent
    modules = list(package.rglob("*.py"))
    assert len(modules) > 20, modules  # the installed package's modules, all of them
    for py in modules:
        text = py.read_text()
        if py.relative_to(package) != Path("server.py"):
            for marker in ("APIHandler", "tornado", "RequestHandler"):
                assert marker not in text, f"{py}: {marker}: a server endpoint needs auth + XSRF"
        if "_jupyter_server_extension" in text or "load_jupyter_server_extension" in text:
            assert py.name == "__init__.py" and "jupyter_ktune.server" in text
    added: list = []
    app = SimpleNamespace(web_app=SimpleNamespace(settings={"base_url": "/"},
                                                  add_handlers=lambda _h, hs: added.extend(hs)),
                          log=SimpleNamespace(info=lambda *a: None))
    load(app)
    routes = {route: handler for route, handler, _kw in added}
    assert list(routes) == ["/ktune/static/bokeh/(.*)", "/ktune/backends"]
    assert routes["/ktune/static/bokeh/(.*)"] is AuthenticatedFileHandler
    backends = routes["/ktune/backends"]
    assert issubclass(backends, APIHandler) and backends.auth_resource == "kernelspecs"
    own = {name for cls in backends.__mro__[:backends.__mro__.index(APIHandler)]
           for name in vars(cls)}
    assert own & {"post", "put", "patch", "delete"} == set() and "get" in own
    assert hasattr(backends.get, "__wrapped__")  # @web.authenticated (and @authorized)


WRITE_AUDIT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    import numpy as np
    from jupyter_ktune.api import parse_cell
    from jupyter_ktune.tuning import tune
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
