"""tune() from a plain script without the __main__ guard: one line, no BrokenProcessPool."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT, TESTS

SCRIPT = '''import numpy as np
from jupyter_ktune.api import parse_cell
from jupyter_ktune.tuning import tune

def inputs():
    x = np.random.rand(64)
    return dict(x=x, y=np.empty_like(x), n=64)

def reference(x, y, n):
    return 2 * x

SRC = "# ktune: B in [1, 2, 4]\\ndef scale(x, y, n):\\n    y[:] = 2 * x\\n"
LINE = "scale --backend fake --inputs inputs --reference reference --out y --budget-ms 2"

def main():
    spec = parse_cell(LINE, SRC, {"inputs": inputs, "reference": reference})
    report = tune(spec, "exhaustive", store="s.sqlite", compile_workers=2, top_k=0)
    print("DONE", len(report.evaluations), "pool", report.info["compile_workers"])
'''


def run(tmp_path, tail):
    path = tmp_path / "script.py"
    path.write_text(SCRIPT + tail)
    env = dict(os.environ, KTUNE_BACKEND_MODULES="fake=ktune_fake_backend",
               PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT)]))
    return subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env, text=True,
                          capture_output=True, timeout=240)


def test_an_unguarded_script_compiles_in_the_worker_and_says_so_in_one_line(tmp_path):
    p = run(tmp_path, "\nmain()\n")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "DONE 3 pool 0" in p.stdout
    lines = [line for line in p.stderr.splitlines() if "[ktune]" in line]
    assert len(lines) == 1 and 'if __name__ == "__main__":' in lines[0]
    assert "script.py:" in lines[0]
    assert "Traceback" not in p.stderr and "bootstrapping" not in p.stderr


def test_a_guarded_script_keeps_its_compile_pool(tmp_path):
    p = run(tmp_path, '\nif __name__ == "__main__":\n    main()\n')
    assert p.returncode == 0, p.stderr[-2000:]
    assert "DONE 3 pool 2" in p.stdout and "[ktune]" not in p.stderr
