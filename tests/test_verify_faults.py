"""Wrong kernels fail for the right reason, end to end through the worker and the fake backend.

Issue 15: a kernel that writes NaN is not "never written" (item 7); a kernel that changes an
input is named (item 6); writes past the end or before the start of a buffer land in guard
regions and are reported (item 5).
"""

from __future__ import annotations

import numpy as np

from jupyter_ktune.api import parse_cell
from jupyter_ktune.results import Status


def inputs():
    x = np.random.rand(1000) + 0.5
    return dict(x=x, y=np.empty_like(x), n=1000)


def reference(x, y, n):
    return 2 * x


NS = {"inputs": inputs, "reference": reference}
LINE = "scale --backend fake --inputs inputs --reference reference --out y --budget-ms 2"


def run(worker, body):
    s = parse_cell(LINE, body, NS)
    return worker.run(s, s.space.default())


WRITES_NAN = """def scale(x, y, n):
    y[:] = 2 * x
    y[7] = np.log(-x[7]) if x[7] < 0 else np.sqrt(-x[7])   # NaN from arithmetic
    y[9] = np.inf
"""
HALF_AND_NAN = """def scale(x, y, n):
    y[: n // 2] = 2 * x[: n // 2]
    y[3] = np.nan
"""


def test_a_kernel_that_writes_nan_is_not_called_unwritten(worker):
    r = run(worker, WRITES_NAN)
    assert r.status is Status.WRONG
    (check,) = r.verification.checks
    assert (check.unwritten, check.nonfinite, check.first_nonfinite_index) == (0, 2, (7,))
    assert "kernel wrote NaN/Inf at 2 elements (first at (7,))" in r.reason
    assert "never written" not in r.reason


def test_unwritten_and_nan_in_one_output_are_both_reported(worker):
    r = run(worker, HALF_AND_NAN)
    (check,) = r.verification.checks
    assert (check.unwritten, check.nonfinite) == (500, 1), check
    assert r.reason.startswith("y: 500 of 1,000 elements never written (first at (500,)); "
                               "y: kernel wrote NaN/Inf at 1 element (first at (3,))")


CLOBBERS = """def scale(x, y, n):
    y[:] = 2 * x
    x[:10] = 0.0   # in place: the next run sees other inputs
"""
PAST_END = """def scale(x, y, n):
    y[:] = 2 * x
    np.lib.stride_tricks.as_strided(y, (n + 24,))[n:] = 7.0   # y + n ... y + n + 23
"""
BEFORE_START = """def scale(x, y, n):
    y[:] = 2 * x
    whole = y
    while whole.base is not None:
        whole = whole.base
    at = (y.ctypes.data - whole.ctypes.data) // y.itemsize
    whole[at - 5:at] = 3.0   # y - 5 ... y - 1
"""


def test_a_kernel_that_changes_an_input_is_named(worker):
    r = run(worker, CLOBBERS)
    assert r.status is Status.WRONG
    assert r.verification.checks[0].passed  # the output itself is right
    (change,) = r.verification.changed_inputs
    assert (change.name, change.changed, change.size) == ("x", 10, 1000)
    assert r.reason.startswith("the kernel changed input `x` (10 of 1000 elements): a kernel "
                               "that writes its inputs makes timings and later runs wrong; "
                               "write to an output or list it in --out")


def test_writes_past_the_end_are_caught_in_the_guard(worker):
    r = run(worker, PAST_END)
    assert r.status is Status.WRONG and r.verification.checks[0].passed
    assert r.reason.startswith("wrote 24 elements past the end of `y` (up to 24 past it)")


def test_writes_before_the_start_are_caught_in_the_guard(worker):
    r = run(worker, BEFORE_START)
    assert r.status is Status.WRONG
    assert r.reason.startswith("wrote 5 elements before the start of `y` (up to 5 before it)")


def test_a_correct_kernel_passes_every_check(worker):
    r = run(worker, "def scale(x, y, n):\n    y[:] = 2 * x\n")
    assert r.status is Status.OK, r.reason
    v = r.verification
    assert v.passed and not v.guard_breaches and not v.changed_inputs and not v.notes
