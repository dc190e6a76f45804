"""A cell's first input set is drawn, and its reference run, in the input helper while a cold
worker opens the device (issue 33): fla's 4096^2 matmul waited 1.0-1.4 s for them after
torch's import in a fresh notebook (bench/results/first_minute/2026-12-06-0903).

A real worker with the fake backend; the inputs function and the reference log the process
that called them.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from test_sweep_set_drawn_ahead import logging_functions

from jupyter_ktune.api import parse_cell
from jupyter_ktune.problem_key import inputs_signature
from jupyter_ktune.results import Status
from jupyter_ktune.runner import input_sets
from jupyter_ktune.runner.client import DeviceWorker
from jupyter_ktune.runner.first_set import send_first_set
from jupyter_ktune.spec import line_functions

LINE = "scale --backend fake --inputs inputs --reference reference --out y --budget-ms 5"
SRC = "# ktune: BLOCK in [1, 2, 4]\ndef scale(x, y, n):\n    y[:] = 2 * x\n"


def _namespace(log, n=1000):
    return logging_functions(log, n)


def _pids(path, at_least=1, timeout_s=20.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().split()) >= at_least:
            break
        time.sleep(0.05)
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def test_a_cold_workers_first_run_takes_the_set_drawn_at_the_cells_start(tmp_path):
    log = tmp_path / "calls"
    ns = _namespace(log)
    with DeviceWorker() as w:
        assert send_first_set(w, "fake", LINE, ns)
        _pids(tmp_path / "calls.ref")  # the helper has drawn it and run the reference
        w.device("fake")
        spec = parse_cell(LINE, SRC, ns)
        result = w.run(spec, spec.space.default())
        assert result.status is Status.OK, result.reason
        calls, refs = _pids(log, 2), _pids(tmp_path / "calls.ref", 2)
        assert w.pid not in calls, "the worker drew the first set itself"
        assert w.pid not in refs, "the worker ran the reference on the first set itself"


def test_a_warm_worker_draws_its_own_set(tmp_path):
    log = tmp_path / "calls"
    ns = _namespace(log)
    with DeviceWorker() as w:
        w.device("fake")  # opened: a helper that still has to start would be later
        assert not send_first_set(w, "fake", LINE, ns)
        spec = parse_cell(LINE, SRC, ns)
        assert w.run(spec, spec.space.default()).status is Status.OK
        assert _pids(log)[0] == w.pid


def test_the_set_is_taken_only_by_the_functions_that_drew_it(tmp_path):
    """Another cell's functions (here: the same code over another size) draw their own set:
    the set drawn for the first is never checked against the second's sizes."""
    log = tmp_path / "calls"
    with DeviceWorker() as w:
        assert send_first_set(w, "fake", LINE, _namespace(log, n=500))
        _pids(tmp_path / "calls.ref")
        w.device("fake")
        spec = parse_cell(LINE, SRC, _namespace(log, n=2000))
        result = w.run(spec, spec.space.default())
        assert result.status is Status.OK, result.reason
        assert _pids(log, 2)[1] == w.pid  # drawn in the worker, at the second cell's size
        x = np.zeros(2000)
        assert w.call(input_sets.seen_inputs, spec, timeout=30) == inputs_signature(
            dict(x=x, y=x, n=2000))


def test_the_line_is_read_without_the_parses_checks():
    ns = _namespace("/dev/null")
    inputs, reference, outputs = line_functions(LINE, ns)
    assert inputs is ns["inputs"] and reference is ns["reference"] and outputs == ("y",)
    assert line_functions(LINE + " --no-verify", ns)[1] is None
    assert line_functions("scale --backend fake --inputs missing", ns) is None
    assert line_functions("scale --bogus-flag", ns) is None
    assert line_functions('scale --inputs "inputs', ns) is None  # unbalanced quote


def test_the_cells_start_sends_it(tmp_path, monkeypatch):
    """``%%kernel``'s start (``magics.warm_worker``) hands the first set to a fresh worker."""
    from jupyter_ktune import magics
    from jupyter_ktune.runner import client

    log = tmp_path / "calls"
    with DeviceWorker() as w:
        monkeypatch.setattr(client, "_default", w)
        thread = magics.warm_worker(LINE, SRC, _namespace(log))
        assert thread is not None
        thread.join(60)
        calls = _pids(log)
        assert calls and calls[0] != w.pid, "no set was drawn beside the device's opening"


VADD = """# ktune: BLOCK in [64, 128]; num_warps in [4]
# ktune: grid = cdiv(n, BLOCK)
@triton.jit
def vadd(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)
"""


def test_a_triton_cells_build_reads_its_types_from_the_set_drawn_at_the_start(tmp_path,
                                                                             monkeypatch):
    """The build beside the first run (its sm_90 static report) reads the argument types from
    an input set: from the helper's, not from a draw of its own (fla's first compile took 1.0 s
    instead of 0.2 s with that draw on an H100 host,
    3f99cc8:bench/results/first_minute_ab/2026-12-06-0928)."""
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    monkeypatch.setenv("KTUNE_FORCE_INTERPRET", "1")
    log = tmp_path / "calls"

    def inputs():
        import os
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        x = np.random.rand(1000).astype(np.float32)
        return dict(x=x, y=np.random.rand(1000).astype(np.float32), out=np.empty_like(x),
                    n=1000)

    def reference(x, y, out, n):
        return x + y

    ns = {"inputs": inputs, "reference": reference}
    line = "vadd --backend triton --inputs inputs --reference reference --out out --budget-ms 5"
    with DeviceWorker() as w:
        assert send_first_set(w, "triton", line, ns)
        _pids(log)
        w.device("triton")
        spec = parse_cell(line, VADD, ns)
        result = w.run(spec, spec.space.default(), timeout=300)
        assert result.status is Status.OK, result.reason
        assert result.static is not None, "no static report: its build did not run"
        assert w.pid not in _pids(log, 2), "the worker drew a set of its own"


def test_a_panel_has_its_first_config_built_while_it_is_made(tmp_path, monkeypatch):
    """``panel_for`` tells the worker which config the panel runs first before it makes the
    widgets and figures (0.36-0.40 s), and with it the set drawn at the cell's start."""
    from jupyter_ktune.runner import client
    from jupyter_ktune.ui.start import panel_for

    log = tmp_path / "calls"
    ns = _namespace(log)
    with DeviceWorker() as w:
        monkeypatch.setattr(client, "_default", w)
        sent: list[tuple] = []
        real = w.request

        def recording(message, timeout):
            sent.append(message)
            return real(message, timeout)

        monkeypatch.setattr(w, "request", recording)
        assert send_first_set(w, "fake", LINE, ns)
        _pids(tmp_path / "calls.ref")
        panel = panel_for(parse_cell(LINE, SRC, ns), replaces="first-set-test")
        try:
            kinds = [m[0] for m in sent]
            assert "before_first_run" in kinds, kinds
            ahead = sent[kinds.index("before_first_run")]
            assert kinds.index("before_first_run") < kinds.index("run"), kinds
            assert ahead[2] == panel.result.config and ahead[3] is not None
            assert w.pid not in _pids(log, 2)
        finally:
            panel.session.close()


def test_the_build_ahead_starts_on_a_gpu_only(monkeypatch):
    from jupyter_ktune.backends import get_backend
    from jupyter_ktune.backends.base import DeviceInfo
    from jupyter_ktune.runner import static_reports

    spec = parse_cell(LINE, SRC, _namespace("/dev/null"))
    config = spec.space.default()
    key = (spec.source_hash, spec.options.arch, config)
    backend = get_backend("fake")
    monkeypatch.delitem(static_reports._reports, key, raising=False)  # noqa: SLF001
    assert not static_reports.build_ahead(spec, config)  # host time: the run needs no report
    assert key not in static_reports._reports  # noqa: SLF001
    gpu = DeviceInfo(True, "GPU", compute_capability="9.0")
    monkeypatch.setattr(backend, "device", lambda: gpu)
    assert static_reports.build_ahead(spec, config)
    assert key in static_reports._reports  # noqa: SLF001
    static_reports._reports.pop(key).result(timeout=30)  # noqa: SLF001


def test_a_first_set_drawn_long_ago_is_not_taken(tmp_path):
    """A cell whose start drew a set and that never ran (its parse failed): a later run of
    the same functions draws afresh once that set is older than ``AHEAD_MAX_AGE_S`` (a size
    read from a file may have changed since)."""
    log = tmp_path / "calls"
    ns = _namespace(log)
    with DeviceWorker() as w:
        assert send_first_set(w, "fake", LINE, ns)
        _pids(tmp_path / "calls.ref")
        w.call(setattr, input_sets, "AHEAD_MAX_AGE_S", 0.0, timeout=10)
        w.device("fake")
        spec = parse_cell(LINE, SRC, ns)
        assert w.run(spec, spec.space.default()).status is Status.OK
        assert _pids(log, 2)[1] == w.pid


def test_functions_over_a_large_array_are_not_sent(tmp_path, monkeypatch):
    from jupyter_ktune.runner import first_set

    monkeypatch.setattr(first_set, "MAX_JOB_BYTES", 1000)
    big = np.random.rand(1000)

    def inputs():
        return dict(x=big, y=np.empty_like(big), n=1000)

    with DeviceWorker() as w:
        assert not send_first_set(w, "fake", LINE, {"inputs": inputs, "reference": None})


def test_a_cuda_cell_sends_its_set_ahead_too(tmp_path):
    """A cold CUDA worker's first set is the helper's as well: drawn in the worker instead,
    beside CuPy's opening, Kernel Tuner's vector add's set took 1,013 ms against 662 ms from
    the helper on an H100 (a40d9b1:bench/results/first_minute_ab/2026-12-07-0731)."""

    class Worker:
        pid, asked = 1, []

        def request(self, msg, timeout):  # noqa: ANN001, ANN201 - the client's surface
            self.asked.append(msg[0])
            return "ok", True

    ns = _namespace(tmp_path / "calls")
    cuda_line = LINE.replace("--backend fake", "--backend cuda")
    assert send_first_set(Worker(), "cuda", cuda_line, ns) and Worker.asked == ["first_set"]


def _slow_functions(log, draw_s=1.5):
    """:func:`logging_functions` whose draw takes ``draw_s``: the helper is still drawing
    when the cold worker's first run asks for the set."""
    def inputs():
        import os
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(draw_s)
        x = np.random.rand(1000)
        return dict(x=x, y=np.empty_like(x), n=1000)

    def reference(x, y, n):
        return 2 * x

    return {"inputs": inputs, "reference": reference}


@pytest.mark.parametrize("waits", [True, False])
def test_the_first_run_waits_for_the_set_the_helper_is_drawing(tmp_path, monkeypatch, waits):
    """Not back yet, the helper's set is still the first run's: the helper began first, and a
    second draw in the worker beside it doubled the CPU work (Kernel Tuner's vector add: 0.66-
    0.79 s in each of two processes, 0.37 s alone). ``KTUNE_FIRST_SET_WAIT=0`` draws it in
    the worker, as before, to compare."""
    monkeypatch.setenv(input_sets.FIRST_SET_WAIT_ENV, "1" if waits else "0")
    log = tmp_path / "calls"
    ns = _slow_functions(log)
    with DeviceWorker() as w:
        assert send_first_set(w, "fake", LINE, ns)
        helper = _pids(log)[0]  # the helper has begun the draw
        w.device("fake")
        spec = parse_cell(LINE, SRC, ns)
        result = w.run(spec, spec.space.default())
        assert result.status is Status.OK, result.reason
        calls = _pids(log)
        assert calls[0] == helper != w.pid
        if waits:
            assert w.pid not in calls, "the first run drew a second set beside the helper's"
        else:
            assert w.pid in calls


def test_an_inputs_function_that_fails_in_the_helper_fails_the_run_in_one_line(tmp_path):
    """The first run waits for the helper's set; when the inputs function raised there, the
    run draws in place and reports the error as any run does: one line naming the function,
    no traceback, no hang."""
    log = tmp_path / "calls"

    def inputs():
        import os
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(0.5)  # still drawing when the run asks
        raise ValueError("size must be positive")

    def reference(x, y, n):
        return 2 * x

    ns = {"inputs": inputs, "reference": reference}
    with DeviceWorker() as w:
        assert send_first_set(w, "fake", LINE, ns)
        w.device("fake")
        spec = parse_cell(LINE, SRC, ns)
        result = w.run(spec, spec.space.default())
        assert result.status is not Status.OK
        assert "inputs() raised ValueError: size must be positive" in result.reason
        assert "Traceback" not in result.reason
        assert w.pid in _pids(log, 2)  # drawn in place once the helper's draw had failed
