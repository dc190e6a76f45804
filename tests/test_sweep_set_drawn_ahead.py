"""A sweep starts on the input set the helper drew after the cell's run, not on a draw of its
own (issue 33): fla's matmul sweep waited 0.8-1.1 s for its own draw and NumPy reference before
its first run on an H100 host (bench/results/first_minute/2026-12-06-0613). The set must be
one drawn for this very cell, and recently; the one a run kept is never reused (issue 34).

A real worker with the fake backend; the inputs function logs the process that called it.
"""

from __future__ import annotations

import time

import numpy as np

from jupyter_ktune.api import parse_cell
from jupyter_ktune.results import Status
from jupyter_ktune.runner import input_sets

LINE = "scale --backend fake --inputs inputs --reference reference --out y --budget-ms 5"
SRC = "# ktune: BLOCK in [1, 2, 4]\ndef scale(x, y, n):\n    y[:] = 2 * x\n"


def _spec(log, n=1000):
    def inputs():
        import os
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        x = np.random.rand(n)
        return dict(x=x, y=np.empty_like(x), n=n)

    def reference(x, y, n):
        return 2 * x

    return parse_cell(LINE, SRC, {"inputs": inputs, "reference": reference})


def _callers(log, at_least, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while len(log.read_text().split()) < at_least and time.monotonic() < deadline:
        time.sleep(0.05)
    return [int(p) for p in log.read_text().split()]


def test_the_sweep_takes_the_set_drawn_after_the_run(worker, tmp_path):
    log = tmp_path / "calls"
    s = _spec(log)
    assert worker.run(s, s.space.default()).status is Status.OK
    first = _callers(log, 2)  # the run's own draw, then the helper's, drawn ahead
    assert first[0] == worker.pid and first[1] != worker.pid
    phases = worker.call(input_sets.prepare_inputs, s, timeout=60)
    assert phases["drawn ahead"] == 1.0
    after = _callers(log, 3)  # the helper starts on the next set at once
    assert after.count(worker.pid) == 1, "the sweep drew its own set in the worker"
    assert worker.run(s, s.space.config({"BLOCK": 2})).status is Status.OK  # verified on it


def test_an_old_set_or_another_cells_is_not_taken(worker, tmp_path, monkeypatch):
    log = tmp_path / "calls"
    s = _spec(log)
    assert worker.run(s, s.space.default()).status is Status.OK
    _callers(log, 2)
    other = _spec(tmp_path / "other", n=500)  # the inputs function reads another size
    assert worker.call(input_sets.prepare_inputs, other, timeout=60)["drawn ahead"] == 0.0
    log2 = tmp_path / "calls2"
    s2 = _spec(log2)
    assert worker.run(s2, s2.space.default()).status is Status.OK
    _callers(log2, 2)
    worker.call(setattr, input_sets, "AHEAD_MAX_AGE_S", 0.0, timeout=10)
    try:
        assert worker.call(input_sets.prepare_inputs, s2, timeout=60)["drawn ahead"] == 0.0
    finally:  # the worker serves the module's other tests
        worker.call(setattr, input_sets, "AHEAD_MAX_AGE_S", input_sets.AHEAD_MAX_AGE_S,
                    timeout=10)
    assert _callers(log2, 3).count(worker.pid) == 2  # drawn afresh in the worker


def test_the_timeline_says_whose_set_the_sweep_started_on(worker, tmp_path):
    from jupyter_ktune.api import run_kernel
    from jupyter_ktune.tuning.sweep import tune

    log = tmp_path / "calls"
    s = _spec(log, n=2000)
    assert run_kernel(s, worker=worker).status is Status.OK
    _callers(log, 2)
    report = tune(s, "exhaustive", store=tmp_path / "s.sqlite", workers=[worker], top_k=0)
    ready = [label for _, kind, label in report.info["timeline"] if kind == "inputs ready"]
    assert ready == ["drawn ahead"], report.info["timeline"]


def test_the_helper_starts_before_the_first_set_is_drawn(tmp_path):
    """The helper's interpreter and imports overlap the worker's own first draw, so the set it
    draws ahead (the sweep's first) is ready sooner: it is running when ``inputs()`` is called."""
    from jupyter_ktune.runner.client import DeviceWorker

    log = tmp_path / "helper"

    def inputs():
        import os

        from jupyter_ktune.runner import input_sets as sets
        proc = sets._ahead._proc  # noqa: SLF001 - the worker's helper, read from inside it
        with open(log, "a") as f:
            f.write(f"{os.getpid()}:{int(proc is not None and proc.poll() is None)}\n")
        x = np.random.rand(1000)
        return dict(x=x, y=np.empty_like(x), n=1000)

    def reference(x, y, n):
        return 2 * x

    s = parse_cell(LINE, SRC, {"inputs": inputs, "reference": reference})
    with DeviceWorker() as fresh:  # no helper yet: its first run is the first draw
        assert fresh.run(s, s.space.default()).status is Status.OK
        pid = fresh.pid
    first = log.read_text().split()[0]
    assert first == f"{pid}:1", "the helper was not running when the first set was drawn"
