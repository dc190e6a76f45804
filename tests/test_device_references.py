"""A function that imports a device array package in its own body is a device function, and it
runs in the worker; the input helper sees no device.

Kernel Tuner's convolution bench cell has the shape that escaped: a reference with ``import
torch`` under a ``try``, whose ``conv2d`` the helper ran on the GPU for every set of a sweep,
beside the worker's timing."""

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


def _calls(path, at_least=1, timeout_s=30.0):
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= at_least:
            break
        time.sleep(0.05)
    return [tuple(x.split()) for x in path.read_text().splitlines()] if path.exists() else []


def test_a_device_reference_runs_in_the_worker_and_the_helper_sees_no_device(tmp_path,
                                                                            monkeypatch):
    """A real worker, the fake backend, a reference that imports a device package in its body.
    The helper draws the first set and the next one with ``CUDA_VISIBLE_DEVICES`` empty; the
    reference runs in the worker, which sees the device as the notebook does."""
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
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # the worker's device
    with DeviceWorker() as w:
        assert send_first_set(w, "fake", line, ns)
        assert len(_calls(log, 1)) == 1  # the first set, in the helper
        w.device("fake")
        spec = parse_cell(line, src, ns)
        claim_first_set(w, spec)
        first = w.run(spec, spec.space.default())
        assert first.status is Status.OK, first.reason
        calls = _calls(log, 3)  # its reference, and the next set drawn beside the run
        worker_pid = str(w.pid)
    drawn = [(p, seen) for k, p, seen in calls if k == "inputs"]
    refs = [(p, seen) for k, p, seen in calls if k == "ref"]
    assert drawn and all(p != worker_pid and seen == "''" for p, seen in drawn), calls
    assert refs and all(p == worker_pid and seen == "'3'" for p, seen in refs), calls
