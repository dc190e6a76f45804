"""A panel's first run does not wait for the kernel's host launcher to be built (issue 33).

Triton 3.6 builds a C launcher per kernel signature with gcc before a kernel's first launch:
0.4 s of fla's first result on an H100 host, after its compile. A sweep's first-pass runs
launch without it (``backends/triton/direct_launch.py``); now a panel's first run does too,
and the compile pool builds the launcher for the runs after it. Triton 3.6 is the device
host's; here the fake backend stands in, told it builds such launchers on a GPU."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import cloudpickle
import pytest
from ktune_fake_backend import copy_cell_spec

from jupyter_ktune.backends import get_backend
from jupyter_ktune.backends.base import DeviceInfo
from jupyter_ktune.runner import execute, worker
from jupyter_ktune.space import Config
from jupyter_ktune.tuning import compile_ahead


def _spec():
    return copy_cell_spec(3, "1, 2, 4")


@pytest.fixture
def launcher_per_signature(monkeypatch):
    """The fake backend as Triton 3.6 on a GPU: it builds a launcher per signature and can
    launch without it."""
    fake = type(get_backend("fake"))
    monkeypatch.setattr(fake, "quick_launch", lambda self: True)
    monkeypatch.setattr(fake, "builds_launcher_ahead", True)
    monkeypatch.setattr(fake, "device", lambda self: DeviceInfo(True, "a GPU",
                                                                  compute_capability="9.0"))
    return fake


def test_the_panels_first_run_launches_without_waiting_for_the_launcher(
        launcher_per_signature, monkeypatch):
    spec, first = _spec(), Config({"B": 2})
    monkeypatch.setattr(execute, "_quick", {})
    assert worker._handle(("before_first_run", spec, first, None)) == ("ok", False)
    assert execute._quick == {(spec.source_hash, first): True}  # that run, once

    monkeypatch.setattr(execute, "_quick", {})  # the interpreter: nothing to build there
    monkeypatch.setattr(launcher_per_signature, "device",
                        lambda self: DeviceInfo(True, "CPU", compute_capability=None))
    worker._handle(("before_first_run", spec, first, None))
    assert execute._quick == {}


def test_a_backend_that_needs_no_launcher_launches_as_before(monkeypatch):
    """On a GPU, a backend that builds no per-signature launcher (Triton 3.9's generic one,
    CUDA C++) keeps its own launch."""
    spec = _spec()
    monkeypatch.setattr(type(get_backend("fake")), "device",
                        lambda self: DeviceInfo(True, "a GPU", compute_capability="9.0"))
    monkeypatch.setattr(execute, "_quick", {})
    worker._handle(("before_first_run", spec, Config({"B": 1}), None))
    assert execute._quick == {}


class Pool:
    """Records what is submitted, in order; each task is done at once."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, tuple]] = []
        self.lock = threading.Lock()

    def submit(self, fn, *args) -> Future:
        with self.lock:
            self.sent.append((fn.__name__, cloudpickle.loads(args[0])))
        done: Future = Future()
        done.set_result(cloudpickle.dumps((None, {})))
        return done


def _sent(pool: Pool, n: int) -> list:
    import time

    deadline = time.monotonic() + 10
    while len(pool.sent) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return pool.sent


def test_the_pool_builds_the_first_configs_launcher_before_its_compiles(
        launcher_per_signature):
    spec, first = _spec(), Config({"B": 2})
    pool = Pool()
    compile_ahead.send_soon(pool, spec, launcher_of=first)
    sent = _sent(pool, 4)
    assert [name for name, _ in sent] == ["launcher_ahead"] + ["precompile"] * 3
    assert sent[0][1][1] == first
