"""Verification against the reference: tolerances by dtype, poisoned outputs, fresh inputs.

Outputs are filled with a poison value before every run (NaN for floats, a sentinel for
integers), so an element the kernel never wrote cannot pass by luck. Inputs come fresh from the
user's ``inputs`` function for every check and are refused when they are all zeros, which hide
wrong indexing and can even run faster than real data.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from jupyter_ktune.results import OutputCheck

# (rtol, atol) by dtype name. Per element: |out - ref| <= atol + rtol * |ref|.
# fp32 allows reduction-order differences; bf16 has 8 mantissa bits (eps 2^-8).
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-9, 1e-12),
    "float32": (1e-4, 1e-5),
    "float16": (1e-2, 1e-3),
    "bfloat16": (2e-2, 1e-2),
    "float8_e4m3fn": (1.25e-1, 1e-1),
    "float8_e5m2": (2.5e-1, 1e-1),
}
INT_SENTINEL = 0x5A  # byte pattern for integer poison: 0x5A5A5A5A for int32


@dataclass(frozen=True)
class Tolerance:
    """Relative and absolute tolerance for one output."""

    rtol: float
    atol: float


def tolerance_for(dtype: Any, rtol: float | None = None, atol: float | None = None) -> Tolerance:
    """Default tolerance for a dtype, with user overrides; integers and bools compare exactly."""
    name = np.dtype(dtype).name
    if np.issubdtype(np.dtype(dtype), np.integer) or name == "bool":
        base = (0.0, 0.0)
    else:
        base = TOLERANCES.get(name, TOLERANCES["float32"])
    return Tolerance(base[0] if rtol is None else rtol, base[1] if atol is None else atol)


def poison(array: np.ndarray) -> None:
    """Fill ``array`` in place with the poison value of its dtype."""
    dtype = array.dtype
    if np.issubdtype(dtype, np.floating) or dtype.kind == "V" or "float" in dtype.name:
        array[...] = np.nan
    else:
        array.view(np.uint8)[...] = INT_SENTINEL


def poison_bits(dtype: Any) -> tuple[int, int] | None:
    """``(itemsize, bit pattern as a signed integer)`` of the poison value, or None.

    Backends fill device outputs with this pattern through an integer view of the same width,
    a memset on the device instead of a host array filled and copied over (32 MB for a 4096²
    bf16 GEMM output, on every verification). None for item sizes with no integer view.
    """
    a = np.empty(1, dtype=dtype)
    poison(a)
    size = a.dtype.itemsize
    if size not in (1, 2, 4, 8):
        return None
    return size, int(a.view(f"i{size}")[0])


def poison_value(dtype: Any) -> Any:
    """Return the scalar a poisoned element holds (NaN or the integer sentinel)."""
    a = np.empty(1, dtype=dtype)
    poison(a)
    return a[0]


def zero_inputs(args: Mapping[str, Any], outputs: Sequence[str]) -> list[str]:
    """Names of input arrays (not outputs) that are entirely zero."""
    return [k for k, v in args.items() if isinstance(v, np.ndarray) and k not in outputs
            and v.size > 1 and not np.any(v)]


def reference_outputs(reference_result: Any, outputs: Sequence[str]) -> dict[str, np.ndarray]:
    """Normalise what ``reference`` returned (array, tuple or dict) to {output name: array}."""
    if isinstance(reference_result, Mapping):
        missing = [o for o in outputs if o not in reference_result]
        if missing:
            raise ValueError(f"[ktune] the reference returned no value for {missing}. "
                             f"Return a dict with keys {list(outputs)}.")
        return {o: np.asarray(reference_result[o]) for o in outputs}
    if isinstance(reference_result, (tuple, list)) and len(outputs) > 1:
        if len(reference_result) != len(outputs):
            raise ValueError(f"[ktune] the reference returned {len(reference_result)} values for "
                             f"{len(outputs)} outputs {list(outputs)}.")
        return {o: np.asarray(r) for o, r in zip(outputs, reference_result, strict=True)}
    if len(outputs) != 1:
        raise ValueError(f"[ktune] the reference returned one value for outputs {list(outputs)}. "
                         "Return a tuple or a dict.")
    return {outputs[0]: np.asarray(reference_result)}


def _work_dtype(*arrays: np.ndarray) -> type:
    """float32 when it holds both arrays exactly enough for the tolerance, else float64."""
    for a in arrays:
        if a.dtype.itemsize > 4 or a.dtype.kind in "iu" and a.dtype.itemsize >= 4:
            return np.float64
    return np.float32


#: Elements per slice of a comparison: a slice's temporaries stay in cache, and slices run on
#: several cores (NumPy's ufuncs release the GIL), so a 16M-element bf16 GEMM output compares in
#: tens of milliseconds on a GPU host rather than the ~0.3 s of whole-array passes.
CHUNK = 1 << 20
_pool: ThreadPoolExecutor | None = None


def _threads() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max(1, min(8, os.cpu_count() or 1)),
                                   thread_name_prefix="ktune-verify")
    return _pool


@dataclass
class Part:
    """What one slice contributes to an OutputCheck; parts combine with :meth:`merge`."""

    mismatched: int = 0
    unwritten: int = 0
    first: int | None = None  # flat index of the first mismatch
    max_abs: float = -1.0  # over finite differences; -1: none
    nonfinite_diff: bool = False
    max_rel: float = -1.0  # over non-NaN relative errors; -1: none
    zero_ref_off: bool = False
    diff_sq: float = 0.0  # sum of squares of the finite differences (float64)
    ref_sq: float = 0.0  # sum of squares of the finite reference values (float64)

    def merge(self, o: Part) -> Part:
        firsts = [f for f in (self.first, o.first) if f is not None]
        return Part(self.mismatched + o.mismatched, self.unwritten + o.unwritten,
                     min(firsts) if firsts else None, max(self.max_abs, o.max_abs),
                     self.nonfinite_diff or o.nonfinite_diff, max(self.max_rel, o.max_rel),
                     self.zero_ref_off or o.zero_ref_off, self.diff_sq + o.diff_sq,
                     self.ref_sq + o.ref_sq)


def _sum_sq(x: np.ndarray) -> float:
    x = x.astype(np.float64, copy=False)
    return float(np.dot(x, x))


def _compare_slice(out: np.ndarray, ref: np.ndarray, wd: type, tol: Tolerance,
                   offset: int) -> Part:
    """Compare flat slices ``out`` and ``ref`` (``offset``: where they start in the output)."""
    o = out.astype(wd, copy=False)
    r = ref.astype(wd, copy=False)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(o - r)
        abs_r = np.abs(r)
        bad = ~(diff <= tol.atol + tol.rtol * abs_r)
    part = Part()
    if bad.any():
        idx = np.flatnonzero(bad)
        of, rf = o[idx], r[idx]
        same = (of == rf) | (np.isnan(of) & np.isnan(rf))  # equal infinities, NaN for NaN
        bad[idx[same]] = False
        diff[idx[same]] = 0.0
        idx, of, rf = idx[~same], of[~same], rf[~same]
        if out.dtype.kind == "f" or "float" in out.dtype.name:
            part.unwritten = int((np.isnan(of) & ~np.isnan(rf)).sum())
        else:
            sentinel = poison_value(out.dtype)
            part.unwritten = int(((out[idx] == sentinel) & (ref[idx] != sentinel)).sum())
        part.mismatched = int(idx.size)
        part.first = offset + int(idx[0]) if idx.size else None
    finite = np.isfinite(diff)
    finite_all = bool(finite.all())
    finite_diff = diff if finite_all else diff[finite]
    part.nonfinite_diff = not finite_all
    if finite_diff.size:
        part.max_abs = float(finite_diff.max())
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.divide(diff, abs_r, out=np.zeros_like(diff), where=abs_r > 0)
    part.zero_ref_off = bool(np.any((abs_r == 0) & (diff > 0)))
    kept = rel if finite_all else rel[~np.isnan(rel)]
    if kept.size:
        part.max_rel = float(kept.max())
    r_fin = r if bool(np.isfinite(r).all()) else r[np.isfinite(r)]
    part.ref_sq, part.diff_sq = _sum_sq(r_fin), _sum_sq(finite_diff)
    return part


def compare(name: str, out: np.ndarray, ref: np.ndarray, tol: Tolerance) -> OutputCheck:
    """Compare one output with its reference, counting unwritten (poisoned) elements.

    Per element: ``|out - ref| <= atol + rtol * |ref|``; NaN where the reference has NaN and
    equal infinities agree. Work is a handful of vector passes in float32 (float64 for 64-bit
    or 32-bit-integer data) over slices of :data:`CHUNK` elements, on several threads; the
    special cases are checked among the failing elements only. An interactive panel and every
    config of a sweep verify, so this is on the critical path.
    """
    if out.shape != ref.shape:
        if ref.size not in (1, out.size):
            return OutputCheck(name, False, float("inf"), float("inf"), float("inf"), tol.rtol,
                               tol.atol, out.size, 0, out.size,
                               note=f"shape {out.shape} differs from the reference's {ref.shape}")
        ref = ref.reshape(out.shape) if ref.size == out.size else np.broadcast_to(ref, out.shape)
    wd = _work_dtype(out, ref)
    o, r = np.ascontiguousarray(out).reshape(-1), np.ascontiguousarray(ref).reshape(-1)
    starts = range(0, o.size, CHUNK)
    work = [(o[s:s + CHUNK], r[s:s + CHUNK], wd, tol, s) for s in starts]
    parts = (list(_threads().map(lambda a: _compare_slice(*a), work)) if len(work) > 1
             else [_compare_slice(*a) for a in work])
    total = Part()
    for p in parts:
        total = total.merge(p)
    return summarise(name, total, out.shape, tol)


def summarise(name: str, total: Part, shape: tuple[int, ...], tol: Tolerance) -> OutputCheck:
    """The OutputCheck of one output from its merged parts (host or device comparison)."""
    size = math.prod(shape)
    first = (tuple(int(i) for i in np.unravel_index(total.first, shape))
             if total.first is not None else None)
    max_abs = total.max_abs if total.max_abs >= 0 else float("inf")
    if total.nonfinite_diff and first is not None:
        max_abs = float("inf")
    if total.zero_ref_off:
        max_rel = float("inf")
    elif total.max_rel >= 0:
        max_rel = total.max_rel
    else:
        max_rel = 0.0 if size == 0 else float("inf")
    ref_norm, diff_norm = float(np.sqrt(total.ref_sq)), float(np.sqrt(total.diff_sq))
    rel_l2 = diff_norm / ref_norm if ref_norm > 0 else diff_norm
    note = ""
    if total.unwritten:
        note = (f"{total.unwritten} of {size} elements still hold the poison value: never "
                "written (or computed as NaN)")
    return OutputCheck(name=name, passed=total.mismatched == 0, max_abs_err=max_abs,
                       max_rel_err=max_rel, rel_l2_err=rel_l2, rtol=tol.rtol, atol=tol.atol,
                       mismatched=total.mismatched, unwritten=total.unwritten,
                       size=int(size), first_bad_index=first, note=note)
