"""Issue 15 item 8: inputs, reference, compile and run are separate phases, each with its own
limit (--timeout seconds from the moment it starts), and a timeout names the phase that ran out
of time and what to do, instead of "no answer within 60 s" for all of them."""

from __future__ import annotations

import time

import numpy as np

from jupyter_ktune.api import parse_cell
from jupyter_ktune.results import Status
from jupyter_ktune.runner.phases import Phase

SCALE = "def scale(x, y, n):\n    y[:] = 2 * x\n"
HANG = "def scale(x, y, n):\n    while True:\n        pass\n"
LIMIT = 1.5


def fast_inputs():
    x = np.random.rand(4, 64, 8).astype(np.float32) + 0.5
    return dict(x=x, y=np.empty_like(x), n=x.size)


def slow_inputs():
    time.sleep(30)
    return fast_inputs()


def inputs_under_the_limit():
    time.sleep(0.9)
    return fast_inputs()


def reference(x, y, n):
    return 2 * x


def slow_reference(x, y, n):
    time.sleep(30)
    return 2 * x


def reference_under_the_limit(x, y, n):
    time.sleep(0.9)
    return 2 * x


def run(worker, body, inputs, ref):
    line = (f"scale --backend fake --inputs inputs --reference reference --out y --budget-ms 2 "
            f"--timeout {LIMIT}")
    s = parse_cell(line, body, {"inputs": inputs, "reference": ref})
    t0 = time.perf_counter()
    r = worker.run(s, s.space.default())
    return r, time.perf_counter() - t0


def test_a_slow_reference_is_named_with_what_to_do(worker):
    r, took = run(worker, SCALE, fast_inputs, slow_reference)
    assert r.status is Status.TIMEOUT
    assert r.reason.startswith(
        "[ktune] the reference took more than 1.5 s (slow_reference on NumPy arrays, the "
        "largest (4, 64, 8) float32): compute it on the device (CuPy/JAX/torch), use smaller "
        "inputs, or raise --timeout"), r.reason
    assert r.reason.endswith("the worker was killed and restarted")
    assert took < 10


def test_slow_inputs_are_named(worker):
    r, _ = run(worker, SCALE, slow_inputs, reference)
    assert r.status is Status.TIMEOUT
    assert r.reason.startswith("[ktune] the inputs function took more than 1.5 s "
                               "(slow_inputs()): make smaller inputs"), r.reason


def test_a_hanging_kernel_is_named_as_the_run(worker):
    r, _ = run(worker, HANG, fast_inputs, reference)
    assert r.status is Status.TIMEOUT
    assert r.reason.startswith("[ktune] the kernel run took more than 1.5 s (the verification "
                               "run): the kernel may never finish"), r.reason


def test_each_phase_has_its_own_limit(worker):
    """0.9 s of inputs plus 0.9 s of reference: over 1.5 s in all, under it for each phase."""
    r, took = run(worker, SCALE, inputs_under_the_limit, reference_under_the_limit)
    assert r.status is Status.OK, r.reason
    assert took > LIMIT


def test_phase_messages_are_progress_not_replies(worker):
    stale = worker.stale_replies
    r, _ = run(worker, SCALE, fast_inputs, reference)
    assert r.status is Status.OK and r.verification.passed, r
    assert worker.stale_replies == stale


def test_an_overdue_phase_without_detail_reads_cleanly():
    p = Phase("compile", "compiling the variant", "", "raise --timeout")
    assert p.overdue(60) == "compiling the variant took more than 60 s: raise --timeout"
