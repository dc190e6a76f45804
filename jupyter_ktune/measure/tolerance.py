"""How close is close enough: the verdict rules of a verification, chosen per output dtype.

The default rule is **normwise**, as numerical libraries test (LAPACK's residual tests, cuBLAS's
and CUTLASS's GEMM checks): the relative L2 error ``||out - ref|| / ||ref||`` must stay under a
bound built from the unit roundoffs involved and the reduction length ``K``, and no element may
be off by more than a looser bound relative to ``max(|ref|, rms(ref))``. The per-element guard
catches a few wrong elements that a norm over millions would hide (a bad last tile); measuring
it against the output's rms rather than ``|ref|`` alone lets a correct GEMM whose sums cancel
near zero pass. The per-element rule ``|out - ref| <= atol + rtol * |ref|`` failed correct
kernels on the H200 (issue 15 item 4): a 4096^3 fp32 GEMM with 52,627 of 16.7 M elements "off"
at 1.2e-3 absolute, a 17x17 convolution on one element near zero. It is still used when the user
gives ``--rtol``/``--atol``; integers and bools compare exactly.

Expected relative L2 error ``e = sqrt(u_out^2 + u_in^2 + K * u_acc^2)``: rounding the output,
rounding the inputs inside the kernel, and an fp32 (fp64) accumulation whose error grows like
``sqrt(K)`` for random data. The verdict allows ``NORM_FACTOR * e`` normwise and
``ELEM_FACTOR * e`` per element. fp32 outputs allow TF32 inputs (Triton's ``tl.dot`` and cuBLAS
use TF32 by default on Hopper, rel-L2 near 3e-4), so the fp32 bound is about 1.5e-3; a kernel
that rounds to bf16 inside and writes fp32 must say so with ``--rtol/--atol`` or ``--compare``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from jupyter_ktune.results import OutputCheck

# (rtol, atol) by dtype name, for the per-element rule when the user gives one of --rtol/--atol.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-9, 1e-12),
    "float32": (1e-4, 1e-5),
    "float16": (1e-2, 1e-3),
    "bfloat16": (2e-2, 1e-2),
    "float8_e4m3fn": (1.25e-1, 1e-1),
    "float8_e5m2": (2.5e-1, 1e-1),
}

#: (u_out, u_in, u_acc, what u_in means) by output dtype: unit roundoffs 2^-p of the output's
#: format, of the inputs as the kernel may round them, and of the accumulator.
PRECISIONS: dict[str, tuple[float, float, float, str]] = {
    "float64": (2.0**-53, 0.0, 2.0**-53, ""),
    "float32": (2.0**-24, 2.0**-11, 2.0**-24, "TF32 inputs allowed"),
    "float16": (2.0**-11, 0.0, 2.0**-24, "fp32 accumulation assumed"),
    "bfloat16": (2.0**-8, 0.0, 2.0**-24, "fp32 accumulation assumed"),
    "float8_e4m3fn": (2.0**-4, 0.0, 2.0**-24, "fp32 accumulation assumed"),
    "float8_e5m2": (2.0**-3, 0.0, 2.0**-24, "fp32 accumulation assumed"),
}
NORM_FACTOR = 3.0
ELEM_FACTOR = 10.0
#: K assumed when neither ``--reduction`` nor a ``flops`` directive gives it: large, so the
#: bound errs towards passing a correct long reduction (it matters for fp64 only).
K_DEFAULT = 1 << 20


class Rule:
    """Names of the verdict rules, as the verdict states them."""

    NORMWISE = "normwise"
    ELEMENTWISE = "per-element (user rtol/atol)"
    EXACT = "exact"
    COMPARATOR = "comparator"


@dataclass(frozen=True)
class Tolerance:
    """How one output is judged.

    ``rtol``/``atol`` are the per-element rule's; for the normwise rule ``bound`` is the
    relative-L2 bound, ``elem`` the per-element bound relative to ``max(|ref|, rms(ref))``, and
    ``why`` says what the bound was built from ("float32, TF32 inputs allowed, K 8192 from
    flops").
    """

    rtol: float
    atol: float
    rule: str = Rule.ELEMENTWISE
    bound: float = 0.0
    elem: float = 0.0
    why: str = ""

    @property
    def normwise(self) -> bool:
        """Whether the normwise rule decides."""
        return self.rule == Rule.NORMWISE


def _is_integer(dtype: np.dtype) -> bool:
    return bool(np.issubdtype(dtype, np.integer)) or dtype.name == "bool"


def tolerance_for(dtype: Any, rtol: float | None = None, atol: float | None = None,
                  reduction: int | None = None, k_source: str = "--reduction") -> Tolerance:
    """The rule for an output of ``dtype``: exact for integers, per-element when the user gave
    ``rtol`` or ``atol`` (the other from :data:`TOLERANCES`), else normwise with reduction
    length ``reduction`` (``k_source`` says where it came from; None: :data:`K_DEFAULT`).

    Examples
    --------
    >>> t = tolerance_for(np.float32, reduction=8192)
    >>> t.rule, round(t.bound, 5)
    ('normwise', 0.00146)
    >>> tolerance_for(np.float32, rtol=1e-3).rule
    'per-element (user rtol/atol)'
    """
    dt = np.dtype(dtype)
    if _is_integer(dt):
        return Tolerance(0.0 if rtol is None else rtol, 0.0 if atol is None else atol,
                         Rule.EXACT if rtol is None and atol is None else Rule.ELEMENTWISE)
    base = TOLERANCES.get(dt.name, TOLERANCES["float32"])
    r, a = base[0] if rtol is None else rtol, base[1] if atol is None else atol
    if rtol is not None or atol is not None:
        return Tolerance(r, a, Rule.ELEMENTWISE)
    u_out, u_in, u_acc, note = PRECISIONS.get(dt.name, PRECISIONS["float32"])
    k = K_DEFAULT if reduction is None else max(1, int(reduction))
    e = math.sqrt(u_out**2 + u_in**2 + k * u_acc**2)
    where = f"K {k} from {k_source}" if reduction is not None else (
        f"K unknown, assumed {k}: give --reduction K")
    why = ", ".join(w for w in (dt.name, note, where) if w)
    return Tolerance(r, a, Rule.NORMWISE, NORM_FACTOR * e, ELEM_FACTOR * e, why)


def reduction_from_flops(flops: float | None, output_elements: int) -> int | None:
    """K estimated from the ``flops`` directive: ``flops / (2 * output elements)``.

    Right for a GEMM (``2*M*N*K`` flops over ``M*N`` outputs) and a convolution (``2*C*R*S``
    multiply-adds per output); None when there is no usable count.
    """
    if flops is None or not math.isfinite(flops) or output_elements <= 0 or flops <= 0:
        return None
    return max(1, round(flops / (2.0 * output_elements)))


def scale_floor(dtype: Any) -> float:
    """Smallest scale an element is judged against: the dtype's smallest normal number, so an
    all-zero reference demands zeros rather than dividing by zero."""
    dt = np.dtype(dtype)
    try:
        return float(np.finfo(dt).tiny)
    except (TypeError, ValueError):
        try:
            import ml_dtypes

            return float(ml_dtypes.finfo(dt).tiny)
        except (ImportError, TypeError, ValueError):
            return float(np.finfo(np.float32).tiny)


def rule_for(rtol: float | None, atol: float | None, reduction: int | None,
             flops: float | None, output_elements: int) -> Callable[[Any], Tolerance]:
    """``dtype -> Tolerance`` for one cell: --rtol/--atol, else normwise with K from
    --reduction, else estimated from the flops directive (:func:`reduction_from_flops`)."""
    k, source = reduction, "--reduction"
    if k is None:
        k, source = reduction_from_flops(flops, output_elements), "flops"
    return lambda dtype: tolerance_for(dtype, rtol, atol, k, source)


def judged(check: OutputCheck, fn: Any, out: np.ndarray, ref: np.ndarray) -> OutputCheck:
    """``check`` with the verdict of the user's ``--compare`` function instead of the rule's
    (the figures stay: they still tell how far off the output is)."""
    passed, message = judge(fn, check.name, out, ref)
    label = f"comparator {getattr(fn, '__name__', repr(fn))}{': ' + message if message else ''}"
    return replace(check, passed=passed, rule=Rule.COMPARATOR, why=label,
                   note="" if passed else f"{label} (wrong)")


def judge(fn: Any, name: str, out: np.ndarray, ref: np.ndarray) -> tuple[bool, str]:
    """Call the user's ``--compare`` function on one output: ``(passed, message)``.

    ``fn(out, ref)`` returns a bool or ``(bool, message)``; anything else, or an exception, is
    the user's error and raised as a CellError naming the function and the fix.
    """
    from jupyter_ktune.errors import CellError

    label = getattr(fn, "__name__", repr(fn))
    try:
        got = fn(out, ref)
    except Exception as exc:  # noqa: BLE001 - the user's function: report, never crash
        raise CellError(f"the comparator {label} failed on output `{name}`: "
                        f"{type(exc).__name__}: {exc}", line=1,
                        fix=f"Make {label}(out, ref) return True/False or (passed, message)."
                        ) from None
    message = ""
    if isinstance(got, tuple) and len(got) == 2 and isinstance(got[1], str):
        got, message = got
    if not isinstance(got, (bool, np.bool_)):
        raise CellError(f"the comparator {label} returned a {type(got).__name__} for output "
                        f"`{name}`", line=1,
                        fix=f"Make {label}(out, ref) return True/False or (passed, message).")
    return bool(got), message
