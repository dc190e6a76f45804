"""A new variant's inputs and reference are made while its build runs beside the run (issue 33).

Every built-in backend's run waits for the static report's build (nvcc's cubin, Triton's
compile for the target, the Pallas lowering), started first in its thread. These tests use the
fake backend with a build that takes a while in the report thread and a compile that waits for
it, as the CUDA backend's does: the run's inputs and reference must be called while that build
is still running, and what they raise must still be reported as before, after a compile error
and once each.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import ktune_fake_backend as fake
import numpy as np
import pytest

from jupyter_ktune.api import parse_cell
from jupyter_ktune.runner import execute, input_sets

BUILD_S = 0.4


class BuildsBeside(fake.FakeBackend):
    """The fake, with a static report that builds for BUILD_S in the report thread and a
    compile that loads that build (waits for it), as nvcc's cubin is loaded by the CUDA run."""

    def __init__(self) -> None:
        self.built = threading.Event()

    def static_report(self, spec, config):
        time.sleep(BUILD_S)
        self.built.set()
        return None

    def compile(self, spec, config):
        assert self.built.wait(10), "the build never finished"
        return super().compile(spec, config)


@pytest.fixture()
def backend(monkeypatch):
    built = BuildsBeside()
    monkeypatch.setattr(execute, "get_backend", lambda name: built)
    input_sets.forget_sets()
    yield built
    input_sets.forget_sets()


def _spec(src: str, inputs, reference):
    ns = {"inputs": inputs, "reference": reference}
    return parse_cell("scale --backend fake --inputs inputs --reference reference --out y "
                      "--budget-ms 5", src, ns)


def _fresh_source(body: str) -> str:
    # a source of its own per test: the static reports are kept per source hash and config
    return f"# {time.monotonic_ns()}\n{body}"


def test_the_inputs_and_the_reference_are_made_while_the_build_runs(backend) -> None:
    seen: dict[str, bool] = {}

    def inputs():
        seen["inputs during the build"] = not backend.built.is_set()
        return dict(x=np.random.rand(64), y=np.empty(64))

    def reference(x, y):
        seen["reference during the build"] = not backend.built.is_set()
        return 2 * x

    spec = _spec(_fresh_source("def scale(x, y):\n    y[:] = 2 * x\n"), inputs, reference)
    t0 = time.perf_counter()
    result = execute.run_variant(spec, spec.space.config({}))
    assert result.status.value == "ok", result.reason
    assert seen == {"inputs during the build": True, "reference during the build": True}
    assert {"inputs", "reference", "compile"} <= set(result.phases_ms)
    assert time.perf_counter() - t0 < 10


@pytest.mark.parametrize(("header", "status"), [("def scale(x, y:", "compile error"),
                                                 ("def scale(x, y):", "runtime error")])
def test_a_compile_error_wins_over_the_inputs_error_which_is_else_the_result(
        backend, header: str, status: str) -> None:
    calls: list[str] = []

    def inputs():
        calls.append("inputs")
        raise ValueError("no such file: weights.npy")

    spec = _spec(_fresh_source(f"{header}\n    y[:] = 2 * x\n"), inputs, lambda x, y: 2 * x)
    result = execute.run_variant(spec, spec.space.config({}))
    assert result.status.value == status, result.reason
    assert ("weights.npy" in result.reason) == (status == "runtime error"), result.reason
    assert len(calls) <= 1 if status == "compile error" else calls == ["inputs"]


def test_a_reference_error_is_reported_once_after_the_kernel_compiled(backend) -> None:
    calls: list[str] = []

    def reference(x, y):
        calls.append("reference")
        raise ZeroDivisionError("the reference divided by zero")

    spec = _spec(_fresh_source("def scale(x, y):\n    y[:] = 2 * x\n"),
                 lambda: dict(x=np.random.rand(64), y=np.empty(64)), reference)
    result = execute.run_variant(spec, spec.space.config({}))
    assert result.status.value == "runtime error"
    assert "divided by zero" in result.reason and calls == ["reference"]


class LoadsTheReportsBuild(BuildsBeside):
    """The fake as the CUDA backend is where nvcc is found: the run loads the report's build."""

    def __init__(self) -> None:
        super().__init__()
        self.compiled: list[dict] = []
        self.loaded: list[dict] = []

    def runs_report_build(self, spec) -> bool:
        return True

    def static_report(self, spec, config):
        super().static_report(spec, config)
        return SimpleNamespace(kernels={}, threads_per_block=128)

    def compile(self, spec, config):
        self.compiled.append(dict(config))
        return super().compile(spec, config)

    def load_prebuilt(self, spec, config, report):
        self.loaded.append(dict(config))
        return fake.Variant(spec, config)


def test_a_prefetch_starts_the_build_and_leaves_the_worker_free(monkeypatch) -> None:
    """A panel's neighbour prefetch (``compile_variant``) held the worker's request loop for
    nvcc's whole build (1.6-1.9 s on the H200), so a move made meanwhile waited behind it. It
    now only starts the build; the run then loads it, without building again."""
    backend = LoadsTheReportsBuild()
    monkeypatch.setattr(execute, "get_backend", lambda name: backend)
    spec = _spec(_fresh_source("# ktune: K in [1, 2]\ndef scale(x, y):\n    y[:] = 2 * x\n"),
                 lambda: dict(x=np.random.rand(64), y=np.empty(64)), lambda x, y: 2 * x)
    config = spec.space.config({"K": 2})
    t0 = time.perf_counter()
    ahead = execute.compile_variant(spec, config)
    assert time.perf_counter() - t0 < BUILD_S / 2, "the prefetch waited for the build"
    assert ahead.status.value == "ok" and not backend.built.is_set()
    assert backend.built.wait(10)
    time.sleep(0.05)  # the report's future is set just after
    result = execute.run_variant(spec, config)
    assert result.status.value == "ok", result.reason
    assert backend.loaded == [{"K": 2}] and backend.compiled == []


def test_a_sticky_device_fault_while_drawing_compiles_nothing_and_is_fatal(backend,
                                                                         monkeypatch) -> None:
    """A sticky fault raised by the worker's own drawing (an upload of the set, of the expected
    outputs) leaves a broken context: the run loads nothing in it and ends as a fatal fault,
    so the worker restarts, as when the set was drawn after the compile."""
    compiled: list[dict] = []
    monkeypatch.setattr(backend, "compile", lambda spec, config: compiled.append(config))

    def faulting(*args, **kwargs):
        raise fake.FatalFault("an illegal memory access was encountered")

    monkeypatch.setattr(input_sets, "current_set", faulting)
    spec = _spec(_fresh_source("def scale(x, y):\n    y[:] = 2 * x\n"),
                 lambda: dict(x=np.random.rand(64), y=np.empty(64)), lambda x, y: 2 * x)
    with pytest.raises(execute.FatalDeviceError):
        execute.run_variant(spec, spec.space.config({}))
    assert compiled == []
