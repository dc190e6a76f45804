"""The backends route of the server extension (``GET ktune/backends``), asked over HTTP of a
real jupyter server in this process: the labextension learns each backend's editor grammar
there, so the table must come from the registry (a backend registered in one line included) and
be served to a logged-in user only.
"""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from jupyter_ktune.server import BACKENDS_PATH, backends_table

TOKEN = "ktune-test-token"


@pytest.fixture(autouse=True)
def fakecxx(monkeypatch):
    """The one registry line of the fake C++ backend (``tests/ktune_fake_cxx_backend.py``)."""
    monkeypatch.setenv("KTUNE_BACKEND_MODULES", os.environ.get("KTUNE_BACKEND_MODULES", "")
                       + ",fakecxx=ktune_fake_cxx_backend")


def test_the_table_is_the_registrys_facts():
    from jupyter_ktune.backends import DEFAULT_BACKEND, backend_names, get_backend

    table = backends_table()
    assert table["default"] == DEFAULT_BACKEND
    assert set(table["backends"]) == set(backend_names()) >= {"fakecxx"}
    assert table["backends"]["fakecxx"] == "text/x-csrc"  # the fake's own fact, in no map
    assert table["backends"]["fake"] == "text/x-ipython"  # BackendBase's default
    assert all(mime == get_backend(name).editor_mime for name, mime in table["backends"].items())


def test_a_backend_that_fails_to_import_is_left_out_and_logged(monkeypatch):
    monkeypatch.setenv("KTUNE_BACKEND_MODULES", os.environ["KTUNE_BACKEND_MODULES"]
                       + ",broken=ktune_no_such_module")
    said = []

    class Log:
        def warning(self, *args):
            said.append(args[0] % args[1:])

    table = backends_table(Log())
    assert "broken" not in table["backends"] and "fakecxx" in table["backends"]
    assert said and "backend broken left out" in said[0]


def test_reading_the_table_imports_no_gpu_runtime():
    """The server process holds no device: the facts are the backends' classes, nothing more."""
    import subprocess
    import sys

    code = ("import sys; from jupyter_ktune.server import backends_table; backends_table(); "
            "print([m for m in ('triton', 'jax', 'cupy', 'torch') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "KTUNE_BACKEND_MODULES": ""})
    assert out.stdout.strip() == "[]", out


def _serve_and_fetch(tmp_path, monkeypatch, headers: dict[str, str]) -> tuple[int, str]:
    """Start a jupyter server with the extension in this process; GET the route once."""
    from jupyter_server.serverapp import ServerApp
    from tornado.httpclient import AsyncHTTPClient, HTTPClientError
    from tornado.httpserver import HTTPServer
    from tornado.testing import bind_unused_port

    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR"):
        (tmp_path / var).mkdir()
        monkeypatch.setenv(var, str(tmp_path / var))
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")

    async def run() -> tuple[int, str]:
        app = ServerApp(jpserver_extensions={"jupyter_ktune": True}, root_dir=str(tmp_path),
                        base_url="/lab-base/")
        app.init_signal = lambda: None  # not the main thread's signals: pytest's
        app.initialize(argv=[f"--IdentityProvider.token={TOKEN}"], find_extensions=False,
                       new_httpserver=False)
        sock, port = bind_unused_port()
        server = HTTPServer(app.web_app)
        server.add_sockets([sock])
        try:
            url = f"http://127.0.0.1:{port}/lab-base/{BACKENDS_PATH}"
            response = await AsyncHTTPClient().fetch(url, headers=headers)
            return response.code, response.body.decode()
        except HTTPClientError as exc:
            return exc.code, ""
        finally:
            server.stop()
            ServerApp.clear_instance()

    return asyncio.run(run())


def test_the_route_serves_the_registrys_table_to_a_logged_in_user(tmp_path, monkeypatch):
    code, body = _serve_and_fetch(tmp_path, monkeypatch, {"Authorization": f"token {TOKEN}"})
    assert code == 200
    assert json.loads(body) == backends_table()
    assert json.loads(body)["backends"]["fakecxx"] == "text/x-csrc"


def test_the_route_refuses_a_request_without_the_token(tmp_path, monkeypatch):
    code, _ = _serve_and_fetch(tmp_path, monkeypatch, {})
    assert code == 403
