"""CUDA C++ kernels as people write them (issue 18): template types, tunables in ``#pragma
unroll``, include folders, and compile errors that stay compile errors on a machine without a
GPU. The nvcc tests are skipped without a CUDA toolkit; nothing here needs a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest
from cuda_tools import needs_nvcc

from jupyter_ktune.api import parse_cell
from jupyter_ktune.backends.cuda.backend import CudaBackend
from jupyter_ktune.backends.cuda.includes import header_hint, include_dirs, resolve
from jupyter_ktune.backends.cuda.source import name_expression, parse_signature, static_source
from jupyter_ktune.backends.cuda.templates import literal_pragmas, type_arguments
from jupyter_ktune.errors import CellError, CompileFailure
from jupyter_ktune.results import Status
from jupyter_ktune.runner.execute import run_variant

SCALE = """\
// ktune: FACTOR in [1, 4]; BLOCK in [128, 256]; grid = cdiv(n, BLOCK); block = BLOCK
template <typename T, int BLOCK>
__global__ void scale(T* y, const T* __restrict__ x, T alpha, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
#pragma unroll FACTOR
  for (int k = 0; k < 4; ++k)
    if (i < n) y[i] = alpha * x[i];
}
"""


def half_inputs():
    x = np.random.rand(300).astype(np.float16)
    return dict(y=np.empty_like(x), x=x, alpha=2.0, n=300)


def float_inputs():
    x = np.random.rand(300).astype(np.float32)
    return dict(y=np.empty_like(x), x=x, alpha=2.0, n=300)


def _spec(body=SCALE, inputs=float_inputs, extra=""):
    return parse_cell(f"scale --backend cuda --inputs inputs {extra}", body, {"inputs": inputs})


@pytest.mark.parametrize("inputs, ctype", [(float_inputs, "float"), (half_inputs, "__half")])
def test_a_type_template_parameter_takes_the_dtype_of_the_input_passed_as_its_pointer(
        inputs, ctype):
    spec = _spec(inputs=inputs)
    sig = parse_signature(spec)
    types = type_arguments(spec, sig)
    assert types == {"T": ctype}
    assert name_expression(spec, sig, {"BLOCK": 128, "FACTOR": 4}, types) == f"scale<{ctype}, 128>"
    static = static_source(spec, sig, {"BLOCK": 128, "FACTOR": 4}, types)
    assert static.endswith(f"template __global__ void scale<{ctype}, 128>({ctype}* y, "
                           f"const {ctype}* __restrict__ x, {ctype} alpha, int n);\n")


def test_a_type_directive_wins_and_a_type_nobody_gives_is_an_error_on_the_template_line():
    spec = _spec("// ktune: T = double\n" + SCALE)
    assert type_arguments(spec, parse_signature(spec)) == {"T": "double"}
    bare = parse_cell("scale --backend cuda", SCALE)  # no inputs, no directive
    with pytest.raises(CellError) as e:
        type_arguments(bare, parse_signature(bare))
    assert e.value.line == 3 and "template type T of scale has no type" in e.value.message
    assert "// ktune: T = float" in e.value.fix
    wrong = _spec("// ktune: U = float\n" + SCALE)
    with pytest.raises(CellError) as e:
        type_arguments(wrong, parse_signature(wrong))
    assert e.value.line == 2 and "names no type template parameter" in e.value.message


def test_a_type_passed_by_value_that_nothing_gives_says_number_or_class():
    """CuTe's tutorial GEMM takes its shapes and layouts by value (``ProblemShape shape_MNK``);
    the message said "no kernel parameter is a ProblemShape*" and offered ``= float``."""
    body = ("template <class ProblemShape, class T>\n"
            "__global__ void k(ProblemShape shape, T* y) { y[0] = 0; }\n")
    spec = parse_cell("k --backend cuda", "// ktune: T = float\n" + body)
    with pytest.raises(CellError) as e:
        type_arguments(spec, parse_signature(spec))
    assert e.value.line == 3  # the template line (1 is %%kernel, 2 the directive)
    assert "ProblemShape of k is the type of parameter shape, passed by value" in e.value.message
    assert "// ktune: ProblemShape = float" in e.value.fix and "__global__ wrapper" in e.value.fix


def test_a_defaulted_type_parameter_keeps_its_default():
    body = "template <typename T = float>\n__global__ void k(int* y) {}\n"
    spec = parse_cell("k --backend cuda", body)
    assert type_arguments(spec, parse_signature(spec)) == {"T": "float"}


def test_tunables_given_as_macros_become_literals_in_pragma_unroll():
    src = "  #pragma unroll FACTOR\n#pragma unroll\n#pragma unroll (FACTOR * 2)\nint FACTOR;\n"
    assert literal_pragmas(src, {"FACTOR": 4}) == (
        "  #pragma unroll 4\n#pragma unroll\n#pragma unroll (4 * 2)\nint FACTOR;\n")


@needs_nvcc
def test_nvcc_compiles_a_typename_template_kernel_with_a_tunable_unroll_pragma():
    spec = _spec(inputs=half_inputs)
    report = CudaBackend().static_report(spec, spec.space.config(FACTOR=4, BLOCK=256))
    (kernel,) = report.kernels.values()
    assert "scale<__half, 256>" in kernel.demangled


def test_include_folders_by_path_or_installed_package(tmp_path):
    spec = _spec(f"// ktune: include {tmp_path}\n// ktune: include = jupyter_ktune:include\n"
                 + SCALE, extra="--include numpy:_core")
    got = include_dirs(spec)
    assert got[0].name == "_core" and got[1] == tmp_path and got[2].name == "include"
    assert resolve("no_such_package_here:include") is None
    missing = _spec("\n// ktune: include /no/such/folder\n" + SCALE)
    with pytest.raises(CellError) as e:
        include_dirs(missing)
    assert e.value.line == 3 and "/no/such/folder" in e.value.message
    with pytest.raises(CellError) as e:  # a CUDA directive in a Python cell
        parse_cell("k --backend triton", "# ktune: include /x\n")
    assert e.value.line == 2 and "CUDA C++ directive" in e.value.message


def test_a_missing_header_names_the_directive_that_finds_it_in_an_installed_wheel():
    cutlass = resolve("cutlass_library:source/include")
    if cutlass is None:
        pytest.skip("nvidia-cutlass is not installed")
    hint = header_hint('cannot open source file "cutlass/cutlass.h"')
    assert hint.startswith("Add: // ktune: include cutlass_library:source/include")
    assert "ktune: include DIR" in header_hint("nope/none.h: No such file or directory")
    assert header_hint("expected a ;") == ""


@needs_nvcc
@pytest.mark.parametrize("body, line, words, status", [
    ('#include "no/such/header.h"\n__global__ void k(float* y) { y[0] = 1; }\n', 2,
     "no/such/header.h", Status.COMPILE_ERROR),
    # ptxas's "uses too much shared data" names its cause: out of resources (issue 38)
    ("\n__global__ void k(float* y) {\n  __shared__ float s[100000];\n"
     "  s[threadIdx.x] = y[0]; __syncthreads(); y[1] = s[threadIdx.x + 1];\n}\n", 3,
     "ptxas: Entry function", Status.OUT_OF_RESOURCES),
])
def test_on_a_machine_without_a_gpu_a_failed_compile_is_labelled_by_cause_on_its_line(
        body, line, words, status, monkeypatch, tmp_path):
    monkeypatch.setenv("KTUNE_CACHE_DIR", str(tmp_path))
    spec = parse_cell("k --backend cuda --grid 1 --block 32", body)
    with pytest.raises(CompileFailure) as e:
        CudaBackend().static_report(spec, spec.space.config())
    first = e.value.diagnostics[0]
    assert first.line == line and words in first.message, e.value.diagnostics
    backend = CudaBackend()
    if backend.device().available:
        pytest.skip("a GPU is here: the run path loads the cubin and runs it")
    result = run_variant(spec, spec.space.config())
    assert result.status is status, result.reason
    assert f"cell line {line}:" in result.reason and words in result.reason


def test_a_block_over_the_threads_per_block_limit_is_refused_without_a_require_line():
    spec = parse_cell("k --backend cuda --grid 1", "// ktune: BLOCK in [256, 2048]; block = BLOCK\n"
                      "__global__ void k(float* y) { y[threadIdx.x] = 1; }\n")
    with pytest.raises(CompileFailure) as e:
        CudaBackend().static_report(spec, spec.space.config(BLOCK=2048))
    d = e.value.diagnostics[0]
    assert d.line == 2 and "a block of 2048 threads; a CUDA block has at most 1024" in d.message
    assert "require BLOCK <= MAX_THREADS_PER_BLOCK" in d.message
