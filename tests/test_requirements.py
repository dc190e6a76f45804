"""A missing optional module is "cannot run here" with what is missing and the command to add it."""

from __future__ import annotations

import pytest

from jupyter_ktune.errors import CannotRun
from jupyter_ktune.requirements import (
    REQUIREMENTS,
    missing_dependency,
    missing_from,
    missing_reason,
    require,
)


@pytest.mark.parametrize(("module", "command"), [
    ("triton", "python -m pip install triton"),
    ("torch", "python -m pip install torch"),
    ("jax", "python -m pip install jax"),
    ("cupy", 'python -m pip install "jupyter_ktune[cuda]"'),
])
def test_the_message_says_cannot_run_what_is_missing_and_the_command(module, command):
    err = missing_dependency(module)
    text = str(err)
    assert isinstance(err, CannotRun)
    assert text.startswith("[ktune] ")  # the status beside it says "cannot run here"
    assert f"needs {module}, which is not installed" in text
    assert f"Add it: {command}" in text and "\n" not in text


def test_torch_says_which_build_a_machine_without_a_gpu_needs():
    assert "CPU build" in str(missing_dependency("torch"))


def test_a_submodule_names_its_package():
    assert "needs jax," in str(missing_dependency("jax.experimental.pallas"))


def test_a_module_not_found_error_of_a_known_dependency_becomes_cannot_run():
    typo = ModuleNotFoundError("No module named 'numpyy'", name="numpyy")
    assert missing_from(typo) is None  # unknown: stays the cell's own error, on its line
    exc = ModuleNotFoundError("No module named 'triton'", name="triton")
    assert "needs triton" in str(missing_from(exc))
    assert missing_from(ValueError("x")) is None


def test_require_imports_or_raises_cannot_run(monkeypatch):
    assert require("json").__name__ == "json"
    monkeypatch.setitem(REQUIREMENTS, "ktune_absent_mod", REQUIREMENTS["jax"])
    with pytest.raises(CannotRun, match="needs ktune_absent_mod, which is not installed"):
        require("ktune_absent_mod")


def test_the_device_reason_is_the_message_without_the_prefix():
    assert str(missing_dependency("cupy")) == f"[ktune] {missing_reason('cupy')}"
    assert missing_reason("cupy").startswith("CUDA C++ on a GPU needs cupy")


def test_triton_backend_reports_a_missing_triton_as_cannot_run(monkeypatch):
    """The cell's prelude imports triton: its absence is "cannot run here" with the install
    command, not a compile error on cell line 1."""
    from jupyter_ktune.backends.triton import backend as tb

    def no_triton(*_a, **_k):
        raise ModuleNotFoundError("No module named 'triton'", name="triton")

    monkeypatch.setattr(tb, "load_module", no_triton)
    from jupyter_ktune.api import parse_cell

    spec = parse_cell("k --backend triton", "@triton.jit\ndef k(x):\n    pass\n")
    with pytest.raises(CannotRun, match="pip install triton"):
        tb.BACKEND.module(spec)


@pytest.mark.parametrize("gpu", [False, True])
def test_cuda_without_cupy_names_what_would_let_it_run_on_this_machine(gpu, monkeypatch,
                                                                       tmp_path):
    """No GPU: CuPy could not help, so the reason names a GPU (and no pip command), and the run
    still shows the static report (issue 36). A GPU without CuPy: the command that adds it."""
    import builtins
    import sys

    from jupyter_ktune.api import parse_cell
    from jupyter_ktune.backends.cuda import backend as cb
    from jupyter_ktune.results import Status
    from jupyter_ktune.runner.execute import run_variant
    from jupyter_ktune.toolchain import ToolNotFound, find_tool

    real_import = builtins.__import__

    def no_cupy(name, *args, **kwargs):
        if name == "cupy":
            raise ImportError("No module named 'cupy'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_cupy)
    monkeypatch.setattr(cb, "nvidia_gpu_visible", lambda: gpu)
    monkeypatch.setattr(cb, "BACKEND", cb.CudaBackend())
    reason = cb.BACKEND.device().reason
    if gpu:
        assert 'python -m pip install "jupyter_ktune[cuda]"' in reason
        return
    assert "pip install" not in reason and "runs only on a machine with one" in reason
    monkeypatch.setenv("KTUNE_CACHE_DIR", str(tmp_path))
    spec = parse_cell("k --backend cuda --grid 1 --block 32",
                      "__global__ void k(float* y) { y[threadIdx.x] = (float)M_PI; }\n")
    result = run_variant(spec, spec.space.config())
    assert result.status is Status.CANNOT_RUN and result.reason == reason
    try:
        find_tool("nvcc")
    except ToolNotFound:
        return
    assert result.static is not None and result.static.kernels
