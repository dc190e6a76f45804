"""The input helper starts with the worker, imports what a draw needs, and the first draw adopts
it (``runner/input_helper.py``): a CUDA C++ cell with host inputs waited for the helper's start
and imports (0.23 s on an H100 host) before its first set was drawn. Seen from outside, through
/proc: nothing is asked of the worker but a ping before the helper is looked at."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest
from test_reliability_faults import _alive  # a zombie counts as dead

from jupyter_ktune.runner.client import DeviceWorker

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _waiting_helpers() -> list[int]:
    from jupyter_ktune.runner import input_helper

    return [proc.pid for proc, _conn in input_helper._waiting]


def _first_draws_helper() -> int:
    from jupyter_ktune.runner.input_sets import _ahead

    _ahead.warm()  # what a cell's first draw does before it sends the job
    return _ahead._proc.pid


def _wait_for(predicate, timeout_s: float = 30.0) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def _maps(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return ""


def test_a_fresh_worker_starts_its_input_helper_and_the_first_draw_adopts_it():
    with DeviceWorker() as w:
        assert w.request(("ping",), timeout=60) == ("ok", "pong")
        waiting = w.call(_waiting_helpers, timeout=30)
        assert len(waiting) == 1, f"no input helper started with the worker ({waiting})"
        pid = waiting[0]
        assert "inputs_ahead" in Path(f"/proc/{pid}/cmdline").read_text()
        # it imports a draw's modules while it waits: numpy.random's extension is mapped
        assert _wait_for(lambda: "numpy/random" in _maps(pid)), "the helper imported nothing"
        time.sleep(2.0)  # started on a thread that ended since, it would have been killed
        assert _alive(pid), "the helper started ahead died before any draw"
        assert w.call(_first_draws_helper, timeout=60) == pid, "the first draw started another"
        assert w.call(_waiting_helpers, timeout=30) == []


def test_the_switch_leaves_the_helper_to_the_first_draw():
    with DeviceWorker(env={"KTUNE_HELPER_AHEAD": "0"}) as w:
        assert w.request(("ping",), timeout=60) == ("ok", "pong")
        assert w.call(_waiting_helpers, timeout=30) == []
        assert _alive(w.call(_first_draws_helper, timeout=60))


def test_a_helper_started_ahead_goes_with_a_killed_worker():
    w = DeviceWorker()
    try:
        assert w.request(("ping",), timeout=60) == ("ok", "pong")
        (pid,) = w.call(_waiting_helpers, timeout=30)
        os.kill(w.pid, signal.SIGKILL)
        assert _wait_for(lambda: not _alive(pid), 10.0), "the helper outlived its worker"
    finally:
        w.close()
