"""The jupyter server extension: serves BokehJS from the installed ``bokeh`` package.

The panel's figures are Bokeh documents drawn by jupyter_bokeh, which needs ``window.Bokeh``.
Putting BokehJS into the notebook's outputs (``output_notebook(INLINE)``) made every saved
notebook 1.3 MB larger; instead the labextension loads the script from here, once per page
(``GET {base_url}ktune/static/bokeh/bokeh.min.js``). The file is bokeh's own, so the JS always
matches the Python package's version, and no CDN is involved. Enabled by the
``jupyter-config/jupyter_server_config.d/jupyter_ktune.json`` file the wheel installs.

The one route is read-only (GET and HEAD of files in bokeh's js folder) and goes through
jupyter_server's ``AuthenticatedFileHandler``: a logged-in user only (the ``contents``
permission), with the server's XSRF/Referer check, like ``/files/`` (issue 9's rule).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: URL path under the server's base URL
STATIC_PATH = "ktune/static/bokeh"


def bokehjs_dir() -> Path:
    """Return the folder of bokeh's shipped JavaScript (``bokeh.min.js`` and its components)."""
    from bokeh.util.paths import bokehjs_path

    return Path(bokehjs_path()) / "js"


def load(serverapp: Any) -> None:
    """Add the static route for BokehJS to a running jupyter server."""
    from jupyter_server.base.handlers import AuthenticatedFileHandler
    from jupyter_server.utils import url_path_join

    web_app = serverapp.web_app
    route = url_path_join(web_app.settings["base_url"], STATIC_PATH, "(.*)")
    web_app.add_handlers(".*$", [(route, AuthenticatedFileHandler, {"path": str(bokehjs_dir())})])
    serverapp.log.info("[ktune] serving BokehJS from %s", bokehjs_dir())
