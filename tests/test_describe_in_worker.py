"""A Triton cell's ``@triton.autotune`` list is read by the device worker, which keeps the
module for the run: the kernel's package is imported once, never in the notebook (issue 33).

The package here is a probe written to a temporary folder: each import appends the importing
process's id to a file, so the test sees which processes imported it and how often.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from jupyter_ktune.runner.describe import MODULE_PHASE

CELL = """# ktune: grid = lambda META: (triton.cdiv(n, META['BLOCK']),)
import sys
sys.path.insert(0, {folder!r})
from ktune_probe_pkg import CONFIGS

@triton.autotune(configs=CONFIGS, key=['n'])
@triton.jit
def probe(x, y, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + o, 2.0 * tl.load(x + o, mask=o < n), mask=o < n)
"""
LINE = "probe --backend triton --inputs inputs --reference reference --out y --budget-ms 5"


def probe_package(tmp_path: Path) -> tuple[Path, Path]:
    """The probe package's folder and the file its imports append their process ids to."""
    marks = tmp_path / "imports.txt"
    pkg = tmp_path / "pkgs" / "ktune_probe_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent(f"""
        import os
        with open({str(marks)!r}, "a") as f:
            f.write(f"{{os.getpid()}}\\n")
        import triton
        CONFIGS = [triton.Config({{'BLOCK': 32}}, num_warps=2),
                   triton.Config({{'BLOCK': 64}}, num_warps=4)]
        """))
    return pkg.parent, marks


SCRIPT = """
import json, sys
import numpy as np
from jupyter_ktune.api import run_kernel
from jupyter_ktune.runner.client import get_worker
from jupyter_ktune.api import parse_cell

def inputs():
    x = np.random.rand(100).astype(np.float32)
    return dict(x=x, y=np.empty_like(x), n=100)

def reference(x, y, n):
    return 2 * x

ns = {"inputs": inputs, "reference": reference}
spec = parse_cell(LINE, CELL, ns)
parsed = {m: m in sys.modules for m in ("torch", "triton", "ktune_probe_pkg")}
marks_after_parse = open(MARKS).read().split()
r = run_kernel(spec, {"BLOCK": 64, "num_warps": 4})
ran = {m: m in sys.modules for m in ("torch", "triton", "ktune_probe_pkg")}
print(json.dumps({"parsed": parsed, "space": [spec.space.names, len(list(spec.space.configs()))],
                  "after_parse": marks_after_parse, "ran": ran, "worker": get_worker().pid,
                  "status": r.status.value, "reason": r.reason[:300]}))
"""


def test_the_notebook_never_imports_the_package_and_the_worker_imports_it_once(tmp_path):
    folder, marks = probe_package(tmp_path)
    script = (f"LINE = {LINE!r}\nCELL = {CELL.format(folder=str(folder))!r}\n"
              f"MARKS = {str(marks)!r}\n" + SCRIPT)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    # the parse read the list: its tunables, the listed combinations only
    assert got["space"] == [["BLOCK", "num_warps", "num_stages"], 2], got
    # ... without the package, torch or triton in the notebook process
    assert got["parsed"] == {"torch": False, "triton": False, "ktune_probe_pkg": False}, got
    # ... read by the device worker, which the run then used without importing it again
    assert got["after_parse"] == [str(got["worker"])], got
    assert got["status"] == "ok", got["reason"]
    # the device's description and the result came back as plain data: torch's version was
    # a TorchVersion, whose unpickling imported torch in the notebook
    assert got["ran"] == got["parsed"], got
    pids = marks.read_text().split()
    assert pids.count(str(got["worker"])) == 1, pids


def test_the_first_result_names_the_parse_time_module_import(tmp_path):
    from jupyter_ktune.api import parse_cell
    from jupyter_ktune.ui.start import panel_for

    folder, marks = probe_package(tmp_path)

    def inputs():  # noqa: ANN202
        x = np.random.rand(100).astype(np.float32)
        return dict(x=x, y=np.empty_like(x), n=100)

    ns = {"inputs": inputs, "reference": lambda x, y, n: 2 * x}
    spec = parse_cell(LINE, CELL.format(folder=str(folder)), ns)
    panel = panel_for(spec, replaces="describe-phases-test")
    try:
        r = panel.result
        assert r.status.value == "ok", r.reason
        assert MODULE_PHASE in r.extra["phases_ms"], r.extra["phases_ms"]
        # a second panel of the same cell paid nothing at parse: no phase of it
        again = panel_for(parse_cell(LINE, CELL.format(folder=str(folder)), ns),
                          replaces="describe-phases-test")
        assert MODULE_PHASE not in again.result.extra["phases_ms"]
        again.session.close()
    finally:
        panel.session.close()
