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


def compare(name: str, out: np.ndarray, ref: np.ndarray, tol: Tolerance) -> OutputCheck:
    """Compare one output with its reference in float64, counting unwritten (poisoned) elements."""
    if out.shape != ref.shape:
        if ref.size not in (1, out.size):
            return OutputCheck(name, False, float("inf"), float("inf"), float("inf"), tol.rtol,
                               tol.atol, out.size, 0, out.size,
                               note=f"shape {out.shape} differs from the reference's {ref.shape}")
        ref = ref.reshape(out.shape) if ref.size == out.size else np.broadcast_to(ref, out.shape)
    o = out.astype(np.float64)
    r = ref.astype(np.float64)
    if np.issubdtype(out.dtype, np.floating) or "float" in out.dtype.name:
        unwritten_mask = np.isnan(o) & ~np.isnan(r)
    else:
        unwritten_mask = (out == poison_value(out.dtype)) & (ref != poison_value(out.dtype))
    with np.errstate(invalid="ignore"):
        diff = np.abs(o - r)
    same = (o == r) | (np.isnan(o) & np.isnan(r))  # equal infinities and NaN-for-NaN agree
    diff[same] = 0.0
    finite = np.isfinite(diff)
    bad = ~(diff <= tol.atol + tol.rtol * np.abs(r)) & ~same
    max_abs = float(np.max(diff[finite])) if finite.any() else float("inf")
    if not finite.all() and (bad & ~finite).any():
        max_abs = float("inf")
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(np.abs(r) > 0, diff / np.abs(r), np.where(diff > 0, np.inf, 0.0))
    max_rel = float(np.nanmax(rel)) if (~np.isnan(rel)).any() else float("inf") if rel.size else 0.0
    ref_norm = float(np.linalg.norm(r[np.isfinite(r)])) if r.size else 0.0
    rel_l2 = (float(np.linalg.norm(np.where(finite, diff, 0.0))) / ref_norm if ref_norm > 0
              else float(np.linalg.norm(np.where(finite, diff, 0.0))))
    first = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.any() else None
    unwritten = int(unwritten_mask.sum())
    note = ""
    if unwritten:
        note = (f"{unwritten} of {out.size} elements still hold the poison value: never written "
                "(or computed as NaN)")
    return OutputCheck(name=name, passed=not bad.any(), max_abs_err=max_abs, max_rel_err=max_rel,
                       rel_l2_err=rel_l2, rtol=tol.rtol, atol=tol.atol, mismatched=int(bad.sum()),
                       unwritten=unwritten, size=int(out.size), first_bad_index=first, note=note)
