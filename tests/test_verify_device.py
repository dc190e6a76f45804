"""The in-place compare (torch tensors, jupyter_ktune.measure.verify_device) against the host one.

Both must give the same OutputCheck for the same data: pass/fail, mismatch and unwritten counts,
the first bad index, max abs / rel and relative L2 errors. The tensors here are on the CPU; on a
GPU the same torch operations run on the device.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from jupyter_ktune.measure.verify import compare, poison, poison_bits, tolerance_for
from jupyter_ktune.measure.verify_device import DeviceReference, compare_tensor, device_comparable

torch = pytest.importorskip("torch")
ml_dtypes = pytest.importorskip("ml_dtypes")


def tensor(a: np.ndarray):
    """A host array as a torch tensor the way the Triton backend makes one (bf16/fp8 too)."""
    from jupyter_ktune.backends.triton.launch import to_torch

    return to_torch(a, "cpu")


def same_check(host, dev) -> None:
    for f in ("passed", "mismatched", "unwritten", "size", "first_bad_index", "note", "nonfinite",
              "first_unwritten_index", "first_nonfinite_index", "rule", "bound"):
        assert getattr(host, f) == getattr(dev, f), (f, getattr(host, f), getattr(dev, f))
    for f in ("max_abs_err", "max_rel_err", "rel_l2_err"):
        a, b = getattr(host, f), getattr(dev, f)
        assert a == b or (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-5), \
            (f, a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, "bfloat16"])
def test_device_compare_matches_the_host_compare(dtype):
    dt = np.dtype(getattr(ml_dtypes, dtype) if isinstance(dtype, str) else dtype)
    rng = np.random.default_rng(7)
    for trial in range(60):
        shape = tuple(int(v) for v in rng.integers(1, 40, size=rng.integers(1, 3)))
        ref = rng.standard_normal(shape).astype(np.float32)
        out = (ref + rng.standard_normal(shape) * rng.choice([0, 1e-6, 1e-2, 1.0])).astype(dt)
        flat_o, flat_r = out.reshape(-1), ref.reshape(-1)
        for _ in range(int(rng.integers(0, 5))):
            i, j = int(rng.integers(0, out.size)), int(rng.integers(0, 7))
            if j == 0:
                poison(flat_o[i:i + 1])  # never written
            elif j == 1:
                flat_r[i] = flat_o[i] = np.inf  # equal infinities agree
            elif j == 2:
                flat_r[i] = np.nan
                flat_o[i] = np.nan  # NaN for NaN agrees
            elif j == 3:
                flat_r[i] = 0.0  # a zero reference: relative error undefined
            elif j == 5:
                flat_o[i] = np.nan  # written as NaN by the kernel (not the sentinel)
            elif j == 6:
                flat_o[i] = -np.inf  # written as Inf
            else:
                flat_o[i] = np.float32(flat_o[i]) + 5
        tol = tolerance_for(dt) if trial % 2 else tolerance_for(dt, rtol=1e-3)
        same_check(compare("y", out, ref, tol),
                   compare_tensor("y", tensor(out), tensor(ref), tol, dt))


def test_device_compare_scalar_reference_and_shape_mismatch():
    out = np.full((3, 4), 2.0, dtype=np.float32)
    tol = tolerance_for(np.float32)
    same_check(compare("y", out, np.float32(2.0) * np.ones(1, np.float32), tol),
               compare_tensor("y", tensor(out), tensor(np.ones(1, np.float32) * 2), tol,
                              out.dtype))
    bad = compare_tensor("y", tensor(out), tensor(np.ones(5, np.float32)), tol, out.dtype)
    assert not bad.passed and "differs" in bad.note


def test_integer_outputs_stay_on_the_host_and_the_reference_uploads_once():
    assert device_comparable(np.float32) and device_comparable(ml_dtypes.bfloat16)
    assert not device_comparable(np.int32) and not device_comparable(np.bool_)
    with pytest.raises(TypeError):
        compare_tensor("y", tensor(np.zeros(3, np.int32)), tensor(np.zeros(3, np.int32)),
                       tolerance_for(np.int32), np.dtype(np.int32))
    uploads = []

    def to_device(a):
        uploads.append(a.shape)
        return tensor(a)

    ref = DeviceReference({"y": np.arange(4, dtype=np.float32)})
    first = ref.tensor("y", to_device)
    assert ref.tensor("y", to_device) is first and uploads == [(4,)]


def test_the_worker_compares_gpu_outputs_in_place_and_never_copies_them(monkeypatch):
    from types import SimpleNamespace

    from jupyter_ktune.runner import execute

    class OnGpu:  # stands for a CUDA tensor: the worker looks at is_cuda, then compares in place
        is_cuda = True

        def __init__(self, t):
            self.t = t

    calls = []

    def spy(name, out, ref, tol, dtype, poisoned):
        calls.append(name)
        return compare_tensor(name, out.t, ref, tol, dtype, poisoned)

    monkeypatch.setattr(execute, "compare_tensor", spy)
    out = tensor(np.zeros(8, np.float32))

    class Bound:
        def poison_outputs(self):  # as the Triton backend does: the sentinel through an int view
            size, bits = poison_bits(np.float32)
            out.view(torch.int32).fill_(bits)

        def launch(self):
            out[:6] = torch.arange(6.0)  # the last two are never written

        def device_outputs(self):
            return {"y": (OnGpu(out), np.dtype(np.float32))}

        def to_device(self, a):
            return tensor(a)

        def read_outputs(self):
            raise AssertionError("a GPU output was copied to the host")

    spec = SimpleNamespace(outputs=("y",), backend="triton", compare=None,
                           options=SimpleNamespace(rtol=None, atol=None, reduction=None))
    expected = {"y": np.arange(8, dtype=np.float32)}
    v = execute._verify(spec, Bound(), expected, DeviceReference(expected))
    check = v.checks[0]
    assert calls == ["y"] and not check.passed
    assert (check.unwritten, check.first_bad_index) == (2, (6,))
