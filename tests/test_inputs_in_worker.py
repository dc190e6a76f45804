"""``inputs()`` runs in the worker or its input helper, never in the notebook (issue 34, item 6).

A ``require`` line that names an input (``require BLOCK * 4 >= n``) needs the inputs' values; they
were read by calling the inputs function in the notebook process (``api.run_kernel``,
``ui/start.py``, the sweep), so an inputs function that allocates on the GPU would open a device
context there. The worker now reads them (``DeviceWorker.limits``). The inputs function below
records the pid of every process that calls it; the test process must never be one of them.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import jupyter_ktune
from jupyter_ktune.api import parse_cell, run_kernel
from jupyter_ktune.errors import CellError
from jupyter_ktune.results import Status
from jupyter_ktune.session import TuningSession
from jupyter_ktune.tuning import tune

SRC = """# ktune: BLOCK in [1, 2, 4, 8]
# ktune: require BLOCK * 4 >= n
def scale(x, y, n):
    y[:] = 2 * x
"""
LINE = "scale --backend fake --inputs inputs --reference reference --out y --budget-ms 1"


def _recording_inputs(log: Path):
    def inputs():
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        x = np.random.rand(16)
        return dict(x=x, y=np.empty_like(x), n=16)

    return inputs


def reference(x, y, n):
    return 2 * x


@pytest.fixture
def recorded(tmp_path):
    """A spec whose inputs function writes its caller's pid to a file; the file's pids."""
    log = tmp_path / "pids"
    spec = parse_cell(LINE, SRC, {"inputs": _recording_inputs(log), "reference": reference})
    return spec, lambda: {int(p) for p in log.read_text().split()} if log.exists() else set()


def test_run_kernel_reads_the_inputs_values_in_the_worker(recorded, worker):
    spec, pids = recorded
    r = run_kernel(spec, worker=worker)  # no config given: the first one the require allows
    assert r.status is Status.OK, r.reason
    assert r.config == {"BLOCK": 4}
    assert pids() and os.getpid() not in pids()


def test_a_sweep_and_a_session_read_them_in_the_worker_too(recorded, worker, tmp_path):
    spec, pids = recorded
    report = tune(spec, "exhaustive", store=tmp_path / "s.sqlite", workers=[worker], top_k=0)
    assert {e.result.config["BLOCK"] for e in report.evaluations} == {4, 8}
    session = TuningSession(spec, worker, worker.limits(spec), prefetch=False)
    try:
        session.request({"BLOCK": 1})  # forbidden by the require line: the worker says so
        assert session.wait_idle()
        assert session.history[-1].result.status is Status.NOT_ALLOWED
        assert "BLOCK * 4 >= n" in session.history[-1].result.reason
    finally:
        session.close()
    assert os.getpid() not in pids()


def test_a_panel_reads_them_in_the_worker(recorded):
    spec, pids = recorded
    panel = jupyter_ktune.panel(spec)
    try:
        assert panel.result.config == {"BLOCK": 4}
        assert panel.controls._violations({"BLOCK": 2})  # noqa: SLF001 - greyed out, as before
    finally:
        panel.session.close()
    assert pids() and os.getpid() not in pids()


def test_an_inputs_function_that_fails_is_one_line_naming_it(worker):
    def inputs():
        raise ValueError("no such file: data.npy")

    spec = parse_cell(LINE, SRC, {"inputs": inputs, "reference": reference})
    with pytest.raises(CellError) as err:
        run_kernel(spec, worker=worker)
    assert str(err.value) == ("[ktune] cell line 1: the inputs function inputs failed: "
                              "ValueError: no such file: data.npy.")
