"""A ``%%kernel`` cell's start, and a notebook's kernel start (``prepare``), import the panel's
widget stack on a thread of their own (``ui.start.import_widgets_soon``, issue 33).

``panel_for`` imports ipywidgets and bokeh (0.43-0.49 s here) once the parse is done, and a
Triton ``--from`` cell's parse waits for the worker's torch and module import: imported there,
the widgets came after that wait instead of beside it. Each case is a fresh interpreter, since
pytest's process has imported the widgets long ago; an import hook records which thread
imported each widget module first, and the cell's backend is one no worker serves (the
import starts before the backend is looked at), so no worker starts.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from jupyter_ktune.ui.start import WIDGET_MODULES

RECORD = """
import json, sys, threading, time
seen = {}
class Record:
    def find_spec(self, name, path=None, target=None):
        seen.setdefault(name, threading.current_thread().name)
        return None
sys.meta_path.insert(0, Record())
import jupyter_ktune.magics, jupyter_ktune.prepare
from jupyter_ktune.ui.start import WIDGET_MODULES
before = [m for m in WIDGET_MODULES if m in sys.modules]
t0 = time.perf_counter()
%s
returned_s = time.perf_counter() - t0
deadline = time.time() + 20
while not all(m in sys.modules for m in WIDGET_MODULES) and time.time() < deadline:
    time.sleep(0.01)
print(json.dumps({"before": before, "returned_s": returned_s,
                  "by": {m: seen.get(m) for m in WIDGET_MODULES},
                  "loaded": [m for m in WIDGET_MODULES if m in sys.modules]}))
"""


def _run(call: str) -> dict:
    code = RECORD % textwrap.dedent(call).strip()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_cell_start_imports_the_widget_stack_on_a_thread_and_returns_at_once():
    got = _run('jupyter_ktune.magics.warm_worker("k --backend no-such-backend", "")')
    assert got["before"] == []  # the magic's own import leaves them for the panel
    assert got["loaded"] == list(WIDGET_MODULES)
    assert set(got["by"].values()) == {"ktune-import-widgets"}, got["by"]
    assert got["returned_s"] < 0.2  # the import did not run on the caller's thread


def test_a_kernel_start_that_names_a_backend_imports_them_too():
    got = _run("jupyter_ktune.prepare._open_in_order = lambda backends: None  # no worker\n"
               'jupyter_ktune.prepare.prepare(["%%kernel k --backend cuda\\n"])')
    assert got["loaded"] == list(WIDGET_MODULES)
    assert got["by"]["ipywidgets"] == "ktune-import-widgets", got["by"]
