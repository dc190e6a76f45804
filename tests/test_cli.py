"""The ``ktune`` command: a saved %%kernel cell run from a shell."""

from __future__ import annotations

import json

import pytest

from jupyter_ktune.cli import main

SETUP = """import numpy as np
def inputs():
    x = np.random.rand(512).astype(np.float32)
    return dict(x=x, y=np.empty_like(x), n=512)
def reference(x, y, n):
    return 2 * x
"""
FAKE = """# %%kernel scale --backend fake --inputs inputs --reference reference --out y --budget-ms 5
# ktune: BLOCK in [1, 2]
def scale(x, y, n):
    y[:] = 2 * x
"""
CUDA = """// %%kernel scale --inputs inputs --reference reference --out y
// ktune: BLOCK in [128, 256]; grid = cdiv(n, BLOCK); block = BLOCK
template <int BLOCK>
__global__ void scale(const float* x, float* y, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
"""


def test_run_writes_json_with_the_measurement(tmp_path, capsys):
    (tmp_path / "k.py").write_text(FAKE)
    (tmp_path / "setup.py").write_text(SETUP)
    out = tmp_path / "r.json"
    code = main(["run", str(tmp_path / "k.py"), "--setup", str(tmp_path / "setup.py"),
                 "--config", "BLOCK=2", "--json", str(out)])
    assert code == 0, capsys.readouterr()
    data = json.loads(out.read_text())
    assert data["status"] == "ok" and data["config"] == {"BLOCK": 2}
    assert data["measurement"]["timing"]["times_ms"]
    assert "median" in capsys.readouterr().out


def test_static_needs_no_gpu(tmp_path, capsys):
    from jupyter_ktune.toolchain import ToolNotFound, find_tool

    try:
        find_tool("nvcc")
    except ToolNotFound:
        pytest.skip("nvcc not installed")
    (tmp_path / "k.cu").write_text(CUDA)
    code = main(["static", str(tmp_path / "k.cu"), "--config", "BLOCK=256"])
    out = capsys.readouterr().out
    assert code == 0 and "registers" in out and "scale<256>" in out


def test_a_file_without_the_magic_line_is_refused(tmp_path, capsys):
    (tmp_path / "k.cu").write_text("__global__ void k() {}\n")
    assert main(["static", str(tmp_path / "k.cu")]) == 2
    assert "line 1 must be the magic line" in capsys.readouterr().err


def test_a_wrong_kernel_exits_non_zero(tmp_path):
    (tmp_path / "k.py").write_text(FAKE.replace("2 * x", "3 * x"))
    (tmp_path / "setup.py").write_text(SETUP)
    assert main(["run", str(tmp_path / "k.py"), "--setup", str(tmp_path / "setup.py")]) == 1
