"""Guard regions and changed inputs (jupyter_ktune.measure.integrity) on NumPy views into larger
guarded buffers, and the input check against a bound that can or cannot read its inputs back.
"""

from __future__ import annotations

import numpy as np
import pytest

from jupyter_ktune.measure.integrity import (
    ALIGN,
    GUARD_BYTE,
    changed_inputs,
    count_changed,
    fill_guard,
    guard_bits,
    guard_breach,
    guard_breach_of,
    guard_layout,
    guarded_empty,
    input_names,
)
from jupyter_ktune.results import GuardBreach, InputChange, Verification


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "S12", "complex128"])
def test_guard_layout_keeps_the_inner_view_aligned_and_at_least_4_kib(dtype):
    item = np.dtype(dtype).itemsize
    before, after = guard_layout(dtype, 10)
    assert before * item >= 4096 and after * item >= 4096
    assert (before * item) % ALIGN == 0


def test_guards_grow_with_the_buffer_up_to_16_mib():
    assert guard_layout(np.float32, 16 << 20) == (1 << 20, 1 << 20)  # 64 MiB: 4 MiB each side
    before, after = guard_layout(np.float32, 1 << 30)
    assert before * 4 == 16 << 20 and after * 4 == 16 << 20


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "uint8"])
def test_guard_bits_fill_the_same_bytes_as_the_host_fill(dtype):
    host = np.zeros(3, dtype)
    fill_guard(host)
    size, value = guard_bits(dtype)
    expected = bytes([GUARD_BYTE]) * 3 * size
    assert np.full(3, value, f"i{size}").tobytes() == host.tobytes() == expected


def test_a_guarded_buffer_is_intact_after_writes_inside_it():
    whole, inner = guarded_empty((8, 16), np.float32)
    assert inner.shape == (8, 16) and inner.base is not None and np.shares_memory(whole, inner)
    assert inner.ctypes.data % ALIGN == whole.ctypes.data % ALIGN
    inner[...] = np.nan
    inner[-1, -1] = 1.0
    assert guard_breach_of("y", whole, inner.size) is None


def test_writes_past_the_end_and_before_the_start_are_counted_with_their_reach():
    whole, inner = guarded_empty(100, np.float32)
    before, _ = guard_layout(np.float32, 100)
    np.lib.stride_tricks.as_strided(inner, (124,))[100:] = 1.0  # 24 past the end
    whole[before + 100 + 40] = 2.0  # one more, 41 past the end
    b = guard_breach_of("y", whole, 100)
    assert b == GuardBreach("y", before=0, after=25, reach_before=0, reach_after=41)
    assert b.message == "wrote 25 elements past the end of `y` (up to 41 past it)"
    whole[before - 3:before] = 0.0
    whole[before - 10] = 0.0
    b = guard_breach_of("y", whole, 100)
    assert (b.before, b.reach_before) == (4, 10)
    assert b.message.endswith("; wrote 4 elements before the start of `y` (up to 10 before it)")


def test_a_write_of_one_byte_into_a_wide_element_counts_that_element():
    before = np.zeros(4, np.float64)
    after = np.zeros(4, np.float64)
    fill_guard(before)
    fill_guard(after)
    after.view(np.uint8)[9] = 0  # second element, one byte
    assert guard_breach("z", before, after) == GuardBreach("z", 0, 1, 0, 2)


def test_count_changed_compares_bits():
    a = np.array([1.0, np.nan, 0.0, 3.0], np.float32)
    assert count_changed(a, a.copy()) == 0  # NaN for NaN is no change
    b = a.copy()
    b[2] = -0.0
    b[3] = 4.0
    assert count_changed(a, b) == 2
    assert count_changed(a, a[:3].copy()) == 4


class ReadsBack:
    def __init__(self, device_args):
        self.device_args = device_args

    def read_inputs(self, names):
        return {n: self.device_args[n].copy() for n in names}


def test_changed_inputs_names_each_changed_input_and_skips_outputs_and_scalars():
    host = {"x": np.arange(10.0), "w": np.ones(3), "y": np.zeros(10), "n": 10}
    dev = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in host.items()}
    assert input_names(host, ["y"]) == ["x", "w"]
    assert changed_inputs(ReadsBack(dev), host, ["y"]) == ((), ())
    dev["x"][2:5] = -1
    dev["y"][:] = 7  # an output: may change
    changes, notes = changed_inputs(ReadsBack(dev), host, ["y"])
    assert changes == (InputChange("x", 3, 10),) and notes == ()
    v = Verification(checks=(), changed_inputs=changes)
    assert not v.passed and v.summary().startswith("the kernel changed input `x` (3 of 10 ")


class ReadsBackKernelArgs(ReadsBack):
    """A backend binds only the kernel's parameters (Triton, CUDA): others are left out."""

    def read_inputs(self, names):
        return {n: self.device_args[n].copy() for n in names if n in self.device_args}


def test_changed_inputs_skips_arrays_the_kernel_does_not_take():
    host = {"x": np.arange(10.0), "scale_ref": np.ones(3), "y": np.zeros(10)}
    dev = {"x": host["x"].copy(), "y": host["y"].copy()}  # scale_ref: for the reference only
    dev["x"][0] = 5.0
    changes, notes = changed_inputs(ReadsBackKernelArgs(dev), host, ["y"])
    assert changes == (InputChange("x", 1, 10),) and notes == ()


def test_changed_inputs_says_when_it_cannot_check():
    host = {"x": np.arange(4.0), "y": np.zeros(4)}
    changes, notes = changed_inputs(object(), host, ["y"])
    assert changes == () and "cannot read them back" in notes[0]
    changes, notes = changed_inputs(ReadsBackAliased(host), host, ["y"])
    assert changes == () and "bound the host array itself" in notes[0]


class ReadsBackAliased:
    def __init__(self, host):
        self.host = host

    def read_inputs(self, names):
        return {n: self.host[n] for n in names}


def test_changed_inputs_reads_torch_tensors_bf16_included():
    torch = pytest.importorskip("torch")
    x = torch.arange(6, dtype=torch.bfloat16)
    host = {"x": x, "y": np.zeros(6)}
    dev = x.clone()
    dev[0] = 5

    class Bound:
        def read_inputs(self, names):
            return {"x": dev}

    (change,), _ = changed_inputs(Bound(), host, ["y"])
    assert (change.name, change.changed) == ("x", 1)
