"""A set drawn ahead reaches the worker as the segment's own pages (no copy on the first run's
path), the same values and memory order as drawn, with no name left in /dev/shm."""

from __future__ import annotations

import glob
import mmap
import os
import sys

import numpy as np
import pytest

from jupyter_ktune.runner.inputs_ahead import InputsAhead
from jupyter_ktune.runner.set_segments import segment_prefix

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/dev/shm")


@pytest.fixture(autouse=True)
def own_segment_prefix(monkeypatch):
    """Segments of these tests only: other test runs on this host clean up dead workers' too."""
    monkeypatch.setenv("KTUNE_SHM_PREFIX", f"ktune_pages_{os.getpid()}_")


def inputs():
    rng = np.random.default_rng(7)
    return dict(a=rng.standard_normal((64, 33)).astype(np.float32),
                f=np.asfortranarray(rng.standard_normal((17, 5))), empty=np.zeros(0, np.int8),
                n=np.int32(64), name="x")


def reference(a, f, empty, n, name):  # noqa: ARG001 - the cell's signature
    return a * 2


def test_a_set_drawn_ahead_is_taken_as_its_segments_pages():
    ahead = InputsAhead()
    try:
        ahead.start("io", inputs, reference, ("a",))
        drawn = ahead.take_set("io")
    finally:
        ahead.close()
    assert drawn is not None and drawn.expected is not None
    want = inputs()
    for name in ("a", "f"):
        got = drawn.args[name]
        np.testing.assert_array_equal(got, want[name])
        assert got.flags.c_contiguous == want[name].flags.c_contiguous
        assert got.flags.f_contiguous == want[name].flags.f_contiguous
        assert isinstance(got.base, mmap.mmap), f"{name} was copied out of its segment"
        got[(0,) * got.ndim] = 1.0  # the worker's own: writable
    assert drawn.args["empty"].shape == (0,) and drawn.args["n"] == 64 and drawn.args["name"] == "x"
    np.testing.assert_array_equal(drawn.expected["a"], want["a"] * 2)
    assert isinstance(drawn.expected["a"].base, mmap.mmap)
    assert not glob.glob(f"/dev/shm/{segment_prefix()}*"), "a segment's name was left"


class _Fs:
    """What os.statvfs says of a container's /dev/shm with ``free`` bytes left."""

    def __init__(self, free: int):
        self.f_frsize, self.f_bavail = 4096, free // 4096


def test_a_set_that_does_not_fit_in_dev_shm_is_left_to_the_worker(monkeypatch):
    from jupyter_ktune.runner import set_segments
    from jupyter_ktune.runner.inputs_ahead import _draw_into_shared_memory

    monkeypatch.setattr(set_segments.os, "statvfs", lambda _path: _Fs(64 << 20))
    big = lambda: dict(a=np.ones((4096, 4096), np.float32), n=4096)  # noqa: E731 - 64 MiB
    assert _draw_into_shared_memory(big, os.getpid()) is None  # written, it would be SIGBUS
    assert not glob.glob(f"/dev/shm/{segment_prefix()}*"), "a segment was written anyway"
    drawn = _draw_into_shared_memory(inputs, os.getpid())  # a small set still fits
    assert drawn is not None
    set_segments.take(drawn["args"])


def test_a_reference_that_does_not_fit_leaves_its_outputs_to_the_worker(monkeypatch):
    from jupyter_ktune.runner import set_segments
    from jupyter_ktune.runner.inputs_ahead import _draw_into_shared_memory

    room = iter([True, False])  # the set fits, its reference's outputs then do not
    monkeypatch.setattr(set_segments, "room_for", lambda _n: next(room))
    drawn = _draw_into_shared_memory(inputs, os.getpid(), reference, ("a",))
    assert drawn is not None and drawn["expected"] is None
    np.testing.assert_array_equal(set_segments.take(drawn["args"])["a"], inputs()["a"])
    assert not glob.glob(f"/dev/shm/{segment_prefix()}*")
