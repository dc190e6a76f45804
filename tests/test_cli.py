"""The ``ktune`` command, run through its entry point as a subprocess: output and exit codes."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
from cuda_tools import needs_nvcc

SETUP = """import numpy as np
def inputs():
    x = np.random.rand(512).astype(np.float32)
    return dict(x=x, y=np.empty_like(x), n=512)
def reference(x, y, n):
    return 2 * x
"""
FAKE = """# %%kernel scale --backend fake --inputs inputs --reference reference --out y --budget-ms 5
# ktune: BLOCK in [1, 2, 8]; require BLOCK < 4
def scale(x, y, n):
    y[:] = 2 * x
"""  # noqa: E501 - the magic line is one line
CUDA = """// %%kernel scale --inputs inputs --reference reference --out y
// ktune: BLOCK in [128, 256]; grid = cdiv(n, BLOCK); block = BLOCK
template <int BLOCK>
__global__ void scale(const float* x, float* y, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
"""
TRITON = """# %%kernel scale --backend triton --inputs inputs --reference reference --out y
# ktune: BLOCK in [128, 256]; num_warps in [4]; grid = (cdiv(n, BLOCK),)
@triton.jit
def scale(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, 2.0 * tl.load(x + offs, mask=offs < n), mask=offs < n)
"""
SUBCOMMANDS = ("run", "static", "device", "tune", "compare")


def ktune(*args: str, cwd=None) -> subprocess.CompletedProcess:
    """Run ``python -m jupyter_ktune.cli ARGS`` the way a shell would."""
    return subprocess.run([sys.executable, "-m", "jupyter_ktune.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


needs_triton = pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                                  reason="triton not installed")


@pytest.fixture
def files(tmp_path):
    """The kernel files and the setup file, written to a fresh folder."""
    for name, text in (("k.py", FAKE), ("k.cu", CUDA), ("kt.py", TRITON), ("setup.py", SETUP),
                       ("wrong.py", FAKE.replace("2 * x", "3 * x")),
                       ("broken.cu", CUDA.replace("2.0f * x[i]", "2.0f * xx[i]"))):
        (tmp_path / name).write_text(text)
    return tmp_path


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The error output must be one line starting with [ktune], with no traceback."""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("[ktune]"), proc.stderr
    return lines[0]


def test_help_names_every_command_and_the_exit_codes():
    proc = ktune("--help")
    assert proc.returncode == 0
    for cmd in SUBCOMMANDS:
        assert f"\n    {cmd} " in proc.stdout, cmd  # listed with its help line
    assert "exit codes:" in proc.stdout and "4  compile error" in proc.stdout
    assert "``" not in proc.stdout and "(issue" not in proc.stdout


@pytest.mark.parametrize("cmd", SUBCOMMANDS)
def test_every_command_has_help_with_examples(cmd):
    proc = ktune(cmd, "--help")
    assert proc.returncode == 0
    examples = proc.stdout.split("examples:")[1]
    assert f"ktune {cmd}" in examples and "3  cannot run here" in proc.stdout


def test_a_usage_error_exits_2():
    assert ktune("nope").returncode == 2


def test_run_writes_json_and_exits_0_when_verified(files):
    out = files / "r.json"
    proc = ktune("run", "k.py", "--setup", "setup.py", "--config", "BLOCK=2", "--json", "r.json",
                 cwd=files)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["status"] == "ok" and data["config"] == {"BLOCK": 2}
    assert data["measurement"]["timing"]["times_ms"] and "median" in proc.stdout


def test_a_wrong_kernel_exits_1(files):
    proc = ktune("run", "wrong.py", "--setup", "setup.py", cwd=files)
    assert proc.returncode == 1 and "wrong result" in proc.stdout


def test_a_config_its_require_line_refuses_exits_2(files):
    proc = ktune("run", "k.py", "--setup", "setup.py", "--config", "BLOCK=8", cwd=files)
    assert proc.returncode == 2 and "not allowed" in proc.stdout


def test_a_missing_file_is_one_line_naming_the_fix(files):
    proc = ktune("static", "nope.cu", cwd=files)
    assert proc.returncode == 2
    assert "nope.cu: no such file" in one_error_line(proc)
    proc = ktune("run", "k.py", "--setup", "nope.py", cwd=files)
    assert proc.returncode == 2 and "nope.py: no such file" in one_error_line(proc)


def test_a_file_without_the_magic_line_is_refused(files):
    (files / "bare.cu").write_text("__global__ void k() {}\n")
    proc = ktune("static", "bare.cu", cwd=files)
    assert proc.returncode == 2 and "line 1 must be the magic line" in one_error_line(proc)


def test_a_failing_setup_file_is_one_line(files):
    (files / "bad_setup.py").write_text("import numpy as np\nundefined_name\n")
    proc = ktune("run", "k.py", "--setup", "bad_setup.py", cwd=files)
    assert proc.returncode == 2 and "NameError" in one_error_line(proc)


@needs_nvcc
def test_static_cuda_gives_the_full_report_and_exits_0(files):
    proc = ktune("static", "k.cu", "--config", "BLOCK=256", cwd=files)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "void scale<256>(float const*, float*, int)" in out
    for word in ("registers", "shared memory", "spills", "stack", "occupancy 100%: 8 blocks",
                 "SASS (", "LDG.32"):
        assert word in out, word
    assert "cannot run here" not in out + proc.stderr


@needs_nvcc
def test_a_compile_error_exits_4(files):
    proc = ktune("static", "broken.cu", cwd=files)
    assert proc.returncode == 4 and "xx" in proc.stderr


@needs_nvcc
@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy can run here")
def test_run_without_a_device_exits_3_and_still_shows_the_report(files):
    proc = ktune("run", "k.cu", "--setup", "setup.py", cwd=files)
    assert proc.returncode == 3 and "cannot run here" in proc.stdout
    assert "registers" in proc.stdout


@needs_triton
def test_static_triton_without_setup_says_to_pass_it(files):
    proc = ktune("static", "kt.py", cwd=files)
    assert proc.returncode == 2
    assert "pass --setup FILE.py" in one_error_line(proc)


@needs_triton
def test_static_triton_with_setup_gives_the_full_report(files):
    proc = ktune("static", "kt.py", "--setup", "setup.py", "--config", "BLOCK=256", cwd=files)
    assert proc.returncode == 0, proc.stderr
    for word in ("static report for sm_90", "registers", "occupancy", "blocks of 128 threads",
                 "SASS (", "LDG."):
        assert word in proc.stdout, word
    assert "cannot run here" not in proc.stdout


def test_device_shows_a_table_of_every_backend():
    proc = ktune("device")
    assert proc.returncode == 0, proc.stderr
    header, *rows = proc.stdout.splitlines()
    for column in ("backend", "device", "static report", "run", "GPU time", "interpreter",
                   "profile"):
        assert column in header, column
    named = {row.split()[0] for row in rows if row.strip()}
    assert {"cuda", "triton", "pallas"} <= named
    assert "DeviceInfo(" not in proc.stdout


def test_the_readme_documents_every_exit_code():
    from pathlib import Path

    from jupyter_ktune.cli import Exit

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    table = readme.split("The exit code says what happened:", 1)[1].split("\n\n")[1]
    documented = {int(row.split("|")[1]) for row in table.splitlines()[2:]}
    assert documented == {int(e) for e in Exit}
