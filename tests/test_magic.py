"""The %%kernel magic through IPython's own shell: parsing, results, errors without tracebacks."""

from __future__ import annotations

import numpy as np
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from jupyter_ktune.results import RunResult, Status


@pytest.fixture(scope="module")
def ip():
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "jupyter_ktune")
    shell.user_ns["inputs"] = lambda: dict(x=np.random.rand(256).astype(np.float32),
                                           y=np.empty(256, np.float32), n=256)
    shell.user_ns["reference"] = lambda x, y, n: 2 * x
    yield shell
    from jupyter_ktune.runner.client import get_worker

    get_worker().close()


FAKE = """# ktune: BLOCK in [1, 2]
def scale(x, y, n):
    y[:] = 2 * x
"""
CUDA = """// ktune: BLOCK in [128, 256]; grid = cdiv(n, BLOCK); block = BLOCK
#include <ktune.cuh>
template <int BLOCK>
__global__ void scale(const float* __restrict__ x, float* y, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
"""


def test_magic_returns_a_run_result_with_timing(ip):
    r = ip.run_cell_magic("kernel", "scale --backend fake --inputs inputs --reference reference "
                          "--out y --config BLOCK=2 --budget-ms 5 --no-panel", FAKE)
    assert isinstance(r, RunResult) and r.status is Status.OK
    assert r.config == {"BLOCK": 2}
    html = r._repr_html_()
    assert "correct" in html and "median" in html and "IQR" in html


def test_cuda_cell_on_a_cpu_machine_shows_static_report_and_says_it_cannot_run(ip):
    pytest.importorskip("jupyter_ktune.measure.static")
    from jupyter_ktune.toolchain import ToolNotFound, find_tool

    try:
        find_tool("nvcc")
    except ToolNotFound:
        pytest.skip("nvcc not installed")
    r = ip.run_cell_magic("kernel", "scale --inputs inputs --reference reference --out y "
                          "--no-panel", CUDA)
    if r.status is Status.OK:  # a GPU machine: verified, timed on the device, the same report
        assert r.verification.passed and r.measurement.timing.median_ms > 0, r
        assert r.static.kernel("scale").registers > 0 and r.static.threads_per_block == 128
        assert "correct" in r._repr_html_() and "median" in r._repr_html_()
        return
    assert r.status is Status.CANNOT_RUN
    assert r.status.value == "cannot run here" and "no NVIDIA GPU here" in r.reason
    k = r.static.kernel("scale")
    assert k.registers > 0 and k.spill_stores == 0
    assert r.static.threads_per_block == 128  # block = BLOCK, first value
    html = r._repr_html_()
    assert "cannot run here" in html and "Static report" in html


def test_compile_error_points_at_the_cell_line(ip):
    from jupyter_ktune.toolchain import ToolNotFound, find_tool

    try:
        find_tool("nvcc")
    except ToolNotFound:
        pytest.skip("nvcc not installed")
    bad = CUDA.replace("2.0f * x[i]", "2.0f * xx[i]")  # cell line 7 (magic line is 1)
    r = ip.run_cell_magic("kernel", "scale --inputs inputs --reference reference --out y "
                          "--no-panel", bad)
    assert r.status is Status.COMPILE_ERROR
    errors = [d for d in r.diagnostics if d.severity == "error"]
    assert errors and errors[0].line == 7 and "xx" in errors[0].message
    assert "cell line 7" in r.reason


@pytest.mark.parametrize("line, body, expected", [
    ("scale --backend nope", FAKE, "cell line 1: unknown backend 'nope'"),
    ("scale --backend fake --inputs missing", FAKE, "which is not defined in the notebook"),
    ("scale --backend fake --config BLOCK=3", FAKE,
     "'3' is not an allowed value of BLOCK. Choose one of 1, 2"),
    ("scale --backend fake", "# ktune: BLOCK in 1,2\n" + FAKE,
     "cell line 2: cannot read the values"),
    ("scale", CUDA.replace("grid = cdiv(n, BLOCK); ", ""), "the launch grid is not given"),
    ("other", CUDA, "no __global__ kernel named 'other'"),
])
def test_bad_input_is_a_one_line_error_naming_the_line_and_fix(ip, line, body, expected):
    with pytest.raises(UsageError, match=r"\[ktune\]") as exc:
        ip.run_cell_magic("kernel", line, body)
    assert expected in str(exc.value)
