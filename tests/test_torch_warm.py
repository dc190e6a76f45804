"""A CUDA worker warms torch for its on-device checks when the cell needs torch or once the
worker is idle, not beside a first run that never imports it (issue 33).

The warm-up's import holds the GIL for seconds; started as the device opened, it made the first
timing of a NumPy-reference CUDA cell host-bound, and that timing was taken again once the
warm-up was done, so the first result waited for torch's import. The warm-up is replaced here
by a recorder in the worker, which notes when it was started."""

from __future__ import annotations

import dataclasses
import time

import pytest

from jupyter_ktune.api import parse_cell
from jupyter_ktune.backends import torch_interop
from jupyter_ktune.runner import torch_warm
from jupyter_ktune.runner.client import DeviceWorker


def _arm() -> float:
    """In the worker: the warm-up asked for (as the CUDA backend's device does), and
    ``start_warming`` replaced by a recorder of when it was started."""
    import time

    from jupyter_ktune.backends import torch_interop as ti

    ti.started_at = []

    def record() -> None:
        ti.started_at.append(time.monotonic())
        ti._warm_asked.clear()  # started: asked for no more

    ti.start_warming = record
    ti.warm_when_idle()
    return time.monotonic()


def _started() -> list[float]:
    from jupyter_ktune.backends import torch_interop as ti

    return list(ti.started_at)


def _cell(reference_body: str):
    namespace: dict = {}
    exec("def inputs():\n    return dict(n=3)\n"
         f"def reference(x, y):\n{reference_body}", namespace)
    return parse_cell("k --backend fake --inputs inputs --reference reference --out y",
                      "# ktune: B in [1, 2]\ndef k(x, y):\n    y[:] = x\n", namespace)


def test_an_idle_worker_starts_the_warm_up_and_a_busy_one_does_not():
    with DeviceWorker() as w:
        armed = w.call(_arm)
        for _ in range(4):  # requests closer together than IDLE_S: the worker is not idle
            time.sleep(torch_warm.IDLE_S / 4)
            assert w.call(_started) == []
        time.sleep(torch_warm.IDLE_S + 0.5)
        started = w.call(_started)
        assert len(started) == 1, started
        assert started[0] - armed >= torch_warm.IDLE_S, (started, armed)


@pytest.mark.parametrize(("body", "at_once"), [
    ("    import torch\n    return torch.as_tensor(x).numpy()\n", True),
    ("    return x.copy()\n", False),
], ids=["torch reference", "numpy reference"])
def test_a_cell_that_uses_torch_starts_the_warm_up_with_its_first_request(body, at_once):
    with DeviceWorker() as w:
        w.call(_arm)
        w.limits(_cell(body))
        assert bool(w.call(_started)) is at_once


class _Conn:
    def __init__(self, request_waiting: bool):
        self.request_waiting, self.polled = request_waiting, []

    def poll(self, timeout: float) -> bool:
        self.polled.append(timeout)
        return self.request_waiting


@pytest.fixture
def asked(monkeypatch):
    """This process as a worker whose CUDA device asked for the warm-up; the starts recorded."""
    started: list[int] = []
    monkeypatch.setattr(torch_interop, "_warm_asked", [True])
    monkeypatch.setattr(torch_interop, "_warm_thread", [])
    monkeypatch.setattr(torch_interop, "start_warming", lambda: started.append(1))
    return started


def test_a_run_answered_with_a_request_behind_it_does_not_start_it(asked):
    """Autotune pressed at the first result: its sweep must not share the worker with torch's
    import (its first result 0.68 -> 1.74 s on an H100 when it did)."""
    conn = _Conn(request_waiting=True)
    assert not torch_warm.after_reply("run", conn) and asked == []
    assert conn.polled == [torch_warm.IDLE_S]


def test_another_request_waiting_defers_it(asked):
    conn = _Conn(request_waiting=True)
    assert not torch_warm.after_reply("limits", conn) and asked == []
    assert conn.polled == [torch_warm.IDLE_S]
    assert torch_warm.after_reply("limits", _Conn(request_waiting=False)) and asked == [1]


def test_nothing_asked_nothing_started(monkeypatch):
    monkeypatch.setattr(torch_interop, "_warm_asked", [])
    conn = _Conn(request_waiting=False)
    assert not torch_warm.after_reply("run", conn) and conn.polled == []


def test_a_reference_that_cannot_be_read_counts_as_using_torch(asked):
    class Reference:
        def __call__(self, x, y):
            return x

    spec = dataclasses.replace(_cell("    return x\n"), reference=Reference())
    assert torch_warm.for_spec(spec) and asked == [1]


def _fake_cupy():
    """A CuPy that sees one Hopper GPU: what the CUDA backend's device opening reads."""
    from types import SimpleNamespace

    props = {"name": b"a GPU", "major": 9, "minor": 0, "sharedMemPerBlockOptin": 232448,
             "sharedMemPerMultiprocessor": 233472, "multiProcessorCount": 132,
             "l2CacheSize": 52428800, "maxThreadsPerBlock": 1024,
             "regsPerMultiprocessor": 65536}
    runtime = SimpleNamespace(getDeviceCount=lambda: 1, getDeviceProperties=lambda i: props,
                              runtimeGetVersion=lambda: 13000)
    cuda = SimpleNamespace(runtime=runtime, Device=lambda: SimpleNamespace(id=0),
                           nvrtc=SimpleNamespace(getVersion=lambda: (13, 0)))
    return SimpleNamespace(cuda=cuda, __version__="14.0")


def test_the_cuda_device_asks_for_the_warm_up_and_does_not_start_it(monkeypatch, asked):
    """The CUDA backend's device opening, on a GPU (a fake CuPy that sees one): the warm-up is
    asked for, not started; the worker starts it (above)."""
    from jupyter_ktune.backends import context_ahead
    from jupyter_ktune.backends.cuda.backend import CudaBackend
    from jupyter_ktune.backends.opening import Opening
    from jupyter_ktune.measure import clocks

    monkeypatch.setattr(torch_interop, "_warm_asked", [])
    monkeypatch.delenv("KTUNE_COMPILE_ONLY", raising=False)
    monkeypatch.setattr(Opening, "imports", lambda self, *names: [_fake_cupy()])
    monkeypatch.setattr(context_ahead, "start_in_worker", lambda: None)
    monkeypatch.setattr(clocks, "driver_version", lambda: "580")
    device = CudaBackend().device()
    assert device.available and device.compute_capability == "9.0", device
    assert torch_interop.warm_asked() and asked == []


@pytest.mark.parametrize("soon", [True, False], ids=["says torch", "says nothing"])
def test_a_device_request_that_says_torch_starts_the_warm_up_as_the_device_opens(soon):
    """A cell whose reference uses torch: its warm-up starts with the device's opening, not at
    the first spec request a moment later, when the first run began beside torch's import
    (Kernel Tuner's convolution on an H100: "device" 95 -> 661 ms)."""
    with DeviceWorker() as w:
        w.call(_arm)
        w.device("fake", torch_soon=soon)
        assert bool(w.call(_started)) is soon


_FUNCTIONS = ("def inputs():\n    return dict(n=3)\n"
              "def ref_numpy(x, y):\n    return x.copy()\n"
              "def ref_torch(x, y):\n    import torch\n    return torch.as_tensor(x).numpy()\n")
_LINE = "k --backend cuda --inputs inputs --reference {} --out y"


def test_the_magic_line_says_whether_the_cell_uses_torch():
    ns: dict = {}
    exec(_FUNCTIONS, ns)
    assert torch_warm.line_uses_torch(_LINE.format("ref_torch"), ns)
    assert not torch_warm.line_uses_torch(_LINE.format("ref_numpy"), ns)
    assert not torch_warm.line_uses_torch("k --backend cuda --out y", ns)  # no inputs function


def test_a_cells_start_says_torch_with_its_device_request(monkeypatch):
    from jupyter_ktune import magics
    from jupyter_ktune.runner import client, describe, first_set

    opened: list = []
    monkeypatch.setattr(client, "get_worker", lambda: object())
    monkeypatch.setattr(first_set, "send_first_set", lambda *a: False)
    monkeypatch.setattr(describe, "open_device",
                        lambda worker, backend, torch_soon=False: opened.append(torch_soon))
    monkeypatch.setattr(magics, "start_compile_processes", lambda *a, **k: None)
    ns: dict = {}
    exec(_FUNCTIONS, ns)
    for reference in ("ref_torch", "ref_numpy"):
        magics.warm_worker(_LINE.format(reference), "", ns).join(10)
    assert opened == [True, False]
