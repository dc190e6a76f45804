"""Issue 15 items 5 and 6 through Triton's interpreter: the Triton binding puts guards around
every array argument and binds copies, so a write past the end or before the start of `y` and an
in-place kernel that changes `x` are reported by name (before, the interpreter wrote the worker's
host arrays themselves, and writes outside `y` went unseen)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from jupyter_ktune.api import parse_cell, run_kernel
from jupyter_ktune.results import Status

pytest.importorskip("triton")
pytest.importorskip("torch")
os.environ["KTUNE_FORCE_INTERPRET"] = "1"

N = 1000  # fp32: the guard on each side is 4 KiB = 1024 elements


def inputs():
    x = np.random.rand(N).astype(np.float32) + 0.5
    return dict(x=x, y=np.empty_like(x), n=N)


def reference(x, y, n):
    return 2 * x


SCALE = """# ktune: BLOCK in [128]
# ktune: grid = cdiv(n, BLOCK)
@triton.jit
def scale(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x + offs, mask=mask)
    tl.store(y + offs, 2 * v, mask=mask)
"""
STORE = "    tl.store(y + offs, 2 * v, mask=mask)\n"
PAST_END = SCALE + "    tl.store(y + n + tl.arange(0, 32), 1.0, mask=tl.arange(0, 32) < 24)\n"
BEFORE_START = SCALE + "    tl.store(y - 600 + tl.arange(0, 8), 1.0)\n"
IN_PLACE = SCALE + "    tl.store(x + offs, v + 1, mask=mask)\n"
LINE = "scale --backend triton --inputs inputs --reference reference --out y --budget-ms 1"


def run(worker, src):
    # run_kernel asks the worker for its device first, so it picks the interpreter before
    # unpickling this module (which imports triton) with the spec
    return run_kernel(parse_cell(LINE, src, {"inputs": inputs, "reference": reference}),
                      worker=worker)


def test_writes_past_the_end_of_y_are_reported(worker):
    r = run(worker, PAST_END)
    assert r.status is Status.WRONG, r.reason
    assert r.verification.checks[0].passed  # y itself is right
    assert r.reason.startswith("wrote 24 elements past the end of `y` (up to 24 past it)")


def test_a_negative_offset_is_reported_before_the_start(worker):
    r = run(worker, BEFORE_START)
    assert r.status is Status.WRONG, r.reason
    assert r.reason.startswith("wrote 8 elements before the start of `y` (up to 600 before it)")


def test_an_in_place_kernel_is_named_and_the_host_inputs_stay_intact(worker):
    r = run(worker, IN_PLACE)
    assert r.status is Status.WRONG, r.reason
    assert r.reason.startswith("the kernel changed input `x` (1000 of 1000 elements)")


def test_a_correct_kernel_passes_with_guards_around_every_argument(worker):
    r = run(worker, SCALE)
    assert r.status is Status.OK, r.reason
    v = r.verification
    assert not v.guard_breaches and not v.changed_inputs and not v.notes, v


def test_the_bound_kernel_gets_copies_inside_guards():
    """In this process: the tensors the kernel gets are not the host arrays, and sit between
    guard regions of the pattern."""
    import torch

    from jupyter_ktune.backends.triton.launch import Guarded

    host = np.arange(10, dtype=np.float32)
    g = Guarded(host, "cpu")
    assert not np.shares_memory(g.inner.numpy(), host)
    assert torch.equal(g.inner, torch.from_numpy(host))
    assert g.breach("x") is None
    g.whole[g.before + 10 + 2] = 1.0  # two past the end
    b = g.breach("x")
    assert (b.before, b.after, b.reach_after) == (0, 1, 3)


def test_one_input_set_is_uploaded_once_and_inputs_are_compared_with_that_copy():
    """Bindings inside one input set copy from one pristine upload per host array (issue 21:
    every binding uploaded again), and the changed-input check compares against it in place,
    so it needs no read-back of the inputs."""
    import torch

    from jupyter_ktune.backends.triton.launch import Guarded
    from jupyter_ktune.backends.uploads import Uploads, for_input_set

    host = np.random.rand(64).astype(np.float32)
    with for_input_set(Uploads()) as uploads:
        first, second = Guarded(host, "cpu"), Guarded(host, "cpu")
    assert len(uploads) == 1 and first.pristine is second.pristine
    assert first.inner.data_ptr() != second.inner.data_ptr()  # each binding has its own copy
    assert first.changed() == 0
    first.inner[3:7] = torch.tensor([-0.0, 1e9, float("nan"), 5.0])
    assert first.changed() == 4 and second.changed() == 0
    assert np.array_equal(first.pristine.numpy(), host)  # the kernel's writes never reach it
    alone = Guarded(host, "cpu")
    assert alone.pristine is not first.pristine  # outside a set: an upload of its own
