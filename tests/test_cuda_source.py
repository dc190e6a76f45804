"""CUDA cell source on the host (jupyter_ktune.backends.cuda.source); no GPU needed.

Covers parse_signature (template kernels, __launch_bounds__, extern "C", kernels inside comments,
pointer vs scalar parameters and their NumPy types, qualifiers stripped, a missing kernel and an
untunable template parameter as CellErrors on the right cell line), name_expression,
macro_defines, device_source's #line prefix, static_source's explicit instantiation and
parse_diagnostics. Two tests run the real nvcc (skipped without it): a cell with an undeclared
identifier must be reported on its own cell line, and a template kernel's static source must
compile.
"""

import subprocess

import numpy as np
import pytest
from cuda_tools import NVCC, needs_nvcc

from jupyter_ktune.api import parse_cell
from jupyter_ktune.backends.cuda.source import (
    device_source,
    include_dir,
    macro_defines,
    name_expression,
    parse_diagnostics,
    parse_signature,
    static_source,
)
from jupyter_ktune.errors import CellError

TEMPLATE_CELL = """\
// ktune: BLOCK in [64, 128, 256]; VEC in [1, 2]; UNROLL in [1, 4]
#include <ktune.cuh>
// __global__ void scale(int fake) {}
/* __global__ void scale(double also_fake) {} */
template <int BLOCK, int VEC>
__global__ void __launch_bounds__(BLOCK) scale(const float* __restrict__ x, float *y,
                                              unsigned int n, const float alpha) {
  int i = (blockIdx.x * BLOCK + threadIdx.x) * VEC;
  for (int v = 0; v < VEC; ++v)
    if (i + v < n) y[i + v] = alpha * x[i + v];
}
"""


def _sig(body: str, name: str = "scale"):
    spec = parse_cell(name, body)
    return spec, parse_signature(spec)




# --- parse_signature ---------------------------------------------------------------------------

def test_template_kernel_signature():
    _, sig = _sig(TEMPLATE_CELL)
    assert sig.template_params == ("BLOCK", "VEC")
    assert [(p.name, p.ctype, p.pointer) for p in sig.params] == [
        ("x", "float", True), ("y", "float", True), ("n", "unsigned int", False),
        ("alpha", "float", False)]
    assert [p.scalar_type for p in sig.params] == [None, None, np.uint32, np.float32]
    assert sig.line == 7  # the line of the real declaration, not the commented-out ones


@pytest.mark.parametrize("decl", [
    'extern "C" __global__ void k(double* out, long long m, size_t s, bool flag)',
    "__global__ void __launch_bounds__(256, 2) k(double* out, long long m, size_t s, bool flag)",
    "__global__ __launch_bounds__(256) void k(double *out, long long m, size_t s, bool flag)",
    "void __global__ k(double* out,\n    long long m, size_t s, bool flag)",
])
def test_declaration_forms(decl):
    _, sig = _sig(f"// ktune: B in [1]\n\n{decl} {{}}\n", "k")
    assert sig.template_params == ()
    assert [p.name for p in sig.params] == ["out", "m", "s", "flag"]
    assert [p.scalar_type for p in sig.params] == [None, np.int64, np.uint64, np.bool_]
    assert sig.line == 4


@pytest.mark.parametrize("ctype, expected", [
    ("int", np.int32), ("const int", np.int32), ("int32_t", np.int32), ("uint64_t", np.uint64),
    ("unsigned long long", np.uint64), ("short", np.int16), ("double", np.float64),
    ("__half", None),
])
def test_scalar_types(ctype, expected):
    _, sig = _sig(f"__global__ void k({ctype} v) {{}}", "k")
    assert sig.params[0].scalar_type is expected


def test_pointer_reference_and_void_params():
    _, sig = _sig("__global__ void k(int2& a, const __half* __restrict__ b) {}", "k")
    assert [(p.name, p.ctype, p.pointer, p.scalar_type) for p in sig.params] == [
        ("a", "int2", True, None), ("b", "__half", True, None)]
    _, sig = _sig("__global__ void k(void) {}", "k")
    assert sig.params == ()


def test_a_kernel_only_in_comments_is_missing_and_the_error_lists_the_real_ones():
    body = ("// __global__ void scale(float* y) {}\n"
            "__global__ void scale_v2(float* y) {}\n"
            "__global__ __launch_bounds__(64) void other(float* y) {}\n")
    with pytest.raises(CellError) as e:
        _sig(body)
    assert e.value.line == 1
    assert "no __global__ kernel named 'scale'" in e.value.message
    assert e.value.fix.endswith("The cell defines: scale_v2, other.")


def test_missing_kernel_hint_reads_launch_bounds_after_void():
    with pytest.raises(CellError) as e:
        _sig("__global__ void __launch_bounds__(64) other(float* y) {}\n")
    assert e.value.fix.endswith("The cell defines: other.")


@pytest.mark.parametrize("body", [
    "// ktune: BLOCK in [64]\n\ntemplate <int BLOCK, int WIDTH> __global__ void k(float* y) {}",
    pytest.param("// ktune: BLOCK in [64]\n\ntemplate <int BLOCK, int WIDTH>\n"
                 "__global__ void k(float* y) {}"),
])
def test_untunable_template_parameter_names_the_template_line(body):
    with pytest.raises(CellError) as e:
        _sig(body, "k")
    assert "template parameter WIDTH is not a tunable" in e.value.message
    assert "// ktune: WIDTH in" in e.value.fix
    assert e.value.line == 4


def test_a_template_parameter_that_is_neither_a_type_nor_an_integer():
    with pytest.raises(CellError) as e:
        _sig("// ktune: X in [1]\n\ntemplate <float X> __global__ void k(float* y) {}", "k")
    assert e.value.line == 4 and "neither a type nor an integer" in e.value.message


@pytest.mark.parametrize("decl", [
    "template <typename T, int N> __global__ void k(T* y, const T* __restrict__ x, int n)",
    "template <class T, int N = 4>\n__global__ static\n__launch_bounds__(decltype(size("
    "Layout{}))::value)\nvoid\nk(T* y, const T* __restrict__ x, int n)",
])
def test_type_template_parameters_and_static_kernels_with_launch_bounds_expressions(decl):
    spec, sig = _sig(f"// ktune: N in [2, 4]\n#include <cute/tensor.hpp>\n{decl} {{}}\n", "k")
    assert sig.template_params == ("T", "N") and sig.template_types == ("T",)
    assert [(p.name, p.ctype, p.pointer) for p in sig.params] == [
        ("y", "T", True), ("x", "T", True), ("n", "int", False)]
    assert sig.template_line == 4


def test_unreadable_parameter():
    with pytest.raises(CellError) as e:
        _sig("\n__global__ void k(float*) {}", "k")
    assert e.value.line == 3 and "cannot read the kernel parameter 'float*'" in e.value.message


# --- names, macros and generated source ---------------------------------------------------------

def test_name_expression_and_macros():
    spec, sig = _sig(TEMPLATE_CELL)
    cxx = {"BLOCK": 128, "VEC": 2, "UNROLL": 4}
    assert name_expression(spec, sig, cxx) == "scale<128, 2>"
    assert macro_defines(spec, sig, cxx) == {"UNROLL": "4", "KTUNE": "1"}
    plain, psig = _sig("// ktune: B in [1]\n__global__ void scale(float* y) {}")
    assert name_expression(plain, psig, {"B": 1}) == "scale"
    assert macro_defines(plain, psig, {"B": 1}) == {"B": "1", "KTUNE": "1"}


def test_device_and_static_source():
    spec, sig = _sig(TEMPLATE_CELL)
    dev = device_source(spec)
    assert dev == '#line 2 "cell"\n' + TEMPLATE_CELL + "\n"
    static = static_source(spec, sig, {"BLOCK": 256, "VEC": 1, "UNROLL": 1})
    assert static.startswith(dev)
    assert static.endswith(
        '#line 1 "ktune-instantiation"\n'
        "template __global__ void scale<256, 1>(const float* __restrict__ x, float *y, "
        "unsigned int n, const float alpha);\n")
    plain, psig = _sig("__global__ void scale(float* y) {}")
    assert static_source(plain, psig, {}) == device_source(plain)


# --- diagnostics -------------------------------------------------------------------------------

def test_parse_diagnostics_maps_cell_lines_and_keeps_other_files_unlined():
    log = ('cell(12): error: identifier "TILE_M" is undefined\n'
           "      y[i] = TILE_M;\n"
           "             ^\n"
           'cell(5): warning #177-D: variable "u" was declared but never referenced\n'
           "/tmp/x/cell(7): remark: something\n"
           'ktune.cuh(40): error: expected a ";"\n'
           "ktune-instantiation(1): error: no instance of function template matches\n"
           "1 error detected in the compilation of \"k.cu\".\n")
    got = [(d.line, d.severity, d.message) for d in parse_diagnostics(log)]
    assert got == [
        (12, "error", 'identifier "TILE_M" is undefined'),
        (5, "warning", 'variable "u" was declared but never referenced'),
        (7, "remark", "something"),
        (None, "error", 'ktune.cuh(40): expected a ";"'),
        (None, "error", "ktune-instantiation(1): no instance of function template matches"),
    ]
    assert parse_diagnostics("nothing to see\n") == []


def _compile(tmp_path, src: str) -> subprocess.CompletedProcess:
    cu = tmp_path / "k.cu"
    cu.write_text(src)
    return subprocess.run([NVCC, "-cubin", "-arch=sm_90", "-I", str(include_dir()), str(cu),
                           "-o", str(tmp_path / "k.cubin")], capture_output=True, text=True,
                          timeout=120)


@needs_nvcc
def test_nvcc_reports_an_undeclared_identifier_on_its_cell_line(tmp_path):
    body = ("// ktune: BLOCK in [64]\n"
            "#include <ktune.cuh>\n"
            "__global__ void k(float* y) {\n"
            "  int unused = 3;\n"
            "  y[threadIdx.x] = TILE_M;\n"  # cell line 6
            "}\n")
    proc = _compile(tmp_path, device_source(parse_cell("k", body)))
    assert proc.returncode != 0
    diags = parse_diagnostics(proc.stderr)
    errors = [d for d in diags if d.severity == "error"]
    assert [d.line for d in errors] == [6], proc.stderr
    assert "TILE_M" in errors[0].message
    assert [(d.line, d.severity) for d in diags if d.line == 5] == [(5, "warning")]


@needs_nvcc
def test_nvcc_compiles_the_static_source_of_a_template_kernel(tmp_path):
    spec, sig = _sig(TEMPLATE_CELL)
    cxx = spec.space.cxx_env(spec.space.config(BLOCK=128, VEC=2))
    defines = [f"-D{k}={v}" for k, v in macro_defines(spec, sig, cxx).items()]
    cu = tmp_path / "k.cu"
    cu.write_text(static_source(spec, sig, cxx))
    proc = subprocess.run([NVCC, "-cubin", "-arch=sm_90", "-I", str(include_dir()), *defines,
                           str(cu), "-o", str(tmp_path / "k.cubin")], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert parse_diagnostics(proc.stderr) == []
    assert (tmp_path / "k.cubin").stat().st_size > 0
    assert b"_Z5scaleILi128ELi2EEvPKfPfjf" in (tmp_path / "k.cubin").read_bytes()


def test_outputs_the_kernel_reads_are_updated_in_place_not_poisoned():
    """``y[i] = f(y[i])`` reads y: a poisoned y would feed NaN into a correct kernel (seen on the
    H200 with a __half axpy); ``y[i] = 2 * x[i]`` and ``y[i] == ...`` comparisons do not."""
    from jupyter_ktune.api import parse_cell
    from jupyter_ktune.backends.cuda.source import outputs_read_in_place

    axpy = """// ktune: BLOCK in [128]; grid = cdiv(n, BLOCK); block = BLOCK
__global__ void axpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];  // reads y
}
"""
    scale = axpy.replace("a * x[i] + y[i];  // reads y", "a * x[i];  // y[i] + 1 in a comment")
    acc = axpy.replace("y[i] = a * x[i] + y[i];", "y[i] += a * x[i];")
    assert outputs_read_in_place(parse_cell("axpy --backend cuda --out y", axpy)) == {"y"}
    assert outputs_read_in_place(parse_cell("axpy --backend cuda --out y", scale)) == set()
    assert outputs_read_in_place(parse_cell("axpy --backend cuda --out y", acc)) == {"y"}
