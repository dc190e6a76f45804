"""The notebook never waits for a compile-pool process to start (issue 33).

A submit to a pool with no idle process starts one, and a process forked from the fork server
waits until that server has imported its preload (torch, for a cell that imports it). A fresh
notebook's first Triton cell started its pool at parse, before asking the worker for the cell's
module, and waited there for the server. The pools below stand in for that server: their
``submit`` blocks until released."""

from __future__ import annotations

import threading
import time
from concurrent.futures import CancelledError, Future

import pytest
from ktune_fake_backend import copy_cell_spec

from jupyter_ktune.tuning import pool_warm
from jupyter_ktune.tuning.pool import submit_soon
from jupyter_ktune.tuning.runners import preload_pool


class ServerStillImporting:
    """A pool whose ``submit`` waits for ``ready`` (the fork server's preload), then records
    the task and answers it at once."""

    _max_workers = 2

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.sent: list[tuple] = []

    def submit(self, fn, *args) -> Future:
        self.ready.wait(30)
        if fn is None:
            raise RuntimeError("cannot schedule new futures after shutdown")
        self.sent.append((getattr(fn, "__name__", fn), *args[:1]))
        done: Future = Future()
        done.set_result(f"{len(self.sent)}")
        return done


def test_the_pools_warm_up_returns_while_its_processes_wait_for_the_fork_server():
    pool, spec = ServerStillImporting(), copy_cell_spec(4111)
    threading.Timer(1.5, pool.ready.set).start()
    t0 = time.perf_counter()
    preloads = preload_pool(pool, spec, 2)  # as the parse does, beside the worker's import
    hints = pool_warm.hints_for(pool, spec)  # as the panel does before the first run
    asked_s = time.perf_counter() - t0
    assert asked_s < 0.5, f"the notebook waited {asked_s:.2f} s for the pool's processes"
    assert [f.result(timeout=10) for f in preloads] == ["1", "2", "3", "4"]  # in order
    assert hints.result(timeout=10) == "5"
    assert [name for name, *_ in pool.sent] == ["preload"] * 4 + ["pool_hints"]


def test_a_task_cancelled_before_its_submit_is_never_sent_and_a_failed_submit_says_why():
    pool = ServerStillImporting()
    first = submit_soon(pool, len, "a")
    skipped = submit_soon(pool, len, "b")
    broken = submit_soon(pool, None, "c")  # the pool was shut down meanwhile
    assert skipped.cancel()
    pool.ready.set()
    assert first.result(timeout=10) == "1"
    with pytest.raises(RuntimeError, match="after shutdown"):
        broken.result(timeout=10)
    with pytest.raises(CancelledError):
        skipped.result(timeout=1)
    assert pool.sent == [("len", "a")]


def test_a_pool_that_answers_a_submit_without_a_future_does_not_stop_the_next_submits():
    """The thread goes on: the task's future carries the error, and later tasks are sent."""
    sent: list = []
    pool = type("Odd", (), {"submit": lambda self, fn, *a: sent.append(fn)})()
    odd = submit_soon(pool, len, "a")
    with pytest.raises(AttributeError):
        odd.result(timeout=10)
    again = submit_soon(pool, len, "b")
    with pytest.raises(AttributeError):
        again.result(timeout=10)
    assert sent == [len, len]
