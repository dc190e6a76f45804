"""``%load_ext jupyter_ktune`` spawns the device worker before it imports the magic's modules
(issue 33): spawned after them, a cell run right after ``%load_ext`` (Run All) found the worker
still starting, 0.15-0.18 s of its first result's "worker start" on a 2-core machine, while
the magic's imports (0.2-0.3 s) ran before the spawn.

A fresh interpreter, since pytest's process imported the magics long ago: an import hook
records when ``jupyter_ktune.magics`` is imported, and the worker's ``start`` records the
spawn instead of spawning.
"""

from __future__ import annotations

import json
import subprocess
import sys

ORDER = """
import json, sys
order = []
class Record:
    def find_spec(self, name, path=None, target=None):
        if name == "jupyter_ktune.magics":
            order.append("magics imported")
        return None
sys.meta_path.insert(0, Record())
import jupyter_ktune
from jupyter_ktune.runner.client import DeviceWorker
DeviceWorker.start = lambda self: order.append("worker spawned")
class Shell:
    def register_magics(self, magics):
        order.append("magics registered")
jupyter_ktune.load_ipython_extension(Shell())
print(json.dumps(order))
"""


def test_load_ext_spawns_the_worker_before_it_imports_the_magics():
    p = subprocess.run([sys.executable, "-c", ORDER], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    order = json.loads(p.stdout.strip().splitlines()[-1])
    assert order == ["worker spawned", "magics imported", "magics registered"]
