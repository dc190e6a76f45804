"""A sweep starts on the input set the helper drew after the cell's run, with the reference
the helper ran on it, where that set has the shapes of the one the inputs function returns now
(issue 33): fla's matmul sweep waited 0.8-1.1 s for its own draw and NumPy reference before its
first run on an H100 host (3f99cc8:bench/results/first_minute/2026-12-06-0613). The inputs
function is still called at the sweep's start (a size read from a file must be seen, issue 34),
the set must be one drawn for this very cell, and recently; the one a run kept is never reused.

A real worker with the fake backend; the inputs function and the reference log the process
that called them.
"""

from __future__ import annotations

import time

import numpy as np

from jupyter_ktune.api import parse_cell
from jupyter_ktune.problem_key import inputs_signature
from jupyter_ktune.results import Status
from jupyter_ktune.runner import input_sets

LINE = "scale --backend fake --inputs inputs --reference reference --out y --budget-ms 5"
SRC = "# ktune: BLOCK in [1, 2, 4]\ndef scale(x, y, n):\n    y[:] = 2 * x\n"


def logging_functions(log, n=1000, size_file=None):
    """An inputs function and a reference that log the process calling them (``log`` and
    ``log.ref``); the size is ``n``, or read from ``size_file``."""
    def inputs():
        import os
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        m = int(open(size_file).read()) if size_file else n
        x = np.random.rand(m)
        return dict(x=x, y=np.empty_like(x), n=m)

    def reference(x, y, n):
        import os
        with open(f"{log}.ref", "a") as f:
            f.write(f"{os.getpid()}\n")
        return 2 * x

    return {"inputs": inputs, "reference": reference}


def _spec(log, n=1000, size_file=None):
    return parse_cell(LINE, SRC, logging_functions(log, n, size_file))


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
    refs = _callers(tmp_path / "calls.ref", 2)  # the run's reference, then the helper's
    phases = worker.call(input_sets.prepare_inputs, s, timeout=60)
    assert phases["drawn ahead"] == 1.0
    assert _callers(log, 3).count(worker.pid) == 2  # the inputs function, called now too
    time.sleep(0.5)
    refs = [int(p) for p in (tmp_path / "calls.ref").read_text().split()]
    assert refs.count(worker.pid) == 1, "the sweep ran the reference again in the worker"
    assert worker.run(s, s.space.config({"BLOCK": 2})).status is Status.OK  # verified on it


def test_a_set_with_an_absent_optional_argument_is_drawn_ahead_too(worker, tmp_path):
    """fla's matmul takes ``input=None, alpha=None`` and a string flag: a set holding None was
    never drawn ahead, so its sweep waited for the worker's own draw and reference (1.1-1.3 s
    before the first result on an H100 host, bench/results/first_minute/2026-12-06-0903)."""
    log = tmp_path / "calls"

    def inputs():
        import os
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        x = np.random.rand(1000)
        return dict(x=x, y=np.empty_like(x), n=1000, bias=None, act="")

    def reference(x, y, n, bias, act):
        return 2 * x

    src = "# ktune: BLOCK in [1, 2, 4]\ndef scale(x, y, n, bias, act):\n    y[:] = 2 * x\n"
    s = parse_cell(LINE, src, {"inputs": inputs, "reference": reference})
    assert worker.run(s, s.space.default()).status is Status.OK
    callers = _callers(log, 2, timeout_s=10.0)
    assert len(callers) == 2 and callers[1] != worker.pid, "the helper drew no next set"
    assert worker.call(input_sets.prepare_inputs, s, timeout=60)["drawn ahead"] == 1.0


def test_a_size_changed_since_is_drawn_now(worker, tmp_path):
    """The inputs function reads its size from a file: changed after the run, the sweep's set
    is the new size, not the one the helper drew before (issue 34)."""
    size = tmp_path / "n.txt"
    size.write_text("256")
    log = tmp_path / "calls"
    s = _spec(log, size_file=str(size))
    assert worker.run(s, s.space.default()).status is Status.OK
    _callers(log, 2)
    size.write_text("4096")
    phases = worker.call(input_sets.prepare_inputs, s, timeout=60)
    assert phases["drawn ahead"] == 0.0
    x = np.zeros(4096)
    want = inputs_signature(dict(x=x, y=x, n=4096))
    assert worker.call(input_sets.seen_inputs, s, timeout=30) == want


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
    assert _callers(log2, 3).count(worker.pid) == 2  # drawn in the worker, as always


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
