"""The verification compare where the outputs live: torch tensors on the GPU (or the CPU).

:func:`jupyter_ktune.measure.verify.compare` checks host arrays. For a Triton variant the outputs
are torch tensors on the device, so copying a 16M-element output to the host and comparing
there costs about 0.19 s per config of a sweep on the H200, the largest part of a config's time
(bench/results/sweeps-h200/). Here the same per-element rule runs on the GPU and
only a :class:`~jupyter_ktune.measure.verify.Part` of scalars crosses to the host; the
reference is uploaded once per input set (:class:`DeviceReference`).

The rule and the report are the host compare's (normwise by default, per element with user
``--rtol/--atol``; see :mod:`jupyter_ktune.measure.tolerance`): NaN for NaN and equal infinities
agree, elements still holding the poison's exact bits are "never written", other NaN/Inf where
the reference is finite were written by the kernel; the first mismatch's index, max abs / rel
error and the relative L2 error. ``tests/test_verify_device.py`` checks
that both give the same OutputCheck on the same data. On the CPU the sliced NumPy compare is
faster (0.06 against 0.5 s for 16M bf16 elements on the 2-core VM), so the worker uses this for
tensors on a GPU only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from jupyter_ktune.measure.verify import Part, Tolerance, held_bits, rms_scale, summarise
from jupyter_ktune.results import OutputCheck


def _is_float(dtype: np.dtype) -> bool:
    """Whether the poison of ``dtype`` is NaN (floats, bfloat16 and fp8 included)."""
    return dtype.kind == "f" or "float" in dtype.name


def _work_dtype(torch: Any, out: Any, ref: Any) -> Any:
    """float32 unless an operand needs float64 (as the host compare decides)."""
    for t in (out, ref):
        if t.element_size() > 4 or (not t.is_floating_point() and t.element_size() >= 4):
            return torch.float64
    return torch.float32


def device_comparable(dtype: Any) -> bool:
    """Whether an output of this NumPy dtype is compared on the device."""
    return _is_float(np.dtype(dtype))


_INTS = ("", "int8", "int16", "", "int32", "", "", "", "int64")


def _kept_sentinel(torch: Any, flat_out: Any, idx: Any, held: int) -> Any:
    """Whether the elements ``idx`` of ``flat_out`` still hold the sentinel bits ``held``."""
    size = flat_out.element_size()
    signed = held - (1 << 8 * size) if held >= 1 << (8 * size - 1) else held
    return flat_out.view(getattr(torch, _INTS[size]))[idx] == signed


def compare_tensor(name: str, out: Any, ref: Any, tol: Tolerance, dtype: np.dtype,
                   poisoned: bool = True) -> OutputCheck:
    """Compare the floating-point torch tensor ``out`` with ``ref`` on their device.

    ``ref`` has as many elements as ``out`` (or one, broadcast). ``dtype`` is the output's
    declared NumPy dtype; integer and bool outputs are compared on the host (their poison is a
    byte pattern, checked on the raw bytes there). ``poisoned`` as for the host compare.
    """
    import torch

    if not _is_float(np.dtype(dtype)):
        raise TypeError(f"[ktune] compare_tensor is for floating outputs, not {np.dtype(dtype)}")
    shape = tuple(out.shape)
    if ref.numel() == 1 and out.numel() != 1:
        ref = ref.reshape(1).expand(out.numel())
    if ref.numel() != out.numel():
        return OutputCheck(name, False, float("inf"), float("inf"), float("inf"), tol.rtol,
                           tol.atol, out.numel(), 0, out.numel(),
                           note=f"shape {shape} differs from the reference's {tuple(ref.shape)}",
                           rule=tol.rule, bound=tol.bound, elem_bound=tol.elem, why=tol.why)
    flat_o, flat_r = out.reshape(-1), ref.reshape(-1)
    if flat_o.numel() > 1 and flat_o.stride(0) != 1:
        flat_o = flat_o.contiguous()
    wd = _work_dtype(torch, flat_o, flat_r)
    o, r = flat_o.to(wd), flat_r.to(wd)
    r_fin = r if bool(torch.isfinite(r).all()) else r[torch.isfinite(r)]
    part = Part(ref_sq=float(r_fin.to(torch.float64).square().sum()))
    scale = rms_scale(part.ref_sq, o.numel(), dtype)
    diff = (o - r).abs()
    abs_r = r.abs()
    limit = (tol.elem * torch.clamp(abs_r, min=scale) if tol.normwise
             else tol.atol + tol.rtol * abs_r)
    bad = ~(diff <= limit)
    idx = torch.nonzero(bad).reshape(-1)
    if idx.numel():
        of, rf = o[idx], r[idx]
        same = (of == rf) | (torch.isnan(of) & torch.isnan(rf))  # equal infinities, NaN for NaN
        diff[idx[same]] = 0.0
        keep = ~same
        idx, of, rf = idx[keep], of[keep], rf[keep]
        held = held_bits(dtype, poisoned)
        if held is not None:
            kept = _kept_sentinel(torch, flat_o, idx, held)
            unwritten = kept & ~torch.isnan(rf)
            nonfinite = ~torch.isfinite(of) & ~kept & torch.isfinite(rf)
        else:
            unwritten = torch.isnan(of) & ~torch.isnan(rf)
            nonfinite = torch.isinf(of) & torch.isfinite(rf)
        part.unwritten, part.nonfinite = int(unwritten.sum()), int(nonfinite.sum())
        part.mismatched = int(idx.numel())
        part.first = int(idx[0]) if idx.numel() else None
        part.first_unwritten = int(idx[unwritten][0]) if part.unwritten else None
        part.first_nonfinite = int(idx[nonfinite][0]) if part.nonfinite else None
    finite = torch.isfinite(diff)
    finite_all = bool(finite.all())
    finite_diff = diff if finite_all else diff[finite]
    part.nonfinite_diff = not finite_all
    if finite_diff.numel():
        part.max_abs = float(finite_diff.max())
    rel = torch.where(abs_r > 0, diff / torch.where(abs_r > 0, abs_r, torch.ones_like(abs_r)),
                      torch.zeros_like(diff))
    part.zero_ref_off = bool(((abs_r == 0) & (diff > 0)).any())
    kept_rel = rel if finite_all else rel[~torch.isnan(rel)]
    if kept_rel.numel():
        part.max_rel = float(kept_rel.max())
    part.diff_sq = float(finite_diff.to(torch.float64).square().sum())
    return summarise(name, part, shape, tol, distinct=held_bits(dtype, poisoned) is not None)


class DeviceReference:
    """The expected outputs of one input set, uploaded to the device once and reused.

    A sweep checks up to REDRAW_EVERY variants on one input set: one upload serves them all.
    ``to_device`` turns a host array into a tensor on the outputs' device (the backend's own
    conversion, which knows bfloat16 and fp8).
    """

    def __init__(self, expected: Mapping[str, np.ndarray]):
        self.expected = expected
        self._dev: dict[str, Any] = {}

    def tensor(self, name: str, to_device: Any) -> Any:
        """The reference of ``name`` on the device (uploaded on first use)."""
        if name not in self._dev:
            self._dev[name] = to_device(np.ascontiguousarray(self.expected[name]))
        return self._dev[name]
