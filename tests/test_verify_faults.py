"""Wrong kernels fail for the right reason, end to end through the worker and the fake backend.

Issue 15: a kernel that writes NaN is not "never written" (item 7); a kernel that changes an
input is named (item 6); writes past the end or before the start of a buffer land in guard
regions and are reported (item 5).
"""

from __future__ import annotations

import numpy as np

from jupyter_ktune.results import Status
from jupyter_ktune.spec import parse_cell


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
    assert r.reason.startswith("y: 500 of 1000 elements never written (first at (500,)); "
                               "y: kernel wrote NaN/Inf at 1 elements (first at (3,))")
