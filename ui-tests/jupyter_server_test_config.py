"""Jupyter server for the browser tests (``jlpm start``; Playwright starts it).

Galata's test configuration (no token, a temporary root dir, the galata helper extension), plus:
the port from ``KTUNE_UI_PORT``, no news feed, and this checkout's built
labextension (``jupyter_ktune/labextension``) put first on the extension path, so the tests
exercise the source tree's build even where an older copy is installed.
"""

import os
import tempfile
from pathlib import Path

from jupyterlab.galata import configure_jupyter_server

configure_jupyter_server(c)  # noqa: F821 - `c` is the config object Jupyter provides

c.ServerApp.port = int(os.environ.get("KTUNE_UI_PORT", "8888"))  # noqa: F821
c.ServerApp.ip = "127.0.0.1"  # noqa: F821
c.ServerApp.allow_root = True  # CI runs as root  # noqa: F821
c.LabApp.news_url = None  # noqa: F821

built = Path(__file__).resolve().parent.parent / "jupyter_ktune" / "labextension"
if (built / "package.json").exists():
    link_dir = Path(tempfile.mkdtemp(prefix="ktune-labext-"))
    (link_dir / "jupyter-ktune").symlink_to(built)
    galata = c.LabServerApp.extra_labextensions_path  # noqa: F821
    galata = [galata] if isinstance(galata, str) else list(galata)
    c.LabServerApp.extra_labextensions_path = [*galata, str(link_dir)]  # noqa: F821

# the BokehJS and backends routes of this checkout's server extension (jupyter_ktune/server.py)
c.ServerApp.jpserver_extensions = {"jupyter_ktune": True}  # noqa: F821
