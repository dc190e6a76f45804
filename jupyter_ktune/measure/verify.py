"""Verification against the reference: tolerances by dtype, poisoned outputs, fresh inputs.

Outputs are filled with a poison value before every run (NaN for floats, a sentinel for
integers), so an element the kernel never wrote cannot pass by luck. Inputs come fresh from the
user's ``inputs`` function for every check and are refused when they are all zeros, which hide
wrong indexing and can even run faster than real data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


def compare(name: str, out: np.ndarray, ref: np.ndarray, tol: Tolerance) -> OutputCheck:
    """Compare one output with its reference, counting unwritten (poisoned) elements.

    Per element: ``|out - ref| <= atol + rtol * |ref|``; NaN where the reference has NaN and
    equal infinities agree. Work is a handful of vector passes in float32 (float64 for 64-bit
    or 32-bit-integer data); the special cases are checked among the failing elements only, so
    a 4M-element output compares in tens of milliseconds (an interactive panel verifies often).
    """
    if out.shape != ref.shape:
        if ref.size not in (1, out.size):
            return OutputCheck(name, False, float("inf"), float("inf"), float("inf"), tol.rtol,
                               tol.atol, out.size, 0, out.size,
                               note=f"shape {out.shape} differs from the reference's {ref.shape}")
        ref = ref.reshape(out.shape) if ref.size == out.size else np.broadcast_to(ref, out.shape)
    wd = _work_dtype(out, ref)
    o = out.astype(wd, copy=False)
    r = ref.astype(wd, copy=False)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(o - r)
        abs_r = np.abs(r)
        bad = ~(diff <= tol.atol + tol.rtol * abs_r)
    unwritten = 0
    first = None
    if bad.any():
        idx = np.flatnonzero(bad)
        of, rf = o.ravel()[idx], r.ravel()[idx]
        same = (of == rf) | (np.isnan(of) & np.isnan(rf))  # equal infinities, NaN for NaN
        bad.ravel()[idx[same]] = False
        diff.ravel()[idx[same]] = 0.0
        idx, of, rf = idx[~same], of[~same], rf[~same]
        if out.dtype.kind == "f" or "float" in out.dtype.name:
            unwritten = int((np.isnan(of) & ~np.isnan(rf)).sum())
        else:
            sentinel = poison_value(out.dtype)
            raw_o, raw_r = out.ravel()[idx], np.asarray(ref).ravel()[idx]
            unwritten = int(((raw_o == sentinel) & (raw_r != sentinel)).sum())
        if idx.size:
            first = tuple(int(i) for i in np.unravel_index(idx[0], out.shape))
    finite_all = bool(np.isfinite(diff).all())
    finite_diff = diff if finite_all else diff[np.isfinite(diff)]
    max_abs = float(finite_diff.max()) if finite_diff.size else float("inf")
    if not finite_all and first is not None:
        max_abs = float("inf")
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.divide(diff, abs_r, out=np.zeros_like(diff), where=abs_r > 0)
    zero_ref_off = bool(np.any((abs_r == 0) & (diff > 0)))
    if zero_ref_off:
        max_rel = float("inf")
    elif finite_all:
        max_rel = float(rel.max()) if rel.size else 0.0
    else:
        kept = rel[~np.isnan(rel)]
        max_rel = float(kept.max()) if kept.size else float("inf")
    r_fin = r if bool(np.isfinite(r).all()) else r[np.isfinite(r)]
    ref_norm = float(np.linalg.norm(r_fin.astype(np.float64, copy=False))) if r.size else 0.0
    diff_norm = float(np.linalg.norm(finite_diff.astype(np.float64, copy=False)))
    rel_l2 = diff_norm / ref_norm if ref_norm > 0 else diff_norm
    mismatched = int(bad.sum())
    note = ""
    if unwritten:
        note = (f"{unwritten} of {out.size} elements still hold the poison value: never written "
                "(or computed as NaN)")
    return OutputCheck(name=name, passed=mismatched == 0, max_abs_err=max_abs, max_rel_err=max_rel,
                       rel_l2_err=rel_l2, rtol=tol.rtol, atol=tol.atol, mismatched=mismatched,
                       unwritten=unwritten, size=int(out.size), first_bad_index=first, note=note)
