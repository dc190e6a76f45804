"""The store never serves another problem's numbers (issue 34 item 1), on the fake CPU backend.

A stored result belongs to the kernel AND to the problem it ran on: the inputs function (its
code, literals, defaults, closure and the globals it reads, and the shapes, dtypes and scalars
it returns), the reference, and the tolerances. A sweep after any of them changed measures again;
a warm start may take its order from the old results and says so.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_ktune.api import parse_cell
from jupyter_ktune.problem_key import function_identity, inputs_signature, problem_key
from jupyter_ktune.results import Status
from jupyter_ktune.tuning import Store, tune

SRC = """# ktune: BLOCK in [1, 2, 4, 8]
import time
def scale(x, y, n):
    t = time.perf_counter() + 2e-7 * n * (1 + abs(BLOCK - 4))
    while time.perf_counter() < t:
        pass
    y[:] = 2 * x
"""
LINE = "scale --backend fake --inputs inputs --reference reference --out y --budget-ms 3"


def namespace(n: int = 256, factor: int = 2, via: str = "default") -> dict:
    """``inputs`` drawing ``n`` floats (``n`` as a default, a literal or a global) and a
    reference computing ``factor * x``: each a fresh function, as a re-run cell makes."""
    ns: dict = {"np": np, "N": n}
    body = {"default": f"def inputs(n={n}):\n",
            "literal": f"def inputs():\n    n = {n}\n",
            "global": "def inputs():\n    n = N\n"}[via]
    exec(body + "    x = np.random.rand(n)\n    return dict(x=x, y=np.empty_like(x), n=n)\n"
         f"def reference(x, y, n):\n    return {factor} * x\n", ns)
    return ns


def sweep(worker, store, ns, line=LINE):
    return tune(parse_cell(line, SRC, ns), "exhaustive", store=store, workers=[worker], top_k=0)


@pytest.mark.parametrize("via", ["default", "literal", "global"])
def test_a_sweep_after_the_problem_size_changed_measures_again(worker, tmp_path, via):
    store = tmp_path / "s.sqlite"
    small = sweep(worker, store, namespace(256, via=via))
    assert not any(e.cached for e in small.evaluations)
    assert all(e.cached for e in sweep(worker, store, namespace(256, via=via)).evaluations)
    big = sweep(worker, store, namespace(65536, via=via))
    assert not any(e.cached for e in big.evaluations)  # the bug: all 4 served at n=256's times
    assert big.best.median_ms > 10 * small.best.median_ms
    with Store(store) as s:  # both problems kept side by side: going back serves n=256 again
        assert len(s) == 8
    assert all(e.cached for e in sweep(worker, store, namespace(256, via=via)).evaluations)


def test_fixing_a_buggy_reference_measures_again_and_finds_a_winner(worker, tmp_path):
    store = tmp_path / "s.sqlite"
    buggy = sweep(worker, store, namespace(factor=3))
    assert {e.result.status for e in buggy.evaluations} == {Status.WRONG}
    assert buggy.best is None
    fixed = sweep(worker, store, namespace(factor=2))
    assert not any(e.cached for e in fixed.evaluations)  # the bug: the stored failures served
    assert fixed.best is not None and fixed.best.config == {"BLOCK": 4}


def test_changed_tolerances_measure_again(worker, tmp_path):
    store = tmp_path / "s.sqlite"
    sweep(worker, store, namespace())
    again = sweep(worker, store, namespace(), LINE + " --rtol 1e-3")
    assert not any(e.cached for e in again.evaluations)


def test_what_the_inputs_return_is_compared_too(worker, tmp_path):
    """A size no static key can see (read from a file) is caught by the input set's shapes."""
    size = tmp_path / "n.txt"
    ns = {"np": np}
    exec(f"def inputs(path={str(size)!r}):\n    n = int(open(path).read())\n"
         "    x = np.random.rand(n)\n    return dict(x=x, y=np.empty_like(x), n=n)\n"
         "def reference(x, y, n):\n    return 2 * x\n", ns)
    store = tmp_path / "s.sqlite"
    size.write_text("256")
    sweep(worker, store, ns)
    assert all(e.cached for e in sweep(worker, store, ns).evaluations)
    size.write_text("4096")
    assert not any(e.cached for e in sweep(worker, store, ns).evaluations)


def test_a_warm_start_orders_by_the_other_problems_results_and_says_so(worker, tmp_path):
    store = tmp_path / "s.sqlite"
    sweep(worker, store, namespace(256))
    warm = tune(parse_cell(LINE, SRC, namespace(4096)), "random", store=store, budget=4,
                workers=[worker], top_k=0, seed=5)
    assert not any(e.cached for e in warm.evaluations)
    assert warm.evaluations[0].result.config == {"BLOCK": 4}  # the old best, tried first
    assert "on other inputs, reference or tolerances (every config timed again)" in \
        warm.summary()


# -- the key itself --------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.integers(1, 1 << 40), st.integers(1, 1 << 40))
def test_two_inputs_functions_differing_in_one_literal_have_two_keys(a, b):
    fa, fb = namespace(a, via="literal")["inputs"], namespace(b, via="literal")["inputs"]
    assert (function_identity(fa) == function_identity(fb)) == (a == b)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["default", "global"]), st.integers(1, 1 << 30), st.integers(1, 1 << 30))
def test_defaults_and_globals_decide_the_key(via, a, b):
    fa, fb = namespace(a, via=via)["inputs"], namespace(b, via=via)["inputs"]
    assert (function_identity(fa) == function_identity(fb)) == (a == b)


def test_the_key_holds_no_address_and_follows_closures():
    def bound(n):
        def inputs():
            return dict(x=np.ones(n) + np.random.rand(n), n=n)
        return inputs

    class Opaque:  # a repr with an address in it
        pass

    assert function_identity(bound(4)) == function_identity(bound(4))
    assert function_identity(bound(4)) != function_identity(bound(8))
    ns = {"np": np, "CFG": Opaque()}
    exec("def f():\n    return CFG\n", ns)
    assert " at 0x" not in function_identity(ns["f"])


def test_the_problem_key_covers_reference_and_tolerances():
    spec = parse_cell(LINE, SRC, namespace())
    assert problem_key(spec) == problem_key(parse_cell(LINE, SRC, namespace()))
    assert problem_key(spec) != problem_key(parse_cell(LINE, SRC, namespace(factor=3)))
    assert problem_key(spec) != problem_key(parse_cell(LINE + " --atol 1e-2", SRC, namespace()))
    assert problem_key(spec) != problem_key(parse_cell(LINE + " --no-verify", SRC, namespace()))


def test_the_inputs_signature_is_shapes_dtypes_and_scalars():
    x = np.zeros(4, np.float32)
    assert inputs_signature({"x": x, "n": 4}) == inputs_signature({"n": 4, "x": x + 1})
    assert inputs_signature({"x": x, "n": 4}) != inputs_signature({"x": x, "n": 5})
    assert inputs_signature({"x": x}) != inputs_signature({"x": x.astype(np.float64)})
    assert inputs_signature({"x": x}) != inputs_signature({"x": np.zeros(5, np.float32)})
    assert inputs_signature({"n": np.int64(3)}) != inputs_signature({"n": np.int64(4)})


def test_a_list_or_dict_the_function_fills_as_it_runs_keeps_its_key():
    """A call log or a memo of drawn arrays in the closure: the key must not change per call
    (it did for any mutable value, and the worker would draw inputs for every config)."""
    memo: dict = {}

    def inputs(n=64):
        if n not in memo:
            memo[n] = np.random.rand(n)
        return dict(x=memo[n], n=n)

    before = function_identity(inputs)
    inputs()
    assert function_identity(inputs) == before
