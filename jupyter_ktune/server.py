"""The jupyter server extension: BokehJS for the panel, and the backends' editor grammars.

The panel's figures are Bokeh documents drawn by jupyter_bokeh, which needs ``window.Bokeh``.
Putting BokehJS into the notebook's outputs (``output_notebook(INLINE)``) made every saved
notebook 1.3 MB larger; instead the labextension loads the script from here, once per page
(``GET {base_url}ktune/static/bokeh/bokeh.min.js``). The file is bokeh's own, so the JS always
matches the Python package's version, and no CDN is involved. Enabled by the
``jupyter-config/jupyter_server_config.d/jupyter_ktune.json`` file the wheel installs.

The labextension highlights a ``%%kernel`` cell in its backend's language; which language that
is, is a fact of the backend (``BackendBase.editor_mime``), so the editor asks the registry here
(``GET {base_url}ktune/backends``) instead of holding a name map: a backend added in Python
(a registry line, ``KTUNE_BACKEND_MODULES``) is highlighted with no TypeScript change.

Both routes are read-only and authenticated (issue 9's rule): BokehJS goes through jupyter_server's
``AuthenticatedFileHandler`` (a logged-in user with the ``contents`` permission, like
``/files/``); the backends' table through an ``APIHandler`` GET with ``@web.authenticated`` and
the ``kernelspecs`` permission (it says what the kernel's cells are written in, as kernelspecs
do), the server's Origin check included.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: URL path under the server's base URL
STATIC_PATH = "ktune/static/bokeh"
#: URL path of the backends' editor grammars (``labextension/src/highlight.ts`` reads it)
BACKENDS_PATH = "ktune/backends"


def bokehjs_dir() -> Path:
    """Return the folder of bokeh's shipped JavaScript (``bokeh.min.js`` and its components)."""
    from bokeh.util.paths import bokehjs_path

    return Path(bokehjs_path()) / "js"


def backends_table(log: Any = None) -> dict[str, Any]:
    """``{"default": name, "backends": {name: editor mime}}`` from the backend registry.

    Imports each backend's module (its class: no Triton, JAX or CuPy, which load only in the
    worker) once per server. A backend that fails to import is left out, and logged: its cells
    keep the notebook's language, and one broken plugin does not take highlighting from the rest.
    """
    from jupyter_ktune.backends import DEFAULT_BACKEND, backend_names, get_backend

    grammars = {}
    for name in backend_names():
        try:
            grammars[name] = get_backend(name).editor_mime
        except Exception as exc:  # noqa: BLE001 - any plugin's failure: leave that one out
            if log is not None:
                log.warning("[ktune] backend %s left out of %s: %s", name, BACKENDS_PATH, exc)
    return {"default": DEFAULT_BACKEND, "backends": grammars}


def _backends_handler() -> type:
    """The handler class, made when the extension loads: importing this module must not need
    jupyter_server (the package does not require it)."""
    from jupyter_server.auth.decorator import authorized
    from jupyter_server.base.handlers import APIHandler
    from tornado import web

    class BackendsHandler(APIHandler):
        """GET only: the table is read, never written."""

        auth_resource = "kernelspecs"

        @web.authenticated
        @authorized
        def get(self) -> None:
            self.finish(json.dumps(backends_table(self.log)))

    return BackendsHandler


def load(serverapp: Any) -> None:
    """Add the BokehJS and the backends routes to a running jupyter server."""
    from jupyter_server.base.handlers import AuthenticatedFileHandler
    from jupyter_server.utils import url_path_join

    web_app = serverapp.web_app
    base_url = web_app.settings["base_url"]
    web_app.add_handlers(".*$", [
        (url_path_join(base_url, STATIC_PATH, "(.*)"), AuthenticatedFileHandler,
         {"path": str(bokehjs_dir())}),
        (url_path_join(base_url, BACKENDS_PATH), _backends_handler(), {})])
    serverapp.log.info("[ktune] serving BokehJS from %s", bokehjs_dir())
