"""A function that imports a device array package in its own body is a device function; the input
helper sees no device, but for a cell's first set, drawn before anything is timed.

Kernel Tuner's convolution bench cell has the shape that escaped: a reference with ``import
torch`` under a ``try``, whose ``conv2d`` the helper ran on the GPU for every set of a sweep,
beside the worker's timing. Its first set still has the reference run in a helper that sees the
device (torch's import and cuDNN's start off the worker's path); the sets after it do not."""

from __future__ import annotations

import os
import textwrap

import numpy as np

from jupyter_ktune.runner.device_modules import device_modules, uses_device_arrays


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


def test_a_first_set_with_a_device_reference_is_sent_for_a_helper_that_sees_the_device():
    from jupyter_ktune.runner.first_set import send_first_set

    class Worker:
        pid = 1

        def __init__(self) -> None:
            self.asked: list[tuple] = []

        def request(self, msg, timeout):  # noqa: ANN001, ANN201
            self.asked.append(msg)
            return ("ok", True)

    def inputs():
        return {"x": np.ones(4)}

    line = "k --backend cuda --inputs inputs --reference reference --out output"
    w = Worker()
    assert send_first_set(w, "cuda", line, {"inputs": inputs, "reference": conv_like_reference})
    assert send_first_set(w, "cuda", line, {"inputs": inputs, "reference": inputs})
    assert [m[4] for m in w.asked] == [True, False]


def _calls(path, at_least=1, timeout_s=30.0):
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= at_least:
            break
        time.sleep(0.05)
    return [tuple(x.split()) for x in path.read_text().splitlines()] if path.exists() else []


def test_only_the_first_sets_helper_sees_the_device_and_later_references_run_in_the_worker(
        tmp_path, monkeypatch):
    """A real worker, the fake backend, a reference that imports a device package in its body.
    The first set's reference runs in a helper that sees the device (``CUDA_VISIBLE_DEVICES`` as
    the worker has it); the next set is drawn by a new helper that sees none, and its reference
    runs in the worker."""
    from jupyter_ktune.api import parse_cell
    from jupyter_ktune.results import Status
    from jupyter_ktune.runner.client import DeviceWorker
    from jupyter_ktune.runner.first_set import claim_first_set, send_first_set

    log = tmp_path / "calls"
    ns: dict = {"np": np, "LOG": str(log)}
    exec(textwrap.dedent("""
        def inputs():
            import os
            with open(LOG, "a") as f:
                f.write(f"inputs {os.getpid()} {os.environ.get('CUDA_VISIBLE_DEVICES')!r}\\n")
            x = np.random.rand(1000)
            return dict(x=x, y=np.empty_like(x), n=1000)

        def reference(x, y, n):
            import os
            try:
                import torch  # noqa: F401 - named, as a device reference would
            except ImportError:
                pass
            with open(LOG, "a") as f:
                f.write(f"ref {os.getpid()} {os.environ.get('CUDA_VISIBLE_DEVICES')!r}\\n")
            return 2 * x
    """), ns)
    line = "scale --backend fake --inputs inputs --reference reference --out y --budget-ms 5"
    src = "# ktune: BLOCK in [1, 2, 4]\ndef scale(x, y, n):\n    y[:] = 2 * x\n"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # the worker's device, as the helper sees it
    with DeviceWorker() as w:
        assert send_first_set(w, "fake", line, ns)
        assert len(_calls(log, 2)) == 2  # the first set and its reference, in the helper
        w.device("fake")
        spec = parse_cell(line, src, ns)
        claim_first_set(w, spec)
        first = w.run(spec, spec.space.default())
        assert first.status is Status.OK, first.reason
        calls = _calls(log, 3)  # the next set, drawn beside the first run
        worker_pid = str(w.pid)
    (kind0, pid0, seen0), (kind1, pid1, seen1), (kind2, pid2, seen2) = calls[:3]
    assert (kind0, kind1) == ("inputs", "ref") and pid0 == pid1 != worker_pid
    assert seen0 == seen1 == "'3'"  # the first set's helper sees the device
    assert kind2 == "inputs" and pid2 not in (pid0, worker_pid) and seen2 == "''"  # a new one
    assert not any(k == "ref" and p == pid2 for k, p, _ in calls)  # its reference: the worker's
