"""bench/fault_confusion.py classifies a result from its status and reason as a user reads them:
the confusion matrix of bench/fault_injection.py is only as good as this."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from fault_confusion import Confusion, classify, merge  # noqa: E402

CASES = [
    ("ok", "correct (max abs err 0)", "correct"),
    ("worker crashed", "[ktune] the worker died (killed by SIGABRT) and was restarted", "crash"),
    ("timed out", "[ktune] the kernel run took more than 1 s (the verification run): ...",
     "kernel hang"),
    ("timed out", "[ktune] the reference took more than 2 s (slow_reference on ...)",
     "slow reference"),
    ("timed out", "[ktune] the inputs function took more than 2 s (make())", "slow inputs"),
    ("timed out", "[ktune] no answer within 60 s; the worker was killed and restarted",
     "timeout, phase unnamed"),
    ("runtime error", "[ktune] CUDARuntimeError: illegal address. The device context was lost; "
     "the worker restarted.", "device lost"),
    ("runtime error", "[ktune] MemoryError: Unable to allocate 4.00 EiB", "out of memory"),
    ("wrong result", "wrote 24 elements past the end of `y` (up to 24 past it); y: 0 of ...",
     "wrote past the end"),
    ("wrong result", "wrote 8 elements before the start of `y` (up to 300 before it)",
     "wrote before the start"),
    ("wrong result", "the kernel changed input `x` (10 of 64 elements): ...", "changed an input"),
    ("wrong result", "y: kernel wrote NaN/Inf at 1 element (first at (3,))", "wrote NaN/Inf"),
    ("wrong result", "y: 500 of 1000 elements never written (first at (500,))", "never written"),
    ("wrong result", "y: 64 of 64 elements differ", "wrong output"),
    ("cannot run here", "no GPU", "other"),
]


@pytest.mark.parametrize(("status", "reason", "given"), CASES)
def test_classify(status, reason, given):
    assert classify(status, reason) == given


def test_the_matrix_counts_what_lands_off_the_expected_column():
    a, b = Confusion(), Confusion()
    a.add_result("hang", "kernel hang", "timed out", "[ktune] the kernel run took more than 1 s")
    b.add_result("hang", "kernel hang", "timed out", "[ktune] no answer within 1 s")
    b.add_result("healthy", "correct", "ok", "correct")
    m = merge([a, b])
    assert (m.total, m.right) == (3, 2)
    (off,) = m.misclassified()
    assert off["given"] == "timeout, phase unnamed" and off["count"] == 1
    assert "hang" in m.table() and m.sparse().splitlines()[1].endswith("NO")
    assert m.table().endswith("2 of 3 variants classified as what was planted")
