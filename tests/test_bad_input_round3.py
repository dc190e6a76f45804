"""Issue 34, deliverable 7: every bad input the probes found gets one ``[ktune]`` line that names
the cell line and the fix, by class: tracebacks, hangs, wrong or misattributed verdicts, unclear
messages, inputs silently accepted.

Each test reads a message as the user sees it: one line, starting ``[ktune]``, naming the cell
line, with words of the fix. Parse-time checks are fuzzed with hypothesis; checks that need the
inputs (made in the worker) run end to end on the fake backend, Triton's only on the Triton
interpreter.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_reliability_fuzz import NS as FUZZ_NS

from jupyter_ktune.api import parse_cell
from jupyter_ktune.directives import Expr
from jupyter_ktune.errors import CellError
from jupyter_ktune.launch_geometry import GRID_LIMITS, dims
from jupyter_ktune.results import Status
from jupyter_ktune.spec import _line_parser
from jupyter_ktune.user_code import call_user

FEW = settings(max_examples=150, deadline=None, database=None,
               derandomize=not os.environ.get("KTUNE_FUZZ_RANDOM"))


def one_line(text: str, line: int, *fix_words: str) -> str:
    """Assert ``text`` is one ktune line naming cell line ``line`` and the fix's words."""
    assert text.startswith("[ktune] ") and "\n" not in text, text
    assert f"cell line {line}:" in text, text
    for w in fix_words:
        assert w in text, (w, text)
    assert "Traceback" not in text and "jupyter_ktune/" not in text, text
    return text


def parse_error(line: str, body: str = "", ns: dict | None = None) -> str:
    with pytest.raises(CellError) as e:
        parse_cell(line, body, {**FUZZ_NS, **(ns or {})})
    return str(e.value)


# --- inputs for the end-to-end cases (fake backend: the cell is Python over NumPy) -----------
N = 64


def inputs():
    x = np.random.rand(N).astype(np.float32)
    return dict(x=x, y=np.empty_like(x), n=N)


def reference(x, y, n):
    return 2 * x


def deeper(x):
    return x["missing"]


def inputs_that_raise():
    x = np.random.rand(N).astype(np.float32)
    return deeper(dict(x=x))  # a KeyError two frames into the user's code


def reference_none(x, y, n):
    np.multiply(x, 2, out=y)  # writes its argument, returns nothing


def reference_nan(x, y, n):
    return np.full_like(x, np.nan)


def reference_raises(x, y, n):
    return {"y": 2 * x}["z"]


def inputs_empty():
    return dict(x=np.empty(0, np.float32), y=np.empty(0, np.float32), n=0)


def inputs_aliased():
    x = np.random.rand(N).astype(np.float32)
    return dict(x=x, y=x, n=N)


def inputs_view_aliased():
    x = np.random.rand(2 * N).astype(np.float32)
    return dict(x=x[:N], y=x[N // 2:N // 2 + N], n=N)


def inputs_with_block():
    return {**inputs(), "BLOCK": 7}


NS = {k: v for k, v in globals().items() if callable(v) and (
    k.startswith("inputs") or k.startswith("reference"))}
FAKE = """# ktune: BLOCK in [1, 2]
def scale(x, y, n):
    y[:] = 2 * x
"""
LINE = "scale --backend fake --inputs {i} --reference {r} --out y --budget-ms 1"


def fake_run(worker, inputs_fn="inputs", reference_fn="reference", extra=""):
    spec = parse_cell(LINE.format(i=inputs_fn, r=reference_fn) + extra, FAKE, NS)
    return worker.run(spec, spec.space.default())


# === 1. tracebacks ==========================================================================

@pytest.mark.parametrize("ref, words", [
    ("os:system", ["'os' is a frozen module", "Name a kernel defined in a package's .py file"]),
    ("sys:exit", ["'sys' is a built-in module", "Name a kernel"]),
])
def test_from_a_module_without_source_is_one_line(ref, words):
    one_line(parse_error(f"--backend triton --from {ref}", "# ktune: B in [1]\n"), 1, *words)


@FEW
@given(st.sampled_from([KeyError, ValueError, ZeroDivisionError, RuntimeError, AssertionError]),
       st.text(max_size=40), st.integers(0, 4))
def test_an_inputs_function_that_raises_is_one_line_with_the_users_frame(kind, text, depth):
    """Whatever the user's function raises, at whatever depth of its own helpers: one line
    naming the flag, the function, the exception and the frame it came from."""
    def helper(k):
        if k == 0:
            raise kind(text)
        return helper(k - 1)

    def make_inputs():
        return helper(depth)

    with pytest.raises(CellError) as e:
        call_user("inputs", make_inputs)
    one_line(str(e.value), 1, "--inputs make_inputs() raised", kind.__name__,
             "in helper, line", "Fix make_inputs")


def test_an_inputs_function_that_raises_in_the_worker(worker):
    r = fake_run(worker, inputs_fn="inputs_that_raise")
    assert r.status is Status.RUNTIME_ERROR
    one_line(r.reason, 1, "--inputs inputs_that_raise() raised KeyError", "in deeper, line")


# === 2. hangs ===============================================================================

@FEW
@given(st.integers(129, 100_000))
def test_pow2_over_the_value_limit_is_refused_at_once(bits):
    """pow2(1, 2**bits) with more than 4,096 values (written in hex, which int() reads at any
    size) or beyond what an expression may compute: refused on its line, never listed."""
    hi = f"0x1{'0' * (bits // 4)}" if bits > 4096 else f"1 << {bits}"
    msg = one_line(parse_error("k --backend fake", f"# ktune: K in pow2(1, {hi})\n"), 2,
                   "Write K in pow2(")
    if bits > 4096:
        assert "more than a slider or a sweep can use (4096)" in msg and len(msg) < 400


@FEW
@given(st.integers(0, 2), st.integers(1, 10**40))
def test_a_grid_beyond_cudas_limits_is_refused_before_the_launch(axis, excess):
    grid = [1, 1, 1]
    grid[axis] = GRID_LIMITS[axis] + excess
    with pytest.raises(CellError) as e:
        dims(tuple(grid), Expr("BLOCK * 10**30", 3, "grid"), "grid")
    one_line(str(e.value), 3, "beyond CUDA's limit", "a grid counts blocks")


# === 3. wrong or misattributed verdicts =====================================================

@pytest.mark.parametrize("reference_fn, words", [
    ("reference_none", ["--reference reference_none() returned None", "Return the expected y"]),
    ("reference_nan", ["--reference reference_nan() returned only NaN for output y"]),
    ("reference_raises", ["--reference reference_raises() raised KeyError", "Fix reference_"]),
])
def test_a_broken_reference_is_the_references_error(worker, reference_fn, words):
    r = fake_run(worker, reference_fn=reference_fn)
    assert r.status is Status.RUNTIME_ERROR and r.verification is None, r.reason
    one_line(r.reason, 1, *words)
    assert "rel-L2" not in r.reason


def test_outputs_with_no_elements_are_refused(worker):
    r = fake_run(worker, inputs_fn="inputs_empty")
    assert r.status is Status.RUNTIME_ERROR and "correct" not in r.reason
    one_line(r.reason, 1, "output y from the inputs function has no elements")


@FEW
@given(st.sampled_from(["--rtol", "--atol"]),
       st.one_of(st.floats(max_value=-1e-300), st.sampled_from([math.inf, -math.inf, math.nan])))
def test_tolerances_that_pass_anything_or_nothing_are_refused(flag, value):
    one_line(parse_error(f"scale --backend fake {flag}={value!r}", FAKE), 1,
             f"{flag} ", "is not a tolerance", f"Write {flag} ")


def test_a_tunable_named_like_an_input_is_refused(worker):
    r = fake_run(worker, inputs_fn="inputs_with_block")
    one_line(r.reason, 2, "tunable BLOCK is also an input", "Rename one of them")


# === 4. unclear messages ====================================================================

GRIDS = st.one_of(
    st.text("abcxyz0123 ", max_size=6).map(repr),                      # 'abc'
    st.lists(st.integers(1, 8), min_size=4, max_size=6).map(lambda v: repr(tuple(v))),  # 4-D
    st.integers(-10**6, 0).map(str),                                    # <= 0
    st.tuples(st.integers(1, 8), st.integers(-5, 0)).map(repr))


@FEW
@given(GRIDS, st.sampled_from(["grid", "block"]))
def test_a_grid_or_block_that_is_not_one_to_three_positive_sizes(expr, what):
    msg = one_line(parse_error("scale --backend fake", f"# ktune: {what} = {expr}\n" + FAKE), 2,
                   f"{what} = ")
    assert "Fold dimensions" in msg or "at least 1" in msg or "not a number" in msg, msg


def test_strings_and_lists_for_triton_arrays_name_the_input(triton_worker):
    for inputs_fn, kind in (("inputs_str", "str"), ("inputs_list", "list")):
        r = triton_worker.run(*triton_spec(inputs_fn))
        assert r.status is Status.RUNTIME_ERROR
        one_line(r.reason, 1, f"input x is a {kind}", "np.asarray(x, dtype=np.float32)")


@FEW
@given(st.sampled_from(["nan", "inf", "-inf", "0", "-1", "-1e-9"]))
def test_a_budget_that_is_not_a_time_is_refused(value):
    one_line(parse_error(f"scale --backend fake --budget-ms={value}", FAKE), 1,
             "is not a time budget", "Write --budget-ms 200")


@FEW
@given(st.integers(4098, 10**30), st.sampled_from(["{n}", "1, {n}", "0, {n}, 1"]))
def test_a_range_too_long_says_so_with_the_limit(n, args):
    for text in (args.format(n=n), args.format(n=f"10**{len(str(n))}")):
        msg = one_line(parse_error("k --backend fake", f"# ktune: K in range({text})\n"), 2,
                       "values, more than a slider or a sweep can use (4096)", "shorter range")
        assert "takes integers" not in msg


FLAGS = sorted(o for o in _line_parser()._option_string_actions if o.startswith("--")
               and len(o) > 6)


@FEW
@given(st.sampled_from(FLAGS), st.data())
def test_a_misspelled_flag_gets_did_you_mean(flag, data):
    """One letter dropped, doubled or swapped in a flag: the message names that flag."""
    i = data.draw(st.integers(3, len(flag) - 2))
    typo = data.draw(st.sampled_from([flag[:i] + flag[i + 1:], flag[:i] + flag[i] + flag[i:],
                                      flag[:i] + flag[i + 1] + flag[i] + flag[i + 2:]]))
    if typo == flag or any(o.startswith(typo) for o in FLAGS):
        return  # a prefix argparse accepts as the flag itself
    msg = one_line(parse_error(f"scale --backend fake {typo} x", FAKE), 1,
                   f"unknown flag {typo}", "Did you mean --")
    assert msg.endswith(f"Did you mean {flag}?"), msg


# === 5. silently accepted ===================================================================

@pytest.mark.parametrize("inputs_fn", ["inputs_aliased", "inputs_view_aliased"])
def test_an_output_sharing_memory_with_an_input_is_refused(worker, inputs_fn):
    r = fake_run(worker, inputs_fn=inputs_fn)
    assert r.status is Status.RUNTIME_ERROR, r.reason
    one_line(r.reason, 1, "output y and x are the same memory", "name it in --out")


@FEW
@given(st.one_of(
    st.floats(0.01, 1e6).filter(lambda v: not float(v).is_integer()).map(lambda v: ("grid", v)),
    st.integers(-10**6, 0).map(lambda v: ("block", v)),
    st.integers(-10**6, -1).map(lambda v: ("smem", v))), st.booleans())
def test_constant_geometry_mistakes_are_refused_at_parse_time(case, on_the_magic_line):
    what, value = case
    if on_the_magic_line:
        text = parse_error(f"scale --backend fake --{what}={value!r}", FAKE)
    else:
        text = parse_error("scale --backend fake", f"# ktune: {what} = {value!r}\n" + FAKE)
    one_line(text, 1 if on_the_magic_line else 2, f"{what} = ")


def test_block_and_smem_in_a_triton_cell_are_refused():
    pytest.importorskip("triton")
    from jupyter_ktune.backends import get_backend

    for flag, fix in (("--block 128", "num_warps"), ("--smem 1024", "Remove it")):
        spec = parse_cell(TRITON_LINE.format(i="inputs") + " " + flag, TRITON, NS)
        with pytest.raises(CellError) as e:
            get_backend("triton").check(spec)
        one_line(str(e.value), 1, "has no effect in a Triton cell", fix)


# --- Triton, in the interpreter --------------------------------------------------------------
TRITON = """# ktune: BLOCK in [64]
# ktune: grid = cdiv(n, BLOCK)
@triton.jit
def scale(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y + offs, 2 * tl.load(x + offs, mask=mask), mask=mask)
"""
TRITON_LINE = "scale --backend triton --inputs {i} --reference reference --out y --budget-ms 1"


def inputs_str():
    return dict(x="abc", y=np.empty(3, np.float32), n=3)


def inputs_list():
    return dict(x=[1.0, 2.0, 3.0], y=np.empty(3, np.float32), n=3)


NS.update(inputs_str=inputs_str, inputs_list=inputs_list)


def triton_spec(inputs_fn, body=TRITON):
    spec = parse_cell(TRITON_LINE.format(i=inputs_fn), body, NS)
    return spec, spec.space.default()


@pytest.fixture(scope="module")
def triton_worker(triton_interpreter):
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    from jupyter_ktune.runner.client import DeviceWorker

    with DeviceWorker() as w:
        yield w


def test_a_huge_grid_is_refused_in_the_worker_not_timed_out(triton_worker):
    """grid = BLOCK * 10**30 names a tunable, so it is known only per config: the worker
    refuses it before the launch (it ran the interpreter to the timeout, blaming the loops)."""
    body = TRITON.replace("grid = cdiv(n, BLOCK)", "grid = BLOCK * 10**30")
    spec, config = triton_spec("inputs", body)
    r = triton_worker.run(spec.with_options(timeout_s=120), config)
    assert r.status is Status.RUNTIME_ERROR, r.reason
    one_line(r.reason, 3, "grid = BLOCK * 10**30 gave", "beyond CUDA's limit")
    assert "loops" not in r.reason
