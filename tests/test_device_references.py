"""A function that imports a device array package in its own body is a device function, and it
runs in the worker; the input helper sees no device, but for a cell's first set, drawn before
anything is timed.

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


def test_a_first_sets_helper_that_sees_the_device_stops_once_its_set_is_taken():
    """Even where no next set follows (a set too large to draw ahead), the helper that ran a
    first set's device reference does not live on beside the worker's timing."""
    from jupyter_ktune.runner.inputs_ahead import InputsAhead, draw_job

    def inputs():
        return dict(pid=os.getpid(), cuda=os.environ.get("CUDA_VISIBLE_DEVICES", "unset"),
                    x=np.ones(4, np.float32))

    ahead = InputsAhead()
    try:
        ahead.start_job("io", draw_job(inputs, None, ()), device=True)
        assert ahead.sees_device("io")
        drawn = ahead.take_set("io")
        assert drawn is not None and drawn.args["cuda"] != ""
        assert not os.path.exists(f"/proc/{drawn.args['pid']}")  # before anything else runs
    finally:
        ahead.close()


def _calls(path, at_least=1, timeout_s=30.0):
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= at_least:
            break
        time.sleep(0.05)
    return [tuple(x.split()) for x in path.read_text().splitlines()] if path.exists() else []


def test_a_first_sets_device_reference_runs_beside_the_imports_and_later_ones_in_the_worker(
        tmp_path, monkeypatch):
    """A real worker, the fake backend, a reference that imports a device package in its body
    and takes a while. The cell's first set and its reference come from a helper that sees the
    device (the first run waits for it rather than run the reference again), and that helper
    is gone once the set is taken. Every later set is drawn with ``CUDA_VISIBLE_DEVICES``
    empty, and its reference runs in the worker, which sees the device as the notebook does."""
    import time

    from jupyter_ktune.api import parse_cell
    from jupyter_ktune.results import Status
    from jupyter_ktune.runner.client import DeviceWorker
    from jupyter_ktune.runner.execute import REDRAW_EVERY
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
            import time
            try:
                import torch  # noqa: F401 - named, as a device reference would
            except ImportError:
                pass
            time.sleep(1.0)  # torch's import and cuDNN's start, on a GPU host
            with open(LOG, "a") as f:
                f.write(f"ref {os.getpid()} {os.environ.get('CUDA_VISIBLE_DEVICES')!r}\\n")
            return 2 * x
    """), ns)
    line = "scale --backend fake --inputs inputs --reference reference --out y --budget-ms 5"
    blocks = ", ".join(str(b) for b in range(1, REDRAW_EVERY + 2))
    src = f"# ktune: BLOCK in [{blocks}]\ndef scale(x, y, n):\n    y[:] = 2 * x\n"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # the worker's device
    with DeviceWorker() as w:
        assert send_first_set(w, "fake", line, ns)
        w.device("fake")
        spec = parse_cell(line, src, ns)
        claim_first_set(w, spec)
        configs = list(spec.space.configs())
        first = w.run(spec, configs[0])  # its reference is still running in the helper
        assert first.status is Status.OK, first.reason
        helper = {p for k, p, _ in _calls(log, 2) if k == "ref"}
        assert len(helper) == 1
        gone = time.monotonic() + 10
        while time.monotonic() < gone and os.path.exists(f"/proc/{next(iter(helper))}"):
            time.sleep(0.05)
        assert not os.path.exists(f"/proc/{next(iter(helper))}"), "the device helper lives on"
        for config in configs[1:REDRAW_EVERY]:
            assert w.run(spec, config).status is Status.OK
        _calls(log, 3)  # the next set, drawn beside the first run (its reply follows)
        time.sleep(1.0)  # back: a set still being drawn would let the current one serve on
        nxt = w.run(spec, configs[REDRAW_EVERY])  # a new set: its reference, in the worker
        assert nxt.status is Status.OK, nxt.reason
        calls = _calls(log, 4)
        worker_pid = str(w.pid)
    assert calls[0][0] == "inputs" and calls[1][0] == "ref", calls
    assert calls[0][1:] == calls[1][1:] and calls[0][1] != worker_pid, calls
    assert calls[0][2] == "'3'", calls  # the first set's helper sees the device
    later = calls[2:]
    drawn = [(p, seen) for k, p, seen in later if k == "inputs"]
    refs = [(p, seen) for k, p, seen in later if k == "ref"]
    assert drawn and all(p != worker_pid and seen == "''" for p, seen in drawn), calls
    assert refs and all(p == worker_pid and seen == "'3'" for p, seen in refs), calls
