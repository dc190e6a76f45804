"""Compiler controls as tunables (issue 38 item 2), applied by Triton: name_prefix, maxnreg.

Triton renames the kernel it runs and caps its registers without a GPU: its interpreter runs
the renamed kernel, and its own sm_90 compile shows the names and register counts; a cap too low
fails in ptxas's words; a kernel parameter with a reserved tunable name is refused. The CUDA
C++, NVRTC, parsing and sweep tests are in test_compiler_controls.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from jupyter_ktune.api import parse_cell
from jupyter_ktune.errors import CellError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from compiler_controls import MM_BODY  # noqa: E402 - the cell the GPU bench runs


# -- Triton: the interpreter runs the renamed kernel; sm_90 compiles without a GPU ------------
def _inputs():
    x = np.random.rand(1000).astype(np.float32)
    return dict(x=x, y=x.copy(), out=np.empty_like(x), n=1000)


def _reference(x, y, out, n):
    return x + y


VADD = """# ktune: BLOCK in [128]; name_prefix in ["", "cutlass_"]
# ktune: grid = cdiv(n, BLOCK)
@triton.jit
def vadd(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)
"""
TRITON_LINE = "vadd --backend triton --inputs inputs --reference reference --out out --budget-ms 5"

MM = """# ktune: BLOCK in [128]; maxnreg in [128, 255]; num_warps in [4]
# ktune: grid = cdiv(M, BLOCK) * cdiv(N, BLOCK)
""" + MM_BODY


def _mm_inputs(M=128, N=128, K=64):
    a = np.random.randn(M, K).astype(np.float32)
    b = np.random.randn(K, N).astype(np.float32)
    return dict(a=a, b=b, c=np.empty((M, N), dtype=np.float32), M=M, N=N, K=K)


def _mm_reference(a, b, c, M, N, K):
    return a @ b


@pytest.mark.usefixtures("triton_interpreter")
def test_triton_runs_and_compiles_the_renamed_kernel(worker):
    pytest.importorskip("triton")
    from jupyter_ktune.api import run_kernel
    from jupyter_ktune.results import Status

    spec = parse_cell(TRITON_LINE, VADD, {"inputs": _inputs, "reference": _reference})
    names = {}
    for prefix in ("", "cutlass_"):
        r = run_kernel(spec, {"name_prefix": prefix}, worker=worker)
        assert r.status is Status.OK, r.reason  # the interpreter ran it, verified
        names[prefix] = list(r.static.kernels)  # Triton's own sm_90 compile, no GPU
    assert names == {"": ["vadd"], "cutlass_": ["cutlass_vadd"]}
    assert r.static.kernel("vadd").name == "cutlass_vadd"  # found by the cell's name too


@pytest.mark.usefixtures("triton_interpreter")
def test_triton_maxnreg_caps_the_registers_of_the_sm90_build(worker):
    pytest.importorskip("triton")
    from jupyter_ktune.api import run_kernel

    spec = parse_cell("mm --backend triton --inputs inputs --reference reference --out c "
                      "--static-only", MM, {"inputs": _mm_inputs, "reference": _mm_reference})
    regs = {}
    for cap in (128, 255):
        r = run_kernel(spec, {"maxnreg": cap}, worker=worker)
        assert r.static is not None, r.reason
        regs[cap] = r.static.kernel("mm").registers
    assert regs[128] <= 128 < regs[255], regs


@pytest.mark.usefixtures("triton_interpreter")
def test_a_register_cap_too_low_for_triton_is_out_of_resources_in_ptxas_words(worker):
    pytest.importorskip("triton")
    from jupyter_ktune.api import run_kernel
    from jupyter_ktune.results import Status

    spec = parse_cell("mm --backend triton --inputs inputs --reference reference --out c "
                      "--static-only", MM.replace("maxnreg in [128, 255]", "maxnreg in [40]"),
                      {"inputs": _mm_inputs, "reference": _mm_reference})
    r = run_kernel(spec, {"maxnreg": 40}, worker=worker)
    assert r.status is Status.OUT_OF_RESOURCES, (r.status, r.reason)
    assert "Insufficient registers (40)" in r.reason  # ptxas's line, not Triton's wrapper's


def test_a_triton_parameter_with_a_reserved_name_is_refused():
    from jupyter_ktune.backends.triton.cell import check_cell

    src = VADD.replace("BLOCK: tl.constexpr)", "BLOCK: tl.constexpr, name_prefix: tl.constexpr)")
    spec = parse_cell(TRITON_LINE, src, {"inputs": _inputs, "reference": _reference})
    with pytest.raises(CellError, match="reserved tunable name") as err:
        check_cell(spec)
    assert err.value.line == 2
