"""A function that imports a device array module in its own body is a device function, the input
helper cannot reach a device, and the worker imports a cell's device packages from its start.

Kernel Tuner's convolution bench cell has the shape that escaped: a reference with ``import
torch`` under a ``try``, which ran its ``conv2d`` on the GPU inside the helper, beside the
worker's timing. Its first cell then waited for that import in the first run; the worker now
imports it ahead (on an H100 host the reference phase was 2.3 s, mostly the import)."""

from __future__ import annotations

import os
import sys
import textwrap
import time

import numpy as np
import pytest

from jupyter_ktune.runner.device_modules import (
    device_modules,
    import_ahead,
    join_ahead,
    uses_device_arrays,
)


def conv_like_reference(output, input, filter):  # noqa: A002, ANN001, ANN201 - as the bench's
    """The shape of ``bench/convolution_vs_kernel_tuner.reference``: torch on the GPU if any."""
    try:
        import torch

        if torch.cuda.is_available():
            return torch.from_numpy(input).cuda().cpu().numpy()
    except ImportError:
        pass
    return input * filter.sum()


def test_imports_in_a_functions_own_body_name_its_device_packages():
    ns: dict = {"np": np}
    exec(textwrap.dedent("""
        def nn_functional(x):
            import torch.nn.functional as F
            return F.relu(x)
        def cupyx_signal(x):
            from cupyx.scipy import signal
            return signal.correlate2d(x, x)
        def in_a_lambda(x):
            return (lambda v: __import__("numpy") and v)(x) if x is None else [
                __import__("math") for _ in ()] or (lambda: __import__("os"))
        def nested(x):
            def inner():
                import jax.numpy as jnp
                return jnp.sum(x)
            return inner()
        def host(x):
            import math
            return np.sqrt(x) * math.pi
    """), ns)
    assert device_modules(conv_like_reference) == {"torch"}
    assert device_modules(ns["nn_functional"]) == {"torch"}
    assert device_modules(ns["cupyx_signal"]) == {"cupy"}
    assert device_modules(ns["nested"]) == {"jax"}
    assert device_modules(ns["host"]) == set() and device_modules(ns["in_a_lambda"]) == set()
    assert uses_device_arrays(conv_like_reference) and not uses_device_arrays(ns["host"])
    assert device_modules(np.add) is None and uses_device_arrays(np.add)  # unreadable: device


def test_a_device_package_named_by_the_notebooks_globals_still_counts():
    import types

    ns = {"cp": types.ModuleType("cupy.fake"), "np": np}
    exec("def ref(x):\n    return cp.asnumpy(x)\n", ns)
    assert device_modules(ns["ref"]) == {"cupy"}


def test_the_helper_runs_with_every_device_hidden():
    from jupyter_ktune.runner.inputs_ahead import InputsAhead

    def inputs():
        return dict(cuda=os.environ.get("CUDA_VISIBLE_DEVICES"),
                    jax=os.environ.get("JAX_PLATFORMS"), x=np.zeros(4, np.float32))

    ahead = InputsAhead()
    try:
        ahead.start("io", inputs)
        drawn = ahead.take_set("io")
    finally:
        ahead.close()
    assert drawn is not None
    assert drawn.args["cuda"] == "" and drawn.args["jax"] == "cpu"


def test_a_cells_start_asks_the_worker_for_its_functions_device_packages():
    from jupyter_ktune.runner.first_set import send_imports_ahead

    class Worker:
        def __init__(self) -> None:
            self.asked: list[tuple] = []

        def request(self, msg, timeout):  # noqa: ANN001, ANN201
            self.asked.append(msg)
            return ("ok", msg[1])

    def inputs():
        return {"x": np.ones(4)}

    line = "k --backend cuda --inputs inputs --reference reference --out output"
    w = Worker()
    assert send_imports_ahead(w, line, {"inputs": inputs, "reference": conv_like_reference}) \
        == ["torch"]
    assert w.asked == [("import_ahead", ["torch"])]
    w.asked.clear()  # a host reference, or one the line does not verify against: nothing asked
    assert send_imports_ahead(w, line, {"inputs": inputs, "reference": inputs}) == []
    assert send_imports_ahead(w, line + " --no-verify",
                              {"inputs": inputs, "reference": conv_like_reference}) == []
    assert w.asked == []


@pytest.fixture
def slow_fake_cupy(tmp_path):
    """A package named ``cupy`` that takes 1.5 s to import and records the importing thread."""
    (tmp_path / "cupy").mkdir()
    (tmp_path / "cupy" / "__init__.py").write_text(
        "import threading, time\ntime.sleep(1.5)\nTHREAD = threading.current_thread().name\n")
    return str(tmp_path)


def test_the_worker_imports_them_on_a_thread_and_user_code_waits_for_them(slow_fake_cupy):
    from jupyter_ktune.runner.client import DeviceWorker

    path = os.pathsep.join([slow_fake_cupy, *sys.path])
    with DeviceWorker(env={"PYTHONPATH": path}) as w:
        assert w.request(("ping",), timeout=60) == ("ok", "pong")
        t0 = time.perf_counter()
        assert w.request(("import_ahead", ["cupy", "os"]), timeout=30) == ("ok", ["cupy"])
        answered = time.perf_counter() - t0
        assert answered < 1.0, f"the import held the reply ({answered:.2f} s)"

        def who_imported() -> tuple:
            import cupy

            return cupy.THREAD, cupy.__file__

        thread, where = w.call(who_imported, timeout=30)  # a call runs user code: it waits
    assert thread == "ktune-reference-imports" and where.startswith(slow_fake_cupy)


def test_only_device_packages_are_imported_ahead():
    assert import_ahead(["os", "numpy", None]) == []
    join_ahead()


def test_a_kernel_cells_start_has_the_worker_import_its_references_package(slow_fake_cupy,
                                                                           monkeypatch):
    """``%%kernel``'s start (``magics.warm_worker``) sends them, before the device's opening."""
    from jupyter_ktune import magics
    from jupyter_ktune.runner import client
    from jupyter_ktune.runner.client import DeviceWorker

    def inputs():
        return {"x": np.ones(8), "y": np.zeros(8), "n": 8}

    def reference(x, **_):  # noqa: ANN001, ANN003, ANN202
        import cupy

        return {"y": cupy.asnumpy(2 * x)}

    line = "scale --backend fake --inputs inputs --reference reference --out y"
    path = os.pathsep.join([slow_fake_cupy, *sys.path])
    with DeviceWorker(env={"PYTHONPATH": path}) as w:
        monkeypatch.setattr(client, "_default", w)
        thread = magics.warm_worker(line, "", {"inputs": inputs, "reference": reference})
        assert thread is not None
        thread.join(60)

        def imported_by() -> str | None:
            found = sys.modules.get("cupy")
            return getattr(found, "THREAD", None)

        assert w.call(imported_by, timeout=30) == "ktune-reference-imports"
