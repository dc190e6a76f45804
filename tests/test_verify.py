"""Checking outputs against the reference (jupyter_ktune.measure.verify), NumPy only.

Covers tolerance_for by dtype and user overrides, poison values (NaN for floats, the 0x5A byte
sentinel for integers), compare() (agreement, mismatch counts and first bad index, unwritten
elements found through the poison, NaN in both = agreement, shape mismatches),
reference_outputs normalising an array / tuple / dict, and zero_inputs.
"""

import warnings

import numpy as np
import pytest

from jupyter_ktune.measure.verify import (
    INT_SENTINEL,
    Tolerance,
    compare,
    poison,
    poison_value,
    reference_outputs,
    tolerance_for,
    zero_inputs,
)

F32 = tolerance_for(np.float32, rtol=1e-4, atol=1e-5)  # the per-element rule, as a user sets it


# --- tolerances --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, expected", [
    (np.int32, (0.0, 0.0)),
    (np.uint8, (0.0, 0.0)),
    (np.bool_, (0.0, 0.0)),
])
def test_integers_compare_exactly(dtype, expected):
    assert tolerance_for(dtype) == Tolerance(*expected, rule="exact")


@pytest.mark.parametrize("dtype, low, high", [
    (np.float64, 1e-14, 1e-12),  # K unknown: 2^20 assumed
    (np.float32, 1e-3, 2e-3),    # TF32 inputs allowed
    ("float16", 1e-3, 2e-3),
    (np.complex64, 1e-3, 2e-3),  # unknown non-integer types fall back to float32's
])
def test_floats_default_to_the_normwise_rule(dtype, low, high):
    t = tolerance_for(dtype)
    assert t.rule == "normwise" and low < t.bound < high and t.elem > t.bound
    assert "K unknown" in t.why


def test_user_tolerance_overrides_one_or_both_and_switches_to_per_element():
    per = "per-element (user rtol/atol)"
    assert tolerance_for(np.float32, rtol=1e-2) == Tolerance(1e-2, 1e-5, per)
    assert tolerance_for(np.float32, atol=0.0) == Tolerance(1e-4, 0.0, per)
    assert tolerance_for(np.int32, rtol=0.5, atol=1.0) == Tolerance(0.5, 1.0, per)


def test_bfloat16_tolerance_and_poison():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = np.dtype(ml_dtypes.bfloat16)
    assert tolerance_for(bf16, rtol=2e-2) == Tolerance(2e-2, 1e-2, "per-element (user rtol/atol)")
    a = np.ones(4, dtype=bf16)
    poison(a)
    assert np.isnan(a.astype(np.float32)).all()
    assert (a.view(np.uint16) == 0x7FDA).all()
    ref = np.full(4, 1.0, dtype=bf16)
    out = (ref.astype(np.float32) * 1.01).astype(bf16)
    assert compare("y", out, ref, tolerance_for(bf16)).passed


# --- poison ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_float_poison_is_nan(dtype):
    a = np.zeros((2, 3), dtype=dtype)
    poison(a)
    assert np.isnan(a).all()
    assert np.isnan(poison_value(dtype))


@pytest.mark.parametrize("dtype, expected", [
    (np.int32, 0x5A5A5A5A),
    (np.uint8, 0x5A),
    (np.int16, 0x5A5A),
    (np.uint64, 0x5A5A5A5A5A5A5A5A),
])
def test_int_poison_is_the_byte_sentinel(dtype, expected):
    assert INT_SENTINEL == 0x5A
    a = np.zeros(5, dtype=dtype)
    poison(a)
    assert (a == expected).all()
    assert poison_value(dtype) == expected


# --- compare -----------------------------------------------------------------------------------

def test_equal_outputs_pass_with_zero_errors():
    ref = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    c = compare("y", ref.copy(), ref, F32)
    assert c.passed and c.mismatched == 0 and c.unwritten == 0 and c.size == 12
    assert (c.max_abs_err, c.max_rel_err, c.rel_l2_err) == (0.0, 0.0, 0.0)
    assert c.first_bad_index is None and c.note == ""
    assert (c.name, c.rtol, c.atol) == ("y", 1e-4, 1e-5)


def test_within_tolerance_passes_and_outside_fails():
    ref = np.full(4, 100.0, dtype=np.float32)
    assert compare("y", ref + np.float32(0.005), ref, F32).passed  # 5e-3 <= 1e-5 + 1e-2
    assert not compare("y", ref + np.float32(0.02), ref, F32).passed


def test_mismatches_are_counted_with_the_first_bad_index():
    ref = np.zeros((3, 4), dtype=np.float32)
    out = ref.copy()
    out[1, 2] = 0.5
    out[2, 0] = -2.0
    c = compare("y", out, ref, F32)
    assert not c.passed and c.mismatched == 2 and c.unwritten == 0
    assert c.first_bad_index == (1, 2)
    assert c.max_abs_err == pytest.approx(2.0)
    assert c.max_rel_err == np.inf  # error against a zero reference


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int32", "uint8", "bool",
                                   "bfloat16", "float8_e4m3fn"])
def test_poison_bits_fill_the_same_bytes_as_the_host_poison(dtype):
    """A device fill with poison_bits must leave exactly what poison() writes on the host."""
    import ml_dtypes

    from jupyter_ktune.measure.verify import poison_bits

    dt = np.dtype(getattr(ml_dtypes, dtype, None) or dtype)
    host = np.empty(5, dtype=dt)
    poison(host)
    size, value = poison_bits(dt)
    filled = np.full(5, value, dtype=f"i{size}").view(dt)
    assert filled.tobytes() == host.tobytes()


@pytest.mark.parametrize("chunk", [7, 64, 1 << 20])
def test_sliced_compare_combines_slices_like_one_pass(monkeypatch, chunk):
    """Slices on threads must give the whole-array answer: counts, first index, maxima, norms."""
    import jupyter_ktune.measure.verify as verify

    monkeypatch.setattr(verify, "CHUNK", chunk)
    rng = np.random.default_rng(3)
    ref = rng.standard_normal((50, 40)).astype(np.float32)
    out = ref.copy()
    out[3, 5] += 1.0        # mismatch, 1.0 off
    poison(out[40, 1:2])    # unwritten (poison)
    out[49, 39] -= 2.5      # the largest error, in the last slice
    ref[20, 20] = np.inf
    out[20, 20] = np.inf    # equal infinities agree
    r = compare("y", out, ref, F32)
    assert (r.mismatched, r.unwritten, r.first_bad_index) == (3, 1, (3, 5))
    assert r.max_abs_err == float("inf")  # a NaN output element makes the error unbounded
    out[40, 1] = ref[40, 1]
    r = compare("y", out, ref, F32)
    assert r.mismatched == 2 and r.max_abs_err == pytest.approx(2.5, rel=1e-6)
    finite = np.isfinite(ref)
    expected_l2 = np.linalg.norm(out[finite] - ref[finite]) / np.linalg.norm(ref[finite])
    assert r.rel_l2_err == pytest.approx(expected_l2, rel=1e-5)


def test_unwritten_elements_are_found_through_the_poison():
    ref = np.arange(1, 9, dtype=np.float32)
    out = ref.copy()
    poison(out[5:])  # as if poisoned and never written
    c = compare("y", out, ref, F32)
    assert not c.passed and c.unwritten == 3 and c.mismatched == 3
    assert c.first_bad_index == (5,)
    assert c.max_abs_err == np.inf
    assert c.note == "" and c.first_unwritten_index == (5,) and c.nonfinite == 0


def test_unwritten_integer_elements():
    ref = np.arange(6, dtype=np.int32)
    out = ref.copy()
    poison(out[4:])
    c = compare("idx", out, ref, tolerance_for(np.int32))
    assert c.unwritten == 2 and c.mismatched == 2 and c.first_bad_index == (4,)
    assert not c.passed
    assert not compare("idx", ref + 1, ref, tolerance_for(np.int32)).passed


def test_nan_in_both_is_agreement():
    ref = np.array([1.0, np.nan, 3.0], dtype=np.float32)
    c = compare("y", ref.copy(), ref, F32)
    assert c.passed and c.mismatched == 0 and c.unwritten == 0


def test_shape_mismatch_fails_with_a_note():
    c = compare("y", np.zeros((4, 4), np.float32), np.zeros((3, 3), np.float32), F32)
    assert not c.passed and c.mismatched == 16 and c.size == 16
    assert c.note == "shape (4, 4) differs from the reference's (3, 3)"
    assert c.max_abs_err == np.inf


def test_scalar_reference_broadcasts():
    c = compare("s", np.full((2, 2), 3.0, np.float32), np.array([3.0], np.float32), F32)
    assert c.passed and c.size == 4


def test_same_size_reference_of_another_shape_is_reshaped():
    ref = np.arange(16, dtype=np.float32)
    assert compare("y", ref.reshape(4, 4).copy(), ref, F32).passed


def test_equal_infinities_agree():
    ref = np.array([np.inf, -np.inf, 1.0], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compare("y", ref.copy(), ref, F32).passed


def test_fully_unwritten_output_is_reported_without_warnings():
    out = np.empty(4, np.float32)
    poison(out)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = compare("y", out, np.ones(4, np.float32), F32)
    assert c.unwritten == 4 and not c.passed


# --- reference_outputs and zero_inputs ----------------------------------------------------------

def test_reference_single_array():
    got = reference_outputs([1, 2, 3], ["y"])
    assert list(got) == ["y"] and isinstance(got["y"], np.ndarray)
    assert got["y"].tolist() == [1, 2, 3]


def test_reference_tuple_and_dict():
    got = reference_outputs((np.ones(2), np.zeros(3)), ("a", "b"))
    assert got["a"].shape == (2,) and got["b"].shape == (3,)
    got = reference_outputs({"b": [5], "a": [4], "extra": [0]}, ["a", "b"])
    assert list(got) == ["a", "b"] and got["a"].tolist() == [4] and got["b"].tolist() == [5]


@pytest.mark.parametrize("result, outputs, fragment", [
    ({"a": 1}, ["a", "b"], "returned no value for ['b']"),
    ((1, 2, 3), ["a", "b"], "returned 3 values for 2 outputs"),
    (np.ones(3), ["a", "b"], "returned one value for outputs ['a', 'b']"),
])
def test_reference_errors_say_what_to_return(result, outputs, fragment):
    with pytest.raises(ValueError) as e:
        reference_outputs(result, outputs)
    assert str(e.value).startswith("[ktune] ")
    assert fragment in str(e.value)


def test_zero_inputs_names_all_zero_input_arrays_only():
    args = {"x": np.zeros(8), "w": np.arange(8.0), "y": np.zeros(8), "n": 0,
            "one": np.zeros(1), "b": np.zeros((2, 2), np.int32)}
    assert zero_inputs(args, ["y"]) == ["x", "b"]
    assert zero_inputs({"x": np.ones(4)}, []) == []
