"""The verdict rules (jupyter_ktune.measure.tolerance) on real numerical workloads, NumPy only.

Issue 15 item 4: a correct fp32 GEMM with a long reduction and a correct fp32 17x17 convolution,
computed in float32 in another summation order than the float64 reference, must pass by
default; the same with an off-by-one index must fail; bf16 passes; NaN never passes. The old
per-element rule (rtol 1e-4, atol 1e-5) is shown failing the correct ones, which is the defect.
"""

from __future__ import annotations

import numpy as np
import pytest

from jupyter_ktune.errors import CellError
from jupyter_ktune.measure.tolerance import (
    judge,
    judged,
    reduction_from_flops,
    rule_for,
    tolerance_for,
)
from jupyter_ktune.measure.verify import compare, poison

OLD = tolerance_for(np.float32, rtol=1e-4, atol=1e-5)  # the per-element rule issue 15 replaced
K = 8192


def blocked_gemm_f32(a: np.ndarray, b: np.ndarray, block: int = 64) -> np.ndarray:
    """C = A @ B in float32, summed block by block along K (a GPU kernel's order)."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(0, a.shape[1], block):
        acc += a[:, k:k + block] @ b[k:k + block, :]
    return acc


@pytest.fixture(scope="module")
def gemm():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((48, K)).astype(np.float32)
    b = rng.standard_normal((K, 40)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    return a, b, ref, blocked_gemm_f32(a, b)


def test_correct_fp32_gemm_k8192_passes_by_default_and_says_why(gemm):
    a, b, ref, out = gemm
    c = compare("c", out, ref, tolerance_for(np.float32, reduction=K))
    assert c.passed, c
    assert c.rule == "normwise" and 0 < c.rel_l2_err < 1e-5 < c.bound
    assert c.verdict().startswith(f"normwise rel-L2 {c.rel_l2_err:.2g} <= {c.bound:.2g}")
    assert "K 8192 from --reduction" in c.verdict() and "rule: normwise" in c.verdict()
    assert not compare("c", out, ref, OLD).passed  # what the per-element default said


def test_np_dot_in_float32_against_float64_passes(gemm):
    a, b, ref, _ = gemm
    assert compare("c", np.dot(a, b), ref, tolerance_for(np.float32, reduction=K)).passed


def test_tf32_inputs_pass_the_fp32_default(gemm):
    """Triton's fp32 tl.dot and cuBLAS round inputs to TF32 (10 stored mantissa bits)."""
    a, b, ref, _ = gemm

    def tf32(x):
        bits = x.view(np.uint32)
        return ((bits + 0x1000) & 0xFFFFE000).view(np.float32)  # round to nearest, 13 bits off

    out = blocked_gemm_f32(tf32(a), tf32(b))
    c = compare("c", out, ref, tolerance_for(np.float32, reduction=K))
    assert c.passed and 1e-4 < c.rel_l2_err < 1e-3, c


@pytest.mark.parametrize("shift", ["row", "col", "last row only"])
def test_off_by_one_gemm_fails(gemm, shift):
    a, b, ref, out = gemm
    bad = out.copy()
    if shift == "row":
        bad[:-1] = out[1:]
    elif shift == "col":
        bad[:, :-1] = out[:, 1:]
    else:  # one wrong row of 48: 2% of the elements, invisible in a norm over many more
        bad[-1] = out[-2]
    c = compare("c", bad, ref, tolerance_for(np.float32, reduction=K))
    assert not c.passed and c.mismatched > 0, c
    assert "max(|ref|, rms(ref))" in c.problems()[0]


def test_off_by_one_with_positive_inputs_fails():
    """rand() inputs make every entry near K/4, so a shifted row is off by ~1% only."""
    rng = np.random.default_rng(1)
    a, b = rng.random((32, K), np.float32), rng.random((K, 32), np.float32)
    ref = a.astype(np.float64) @ b
    out = blocked_gemm_f32(a, b)
    tol = tolerance_for(np.float32, reduction=K)
    assert compare("c", out, ref, tol).passed
    bad = out.copy()
    bad[:-1] = out[1:]
    assert not compare("c", bad, ref, tol).passed


def conv2d(x: np.ndarray, w: np.ndarray, dtype: type) -> np.ndarray:
    """'valid' 2-D cross-correlation, accumulated tap by tap in ``dtype``."""
    r, s = w.shape
    h, wd = x.shape[0] - r + 1, x.shape[1] - s + 1
    acc = np.zeros((h, wd), dtype)
    for i in range(r):
        for j in range(s):
            acc += (x[i:i + h, j:j + wd] * w[i, j]).astype(dtype)
    return acc


def test_correct_fp32_17x17_convolution_passes_and_off_by_one_fails():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((96, 96)).astype(np.float32)
    w = rng.standard_normal((17, 17)).astype(np.float32)
    ref = conv2d(x.astype(np.float64), w.astype(np.float64), np.float64)
    out = conv2d(x, w, np.float32)
    flops = 2 * ref.size * 17 * 17
    tol = rule_for(None, None, None, flops, ref.size)(np.float32)
    assert "K 289 from flops" in tol.why
    c = compare("y", out, ref, tol)
    assert c.passed, c
    shifted = conv2d(x[1:], w, np.float32)  # the window one row down: an off-by-one index
    bad = out.copy()
    bad[:shifted.shape[0]] = shifted
    assert not compare("y", bad, ref, tol).passed
    bad = out.copy()
    bad[:, -1] = out[:, -2]  # only the last column, from its neighbour's window
    assert not compare("y", bad, ref, tol).passed


def test_bf16_gemm_passes_and_off_by_one_fails():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = ml_dtypes.bfloat16
    rng = np.random.default_rng(3)
    a = rng.standard_normal((32, 1024)).astype(bf16)
    b = rng.standard_normal((1024, 32)).astype(bf16)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    out = blocked_gemm_f32(a.astype(np.float32), b.astype(np.float32)).astype(bf16)
    tol = tolerance_for(bf16, reduction=1024)
    c = compare("c", out, ref, tol)
    assert c.passed and 1e-3 < c.rel_l2_err < 1e-2, c
    bad = out.copy()
    bad[:, :-1] = out[:, 1:]
    assert not compare("c", bad, ref, tol).passed


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_nan_and_inf_never_pass_unless_the_reference_has_them_there(gemm, value):
    a, b, ref, out = gemm
    bad = out.copy()
    bad[3, 4] = value
    c = compare("c", bad, ref, tolerance_for(np.float32, reduction=K))
    assert not c.passed and c.nonfinite == 1 and c.unwritten == 0
    assert c.first_nonfinite_index == (3, 4)
    assert c.problems()[0] == "c: kernel wrote NaN/Inf at 1 element (first at (3, 4))"
    ref2 = ref.copy()
    ref2[3, 4] = value
    assert compare("c", bad, ref2, tolerance_for(np.float32, reduction=K)).passed


def test_never_written_and_written_nan_are_told_apart():
    ref = np.arange(1, 11, dtype=np.float32)
    out = ref.copy()
    poison(out[8:])
    with np.errstate(invalid="ignore"):
        out[2] = np.float32(0) * np.float32(np.inf)  # NaN from arithmetic
    c = compare("y", out, ref, tolerance_for(np.float32))
    assert (c.unwritten, c.nonfinite) == (2, 1)
    assert c.first_unwritten_index == (8,) and c.first_nonfinite_index == (2,)
    assert c.problems() == ["y: 2 of 10 elements never written (first at (8,))",
                            "y: kernel wrote NaN/Inf at 1 element (first at (2,))"]


def test_a_backend_that_cannot_poison_reports_nan_as_either():
    ref = np.ones(4, np.float32)
    out = ref.copy()
    out[1] = np.nan
    c = compare("y", out, ref, tolerance_for(np.float32), poisoned=False)
    assert c.unwritten == 1 and "never written, or written as NaN" in c.problems()[0]


def test_user_rtol_atol_switches_to_the_per_element_rule_and_says_so(gemm):
    a, b, ref, out = gemm
    c = compare("c", out, ref, tolerance_for(np.float32, rtol=1e-2, atol=1e-2))
    assert c.passed and c.rule == "per-element (user rtol/atol)"
    assert "rule: per-element, user rtol/atol" in c.verdict()
    assert "|out - ref| <= 0.01 + 0.01·|ref|" in c.verdict()


def test_all_zero_reference_demands_zeros():
    ref = np.zeros(16, np.float32)
    assert compare("y", ref.copy(), ref, tolerance_for(np.float32)).passed
    out = ref.copy()
    out[5] = 1e-3
    assert not compare("y", out, ref, tolerance_for(np.float32)).passed


def test_reduction_from_flops():
    assert reduction_from_flops(2 * 64 * 32 * 8192, 64 * 32) == 8192
    assert reduction_from_flops(None, 10) is None
    assert reduction_from_flops(float("nan"), 10) is None
    assert reduction_from_flops(100.0, 0) is None
    assert reduction_from_flops(1.0, 100) == 1


def test_a_longer_reduction_loosens_only_through_the_accumulation_term():
    short, long_ = (tolerance_for(np.float64, reduction=k).bound for k in (64, 1 << 20))
    assert long_ > 10 * short
    assert tolerance_for(np.float32, reduction=64).bound == pytest.approx(
        tolerance_for(np.float32, reduction=8192).bound, rel=1e-3)  # TF32 term dominates


# --- the --compare comparator -------------------------------------------------------------------

def test_comparator_bool_and_message():
    ref = np.ones(3, np.float32)
    assert judge(lambda o, r: bool(np.allclose(o, r)), "y", ref, ref) == (True, "")
    assert judge(lambda o, r: (False, "row 2 off"), "y", ref, ref) == (False, "row 2 off")
    assert judge(lambda o, r: np.all(o == r), "y", ref, ref) == (True, "")  # np.bool_


def test_comparator_replaces_the_verdict_and_keeps_the_figures():
    ref = np.ones(3, np.float32)
    out = ref * 2

    def close_enough(o, r):
        return True, "doubling is fine here"

    c = judged(compare("y", out, ref, tolerance_for(np.float32)), close_enough, out, ref)
    assert c.passed and c.rule == "comparator" and c.max_abs_err == 1.0
    assert c.verdict() == "rel-L2 1 (rule: comparator close_enough: doubling is fine here)"

    def never(o, r):
        return False

    c = judged(compare("y", ref, ref, tolerance_for(np.float32)), never, ref, ref)
    assert not c.passed and c.problems() == ["y: comparator never (wrong)"]


@pytest.mark.parametrize("fn, fragment", [
    (lambda o, r: "yes", "returned a str for output `y`"),
    (lambda o, r: 1 / 0, "failed on output `y`: ZeroDivisionError"),
])
def test_comparator_errors_name_the_function_and_the_fix(fn, fragment):
    ref = np.ones(2)
    with pytest.raises(CellError) as e:
        judge(fn, "y", ref, ref)
    assert fragment in str(e.value) and "return True/False or (passed, message)" in str(e.value)
