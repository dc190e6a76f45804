"""Verification against the reference: poisoned outputs, fresh inputs, the comparison.

Outputs are filled with a poison value before every run (a NaN with a payload arithmetic does
not produce for floats, a byte sentinel for integers), so an element the kernel never wrote
cannot pass by luck and is told apart from a NaN the kernel wrote. Inputs come fresh from the
user's ``inputs`` function for every check and are refused when they are all zeros, which hide
wrong indexing and can even run faster than real data. The verdict rules (normwise by default,
per element with ``--rtol/--atol``) are in :mod:`jupyter_ktune.measure.tolerance`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from jupyter_ktune.errors import CellError
from jupyter_ktune.measure.tolerance import TOLERANCES, Tolerance, scale_floor, tolerance_for
from jupyter_ktune.results import OutputCheck

__all__ = ["TOLERANCES", "Tolerance", "compare", "poison", "poison_bits", "poison_value",
           "reference_outputs", "tolerance_for", "zero_inputs"]

INT_SENTINEL = 0x5A  # byte pattern for integer poison: 0x5A5A5A5A for int32

#: Float poison by dtype: a quiet NaN whose payload arithmetic and conversions do not produce
#: (they give 0x7FC00000, x86's 0xFFC00000 or CUDA's 0x7FFFFFFF for fp32), so an element that
#: still holds these exact bits was never written, and any other NaN was written by the kernel
#: (issue 15 item 7). float8_e4m3fn has only two NaN encodings, 0x7F and 0xFF, and conversions
#: produce both: there its poison is plain NaN and a NaN it holds reads as "never written, or
#: written as NaN" (telling them apart would take a second run with another poison).
SENTINELS: dict[str, int] = {
    "float64": 0x7FF85A5A5A5A5A5A,
    "float32": 0x7FDA5A5A,
    "float16": 0x7E5A,
    "bfloat16": 0x7FDA,
    "float8_e5m2": 0xFF,  # conversions give 0x7E/0xFE (ml_dtypes) or 0x7F (CUDA)
}


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind in "fV" or "float" in dtype.name


def sentinel_distinct(dtype: Any) -> bool:
    """Whether the poison of ``dtype`` tells "never written" from "written as NaN"."""
    dt = np.dtype(dtype)
    return not _is_float(dt) or dt.name in SENTINELS


def poison(array: np.ndarray) -> None:
    """Fill ``array`` in place with the poison value of its dtype (see :data:`SENTINELS`)."""
    dtype = array.dtype
    if dtype.name in SENTINELS:  # through an integer view: the exact bits, never a conversion
        array.view(f"u{dtype.itemsize}")[...] = SENTINELS[dtype.name]
    elif _is_float(dtype):
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
    """Return the scalar a poisoned element holds (the NaN sentinel or the integer sentinel)."""
    a = np.empty(1, dtype=dtype)
    poison(a)
    return a[0]


def zero_inputs(args: Mapping[str, Any], outputs: Sequence[str]) -> list[str]:
    """Names of input arrays (not outputs) that are entirely zero."""
    return [k for k, v in args.items() if isinstance(v, np.ndarray) and k not in outputs
            and v.size > 1 and not np.any(v)]


def reference_outputs(reference_result: Any, outputs: Sequence[str],
                      name: str = "reference") -> dict[str, np.ndarray]:
    """Normalise what ``reference`` returned (array, tuple or dict) to {output name: array}.

    What cannot be an expected output is the reference's error, said as such (a
    :class:`~jupyter_ktune.errors.CellError` naming ``name``, the reference function): None,
    a value that is not numbers, all NaN. Compared as it was, a reference returning None was
    blamed on the kernel with "rel-L2 0 <= 0.0015" (issue 34).
    """
    def wrong(what: str, fix: str) -> CellError:
        return CellError(f"--reference {name}() {what}", line=1, fix=fix)

    shape = "a tuple or a dict" if len(outputs) > 1 else "an array"
    if reference_result is None:
        raise wrong("returned None, so there is nothing to compare the kernel with",
                    f"Return the expected {', '.join(outputs)} as {shape} (did it write into "
                    "its argument instead of returning?).")
    if isinstance(reference_result, Mapping):
        missing = [o for o in outputs if o not in reference_result]
        if missing:
            raise wrong(f"returned no value for {missing}",
                        f"Return a dict with keys {list(outputs)}.")
        got = {o: reference_result[o] for o in outputs}
    elif isinstance(reference_result, (tuple, list)) and len(outputs) > 1:
        if len(reference_result) != len(outputs):
            raise wrong(f"returned {len(reference_result)} values for {len(outputs)} outputs "
                        f"{list(outputs)}", "Return one value per output, in --out's order.")
        got = dict(zip(outputs, reference_result, strict=True))
    elif len(outputs) != 1:
        raise wrong(f"returned one value for outputs {list(outputs)}",
                    "Return a tuple or a dict.")
    else:
        got = {outputs[0]: reference_result}
    out = {o: _expected_array(v) for o, v in got.items()}
    for o, v in out.items():
        if v is None:
            raise wrong(f"returned a {type(got[o]).__name__} for output {o}, not numbers",
                        f"Return {o} as a NumPy array (or a torch/JAX array) of numbers.")
        if v.size and _is_float(v.dtype) and _all_nan(v):
            raise wrong(f"returned only NaN for output {o}, which no kernel can match",
                        f"Check {name} on these inputs (NaN in, or 0/0?).")
    return out


def _expected_array(value: Any) -> np.ndarray | None:
    """``value`` as a NumPy array, or None when it is not numbers (None inside, strings)."""
    try:
        a = np.asarray(value)
    except ValueError:  # a ragged list
        return None
    return a if a.dtype.kind in "biufcV" or _is_float(a.dtype) else None


def _all_nan(a: np.ndarray) -> bool:
    """Whether every element is NaN; one look at the first element settles most arrays."""
    with np.errstate(invalid="ignore"):
        flat = a.reshape(-1)
        return bool(np.isnan(flat[:1].astype(np.float32)).all()) and bool(
            np.isnan(flat.astype(np.float32)).all())


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


def _first(*indices: int | None) -> int | None:
    known = [i for i in indices if i is not None]
    return min(known) if known else None


@dataclass
class Part:
    """What one slice contributes to an OutputCheck; parts combine with :meth:`merge`."""

    mismatched: int = 0
    unwritten: int = 0  # still the exact poison bits: never written
    nonfinite: int = 0  # NaN/Inf the kernel wrote where the reference is finite
    first: int | None = None  # flat index of the first mismatch
    first_unwritten: int | None = None
    first_nonfinite: int | None = None
    max_abs: float = -1.0  # over finite differences; -1: none
    nonfinite_diff: bool = False
    max_rel: float = -1.0  # over non-NaN relative errors; -1: none
    zero_ref_off: bool = False
    diff_sq: float = 0.0  # sum of squares of the finite differences (float64)
    ref_sq: float = 0.0  # sum of squares of the finite reference values (float64)

    def merge(self, o: Part) -> Part:
        """The part of both slices together."""
        return Part(self.mismatched + o.mismatched, self.unwritten + o.unwritten,
                    self.nonfinite + o.nonfinite, _first(self.first, o.first),
                    _first(self.first_unwritten, o.first_unwritten),
                    _first(self.first_nonfinite, o.first_nonfinite),
                    max(self.max_abs, o.max_abs), self.nonfinite_diff or o.nonfinite_diff,
                    max(self.max_rel, o.max_rel), self.zero_ref_off or o.zero_ref_off,
                    self.diff_sq + o.diff_sq, self.ref_sq + o.ref_sq)


def _sum_sq(x: np.ndarray) -> float:
    x = x.astype(np.float64, copy=False)
    return float(np.dot(x, x))


def _finite_sq(ref: np.ndarray, wd: type) -> float:
    r = ref.astype(wd, copy=False)
    return _sum_sq(r if bool(np.isfinite(r).all()) else r[np.isfinite(r)])


def held_bits(dtype: Any, poisoned: bool = True) -> int | None:
    """The unsigned bit pattern that marks a never-written float element, or None where NaN is
    all the poison says (no distinct sentinel, or outputs the backend could not poison)."""
    name = np.dtype(dtype).name
    return SENTINELS.get(name) if poisoned else None


def _classify(out: np.ndarray, ref: np.ndarray, of: np.ndarray, rf: np.ndarray,
              idx: np.ndarray, held: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Masks over the failing elements ``idx``: never written, and NaN/Inf the kernel wrote."""
    if _is_float(out.dtype):
        if held is not None:
            kept = out.view(f"u{out.dtype.itemsize}")[idx] == held
            return kept & ~np.isnan(rf), ~np.isfinite(of) & ~kept & np.isfinite(rf)
        return np.isnan(of) & ~np.isnan(rf), np.isinf(of) & np.isfinite(rf)
    sentinel = poison_value(out.dtype)
    return (out[idx] == sentinel) & (ref[idx] != sentinel), np.zeros(idx.size, bool)


def _compare_slice(out: np.ndarray, ref: np.ndarray, wd: type, tol: Tolerance, offset: int,
                   scale: float, held: int | None) -> Part:
    """Compare flat slices ``out`` and ``ref`` (``offset``: where they start in the output;
    ``scale``: the floor of the normwise rule's per-element scale, rms(ref))."""
    o = out.astype(wd, copy=False)
    r = ref.astype(wd, copy=False)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(o - r)
        abs_r = np.abs(r)
        limit = (tol.elem * np.maximum(abs_r, wd(scale)) if tol.normwise
                 else tol.atol + tol.rtol * abs_r)
        bad = ~(diff <= limit)
    part = Part()
    if bad.any():
        idx = np.flatnonzero(bad)
        of, rf = o[idx], r[idx]
        same = (of == rf) | (np.isnan(of) & np.isnan(rf))  # equal infinities, NaN for NaN
        bad[idx[same]] = False
        diff[idx[same]] = 0.0
        idx, of, rf = idx[~same], of[~same], rf[~same]
        unwritten, nonfinite = _classify(out, ref, of, rf, idx, held)
        part.unwritten, part.nonfinite = int(unwritten.sum()), int(nonfinite.sum())
        part.mismatched = int(idx.size)
        part.first = offset + int(idx[0]) if idx.size else None
        if part.unwritten:
            part.first_unwritten = offset + int(idx[unwritten][0])
        if part.nonfinite:
            part.first_nonfinite = offset + int(idx[nonfinite][0])
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
    part.diff_sq = _sum_sq(finite_diff)
    return part


def _map(fn: Any, work: list[tuple[Any, ...]]) -> list[Any]:
    if len(work) > 1:
        return list(_threads().map(lambda a: fn(*a), work))
    return [fn(*a) for a in work]


def rms_scale(ref_sq: float, size: int, dtype: Any) -> float:
    """rms(ref), floored at the dtype's smallest normal: the normwise rule's per-element scale."""
    return max(math.sqrt(ref_sq / size) if size else 0.0, scale_floor(dtype))


def compare(name: str, out: np.ndarray, ref: np.ndarray, tol: Tolerance,
            poisoned: bool = True) -> OutputCheck:
    """Compare one output with its reference: the verdict by ``tol``'s rule, the per-element
    figures, the relative L2 error, and never-written / NaN-written elements.

    ``poisoned`` says the outputs were filled with :func:`poison` before the run (a backend
    that cannot do so makes every NaN "never written, or written as NaN"). NaN where the
    reference has NaN and equal infinities agree. Work is a handful of vector passes in
    float32 (float64 for 64-bit or 32-bit-integer data) over slices of :data:`CHUNK` elements,
    on several threads; the special cases are checked among the failing elements only. An
    interactive panel and every config of a sweep verify, so this is on the critical path.
    """
    if out.shape != ref.shape:
        if ref.size not in (1, out.size):
            return OutputCheck(name, False, float("inf"), float("inf"), float("inf"), tol.rtol,
                               tol.atol, out.size, 0, out.size,
                               note=f"shape {out.shape} differs from the reference's {ref.shape}",
                               rule=tol.rule, bound=tol.bound, elem_bound=tol.elem, why=tol.why)
        ref = ref.reshape(out.shape) if ref.size == out.size else np.broadcast_to(ref, out.shape)
    wd = _work_dtype(out, ref)
    o, r = np.ascontiguousarray(out).reshape(-1), np.ascontiguousarray(ref).reshape(-1)
    starts = range(0, o.size, CHUNK)
    ref_sq = sum(_map(_finite_sq, [(r[s:s + CHUNK], wd) for s in starts]))
    scale = rms_scale(ref_sq, o.size, out.dtype)
    held = held_bits(out.dtype, poisoned)
    parts = _map(_compare_slice, [(o[s:s + CHUNK], r[s:s + CHUNK], wd, tol, s, scale, held)
                                  for s in starts])
    total = Part(ref_sq=ref_sq)
    for p in parts:
        total = total.merge(p)
    return summarise(name, total, out.shape, tol, distinct=held is not None)


def _index(flat: int | None, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if flat is not None else None


def summarise(name: str, total: Part, shape: tuple[int, ...], tol: Tolerance,
              distinct: bool = True) -> OutputCheck:
    """The OutputCheck of one output from its merged parts (host or device comparison).

    ``distinct``: whether "never written" was told from "written as NaN" by the sentinel bits.
    """
    size = math.prod(shape)
    first = _index(total.first, shape)
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
    if total.unwritten and not distinct:
        note = (f"{total.unwritten} of {size} elements hold NaN: never written, or written as "
                "NaN (this output's poison cannot tell them apart)")
    passed = total.mismatched == 0 and (not tol.normwise or rel_l2 <= tol.bound)
    return OutputCheck(name=name, passed=passed, max_abs_err=max_abs,
                       max_rel_err=max_rel, rel_l2_err=rel_l2, rtol=tol.rtol, atol=tol.atol,
                       mismatched=total.mismatched, unwritten=total.unwritten,
                       size=int(size), first_bad_index=first, note=note, rule=tol.rule,
                       bound=tol.bound, elem_bound=tol.elem, why=tol.why,
                       nonfinite=total.nonfinite,
                       first_unwritten_index=_index(total.first_unwritten, shape),
                       first_nonfinite_index=_index(total.first_nonfinite, shape))
