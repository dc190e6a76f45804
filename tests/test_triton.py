"""Triton backend on a CPU machine: the interpreter runs and verifies, sm_90 compiles ahead of time.

The worker decides the mode itself (no GPU visible -> ``TRITON_INTERPRET=1`` before importing
triton); ``KTUNE_FORCE_INTERPRET=1`` makes the same choice on a GPU machine, so these tests mean
the same thing everywhere.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from example_notebooks import run_example

from jupyter_ktune.api import parse_cell, run_kernel
from jupyter_ktune.errors import CellError
from jupyter_ktune.results import Status

pytest.importorskip("triton")
pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("triton_interpreter")

def vadd_inputs():
    x = np.random.rand(1000).astype(np.float32)
    y = np.random.rand(1000).astype(np.float32)
    return dict(x=x, y=y, out=np.empty_like(x), n=1000)


def vadd_reference(x, y, out, n):
    return x + y


VADD = """# ktune: BLOCK in pow2(64, 256); num_warps in [2, 4]
# ktune: grid = cdiv(n, BLOCK)
@triton.jit
def vadd(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)
"""
WRONG = VADD.replace("mask=mask) + tl.load", "mask=mask) - tl.load")
HALF = VADD.replace("mask = offs < n", "mask = offs < n // 2")  # never writes the upper half
COMPILE_ERROR = VADD.replace("tl.arange(0, BLOCK)", "tl.arange(0, BLOCK) + undefined_name")

NS = {"inputs": vadd_inputs, "reference": vadd_reference}
LINE = "vadd --backend triton --inputs inputs --reference reference --out out --budget-ms 5"


def mm_inputs(M=64, N=64, K=64):
    import ml_dtypes

    a = np.random.randn(M, K).astype(ml_dtypes.bfloat16)
    b = np.random.randn(K, N).astype(ml_dtypes.bfloat16)
    return dict(a=a, b=b, c=np.empty((M, N), dtype=ml_dtypes.bfloat16), M=M, N=N, K=K)


def mm_reference(a, b, c, M, N, K):
    return a.astype(np.float32) @ b.astype(np.float32)


MATMUL = """# ktune: BLOCK_M in pow2(16, 64); BLOCK_N in pow2(16, 64); BLOCK_K in [16, 32]
# ktune: num_warps in [4, 8]; num_stages in [2, 3]
# ktune: grid = cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N); flops = 2 * M * N * K
@triton.jit
def matmul(a, b, c, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
           BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    pm, pn = pid // tl.cdiv(N, BLOCK_N), pid % tl.cdiv(N, BLOCK_N)
    rm = pm * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16))
"""
MM_NS = {"inputs": mm_inputs, "reference": mm_reference}
MM_LINE = "matmul --backend triton --inputs inputs --reference reference --out c --budget-ms 5"


def test_vadd_runs_verified_under_the_interpreter_with_host_time(worker):
    spec = parse_cell(LINE, VADD, NS)
    r = run_kernel(spec, {"BLOCK": 128, "num_warps": 4}, worker=worker)
    assert r.status is Status.OK, r.reason
    assert r.verification.passed and r.verification.max_abs_err < 1e-6
    assert r.device == "CPU (Triton interpreter)"
    method = r.measurement.timing.method
    assert "Triton interpreter, host time (not GPU time)" in method
    assert r.measurement.timing.l2_flush_bytes == 0
    assert r.launch["grid"] == (8,) and r.launch["block"] == (128, 1, 1)


def test_bf16_matmul_verifies_and_static_report_shows_tensor_cores(worker):
    spec = parse_cell(MM_LINE, MATMUL, MM_NS)
    r = run_kernel(spec, {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "num_warps": 4,
                          "num_stages": 2}, worker=worker)
    assert r.status is Status.OK, r.reason
    assert r.verification.passed
    k = r.static.kernel("matmul")
    assert r.static.arch == "sm_90" and "triton" in r.static.versions
    assert k.registers > 0 and k.sass is not None and k.sass.instructions > 0
    assert k.sass.uses_tensor_cores  # HGMMA or HMMA: a bf16 tl.dot must reach the tensor cores
    assert r.static.threads_per_block == 128


def test_wrong_kernel_is_caught(worker):
    r = run_kernel(parse_cell(LINE, WRONG, NS), {"BLOCK": 64, "num_warps": 2}, worker=worker)
    assert r.status is Status.WRONG
    assert not r.verification.passed


def test_unwritten_outputs_are_found_through_the_device_side_poison(worker):
    """The outputs are poisoned by a fill on the device tensor; what the kernel never wrote
    must still read back as poison, with the first unwritten index."""
    r = run_kernel(parse_cell(LINE, HALF, NS), {"BLOCK": 64, "num_warps": 2}, worker=worker)
    assert r.status is Status.WRONG
    check = r.verification.checks[0]
    assert check.unwritten == 500 and check.first_bad_index == (500,), check


def test_compile_error_points_at_the_cell_line(worker):
    r = run_kernel(parse_cell(LINE, COMPILE_ERROR, NS), {"BLOCK": 64, "num_warps": 2},
                   worker=worker)
    assert r.status is Status.COMPILE_ERROR, r.reason
    # cell line 1 is %%kernel, so the body's line 5 (offs = ...) is cell line 6
    assert r.diagnostics and r.diagnostics[0].line == 6, r.diagnostics
    assert "undefined_name" in r.reason and "cell line 6" in r.reason


def test_python_syntax_error_points_at_the_cell_line(worker):
    src = VADD.replace("mask = offs < n", "mask = offs <")
    with pytest.raises(CellError, match="cell line 7"):
        run_kernel(parse_cell(LINE, src, NS), worker=worker)


def test_missing_input_names_the_parameter(worker):
    def inputs():
        d = vadd_inputs()
        del d["y"]
        return d

    r = run_kernel(parse_cell(LINE, VADD, {**NS, "inputs": inputs}), {"BLOCK": 64,
                   "num_warps": 2}, worker=worker)
    assert r.status is Status.RUNTIME_ERROR, r.reason  # found when the launch binds arguments
    assert "'y' has no value" in r.reason and "cell line 5" in r.reason


def test_kernel_not_found_and_constexpr_not_tunable():
    with pytest.raises(CellError, match="'vsub' is not in the cell.*defines: vadd"):
        run_kernel(parse_cell(LINE.replace("vadd", "vsub", 1), VADD, NS))
    src = VADD.replace("BLOCK in pow2(64, 256); ", "")
    # without --inputs nothing can give BLOCK (with them, the worker checks: test_triton_idioms)
    with pytest.raises(CellError, match=r"cell line 5: constexpr parameter BLOCK .*ktune: BLOCK"):
        run_kernel(parse_cell(LINE.replace("--inputs inputs ", ""), src, NS))
    src = VADD.replace("num_warps in [2, 4]", "WARPS in [2, 4]")
    with pytest.raises(CellError, match="tunable WARPS is neither"):
        run_kernel(parse_cell(LINE, src, NS))


def test_static_report_aot_for_sm90_in_the_notebook_process_free_worker(worker):
    spec = parse_cell(MM_LINE + " --static-only", MATMUL, MM_NS)
    r = run_kernel(spec, {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4,
                          "num_stages": 3}, worker=worker)
    assert r.status is Status.CANNOT_RUN and "static" in r.reason
    k = r.static.kernel("matmul")
    assert k.registers > 0 and k.smem_static > 0
    assert k.sass.uses_wgmma, dict(k.sass.opcodes)  # sm_90 Triton emits HGMMA for this tile
    assert "<table" in r.static._repr_html_()


def test_notebook_process_does_not_import_triton():
    import subprocess

    code = ("import sys; from jupyter_ktune.backends import get_backend; "
            "from jupyter_ktune.api import parse_cell; "
            f"get_backend('triton').check(parse_cell('vadd --backend triton', {VADD!r})); "
            "print('triton' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_matmul_example_notebook_runs():
    text = run_example("matmul_triton.ipynb")  # its kernel inherits KTUNE_FORCE_INTERPRET=1
    assert "ktune-result" in text
    assert "Triton interpreter" in text and "correct" in text
    assert "static report for sm_90" in text


def test_argument_types_come_from_one_inputs_call_per_cell():
    """A sweep must not regenerate the inputs for every config just to read their dtypes."""
    from jupyter_ktune.backends.triton.backend import TritonBackend
    from jupyter_ktune.backends.triton.cell import check_cell

    calls = []

    def counted_inputs():
        calls.append(1)
        x = np.random.rand(64).astype(np.float32)
        return dict(x=x, y=np.empty_like(x), n=64)

    spec = parse_cell("add --backend triton --inputs inputs --out y",
                      "# ktune: BLOCK in [16, 32, 64]; grid = (cdiv(n, BLOCK),)\n"
                      "@triton.jit\n"
                      "def add(x, y, n, BLOCK: tl.constexpr):\n"
                      "    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
                      "    tl.store(y + o, tl.load(x + o, mask=o < n), mask=o < n)\n",
                      {"inputs": counted_inputs})
    backend = TritonBackend()
    sig = check_cell(spec)
    kernel = object()
    for block in (16, 32, 64):
        types, _, _ = backend._argument_types(spec, sig, kernel, spec.space.cxx_env(
            spec.space.config(BLOCK=block)))
    assert len(calls) == 1 and set(types) == {"x", "y", "n"}


def test_argument_types_are_keyed_by_the_inputs_functions_literals_too():
    """Two inputs functions differing only in a literal (n=4096, n=8192; float32, float64) once
    shared one key (code bytes and defaults), so the second cell kept the first one's n and dtype
    (issue 34)."""
    from jupyter_ktune.backends.triton.backend import TritonBackend
    from jupyter_ktune.backends.triton.cell import check_cell

    backend = TritonBackend()

    def given(n, dtype):
        ns = {"np": np}
        exec(f"def inputs():\n    x = np.random.rand({n}).astype(np.{dtype})\n"
             f"    return dict(x=x, y=np.empty_like(x), n={n})\n", ns)
        spec = parse_cell("add --backend triton --inputs inputs --out y",
                          "# ktune: BLOCK in [16]; grid = (cdiv(n, BLOCK),)\n@triton.jit\n"
                          "def add(x, y, n, BLOCK: tl.constexpr):\n"
                          "    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
                          "    tl.store(y + o, tl.load(x + o, mask=o < n), mask=o < n)\n", ns)
        types, _, values = backend._argument_types(spec, check_cell(spec), object(), {})
        return values["n"], types["x"]

    assert given(4096, "float32") == (4096, "*fp32")
    assert given(8192, "float32") == (8192, "*fp32")
    assert given(8192, "float64") == (8192, "*fp64")


ACT = """# ktune: ACTIVATION in [relu, leaky_relu]; BLOCK in [128]
# ktune: grid = cdiv(n, BLOCK)
@triton.jit
def act(x, y, out, n, ACTIVATION: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x + offs, mask=mask) - 0.5
    if ACTIVATION == "leaky_relu":
        v = tl.where(v > 0, v, 0.01 * v)
    else:
        v = tl.maximum(v, 0.0)
    tl.store(out + offs, v, mask=mask)
"""


def leaky_reference(x, y, out, n):
    v = x - 0.5
    return np.where(v > 0, v, 0.01 * v)


def test_a_choice_tunable_reaches_the_kernel_as_its_name_not_its_index(worker):
    """Issue 15: ACTIVATION arrived as 0/1, so the string branch never ran."""
    spec = parse_cell(LINE.replace("vadd", "act"), ACT,
                      {"inputs": vadd_inputs, "reference": leaky_reference})
    leaky = run_kernel(spec, {"ACTIVATION": "leaky_relu"}, worker=worker)
    assert leaky.status is Status.OK, leaky.reason
    relu = run_kernel(spec, {"ACTIVATION": "relu"}, worker=worker)
    assert relu.status is Status.WRONG  # relu differs from the leaky reference below zero


@pytest.mark.parametrize("src, line, words", [
    (VADD, LINE + " --param BLOCK=abc", "BLOCK"),
    (VADD, LINE + " --param num_warps=four", "num_warps is a launch option"),
    (VADD.replace("BLOCK: tl.constexpr", "BLOCK: tl.constexpr = 64"),
     LINE + " --param BLOCK=64,big", "takes int values"),
    (ACT.replace("ACTIVATION: tl.constexpr, BLOCK: tl.constexpr",
                 "BLOCK: tl.constexpr, ACTIVATION: tl.constexpr = 'relu'"),
     LINE.replace("vadd", "act") + " --param ACTIVATION=1,2", "takes str values"),
    (ACT, LINE.replace("vadd", "act") + " --param ACTIVATION=1,2", "takes str values"),
])
def test_tunable_values_of_the_wrong_kind_are_one_line_errors(src, line, words):
    from jupyter_ktune.backends import get_backend

    spec = parse_cell(line, src, NS)
    with pytest.raises(CellError) as err:
        get_backend("triton").check(spec)
    assert words in str(err.value) and "\n" not in str(err.value)
    assert "cell line 1" in str(err.value)
