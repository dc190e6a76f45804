"""A cell's tunables reach it as ``-D`` macros, and a macro rewrites every identifier of its name
in every header after it. So ktune's headers must not use a name a user may give a tunable, and
where CUDA's own headers do (``T``: ``template <typename T>`` in cuda_device_runtime_api.h), the
compile error must say which tunable did it and what to do, not point into a header the user
never opened.

Tried as a new user would: a GEMM cell's tunables ``BM``, ``BN``, ``BK`` broke
``ktune_wgmma.cuh``'s ``template <int D, int BN>``; an attention cell with ``N`` or ``R``, or
a swizzle cell with ``BYTES``, broke the older templates the same way.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cuda_tools import NVCC, needs_nvcc
from test_ktune_hopper import INCLUDE

#: names a cell may well give a tunable, and every template or macro parameter the headers had
TUNABLE_NAMES = ["N", "M", "K", "R", "V", "D", "S", "A", "B", "BM", "BN", "BK", "BYTES",
                 "REGS", "TYPE", "TRANS_B", "TB", "DL", "DA", "DREGS", "STAGES", "BLOCK",
                 "SWIZZLE", "WARPS", "CONSUMERS", "HEAD_DIM", "BLOCK_N", "KV_BYTES"]

PROGRAM = r"""
#include <ktune_hopper.cuh>
extern "C" __global__ void use(float* out, unsigned long long d) {
  float acc[64];
  for (int i = 0; i < 64; ++i) acc[i] = out[i];
  kt::wgmma_fence_operand(acc);
  kt::wgmma_ss<128, kt::WG_F16>(acc, d, d, 1);
  kt::wgmma_commit();
  kt::wgmma_wait<0>();
  constexpr kt::VtUnit u = kt::vt_unit<128, 128>(3, 1);
  out[0] = acc[0] + kt::swizzle<128>(64u) + kt::cdiv(7, 2) + u.dq;
}
"""


@needs_nvcc
def test_the_headers_compile_with_any_of_these_tunables_defined(tmp_path: Path) -> None:
    (tmp_path / "h.cu").write_text(PROGRAM)
    defines = [f"-D{name}=3" for name in TUNABLE_NAMES]
    built = subprocess.run([NVCC, "-arch=sm_90a", "-std=c++17", f"-I{INCLUDE}", *defines,
                            "-cubin", "h.cu", "-o", "h.cubin"], cwd=tmp_path,
                           capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr[-3000:]


@needs_nvcc
def test_a_tunable_that_rewrites_a_cuda_header_is_named_with_the_fix() -> None:
    import jupyter_ktune

    body = ("// ktune: T in [64, 128]; grid = 1; block = T\n"
            'extern "C" __global__ void k(float* x) { x[threadIdx.x] = T; }\n')
    spec = jupyter_ktune.parse_cell("k --backend cuda --arch sm_90a --static-only", body, {})
    r = jupyter_ktune.run_kernel(spec, {"T": 64})
    assert r.status.value == "compile error"
    assert "The tunable T reaches the cell as the macro -DT=64" in r.reason, r.reason
    assert "rename the tunable (e.g. T_SIZE), or make it a template parameter" in r.reason


def test_the_hint_stays_quiet_when_no_tunable_is_on_the_line(tmp_path: Path) -> None:
    from jupyter_ktune.backends.cuda.source import macro_collision_hint

    header = tmp_path / "h.cuh"
    header.write_text("template <typename T> int f(T x);\nint NT = 1;\n")
    assert "tunable T " in macro_collision_hint(str(header), 1, {"T": 64, "KTUNE": 1})
    assert macro_collision_hint(str(header), 2, {"T": 64}) == ""  # NT is not T
    assert macro_collision_hint(str(header), 1, {"KTUNE": 1}) == ""
    assert macro_collision_hint(str(header), 9, {"T": 64}) == ""  # past the end


if NVCC is None:  # keep the module importable without nvcc (its tests skip)
    pytest.importorskip("jupyter_ktune")


def test_nvrtc_builtin_header_errors_are_read_from_the_log() -> None:
    """NVRTC's built-in header is not on disk: the line it echoes under the message is read."""
    from jupyter_ktune.backends.cuda.source import parse_diagnostics

    log = ("__nv_nvrtc_builtin_header.h(3731): error: expected an identifier\n"
           "  template<typename T>\n                    ^\n\n"
           "cell(3): error: identifier \"x\" is undefined\n  y = x;\n      ^\n")
    header, cell = parse_diagnostics(log, None, {"T": 64, "BLOCK": 128, "KTUNE": "1"})
    assert "The tunable T reaches the cell as the macro -DT=64" in header.message
    assert header.line is None and cell.line == 3 and "tunable" not in cell.message
