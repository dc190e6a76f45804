"""Compiler controls as tunables (issue 38 item 2), on the device: every config run and verified.

Usage::

    python bench/compiler_controls.py [--out DIR] [--n 1048576] [--mnk 2048]

(on a CPU machine ``--n 4096 --mnk 128``: the Triton interpreter runs the matmul on the host)

Per config of two cells, one JSON row: status (labelled by cause), median and its IQR, and the
static report's registers, spills and kernel symbol. The CUDA C++ cell crosses
``name_prefix in ["", "cutlass_"]`` with ``nvcc_flags in [[], ["--use_fast_math"],
["-maxrregcount=32"]]`` on a register-heavy kernel; the Triton cell crosses ``name_prefix`` with
``maxnreg``. On a GPU each row must be "ok" (the renamed symbol was found and launched, the
capped build verified), ``-maxrregcount=32``/``maxnreg`` must show fewer registers, and the
symbol must carry the prefix. Without a GPU the rows are the static reports ("cannot run here").
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# the kernels, shared with tests/test_compiler_controls.py (which gives them other directives)
HEAVY_BODY = """template <int BLOCK>
__global__ void heavy(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i >= n) return;
  float a[24];
  #pragma unroll
  for (int k = 0; k < 24; ++k) a[k] = x[(i + k * 977) % n];
  float s = 0.f;
  #pragma unroll
  for (int r = 0; r < 8; ++r)
    #pragma unroll
    for (int k = 0; k < 24; ++k) s += a[k] * a[(k * 7 + r) % 24] + __sinf(a[(k + r) % 24]);
  y[i] = s;
}
"""

MM_BODY = """@triton.jit
def mm(a, b, c, M, N, K, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    pm, pn = pid // tl.cdiv(N, BLOCK), pid % tl.cdiv(N, BLOCK)
    rm = pm * BLOCK + tl.arange(0, BLOCK)
    rn = pn * BLOCK + tl.arange(0, BLOCK)
    rk = tl.arange(0, 32)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k in range(0, K, 32):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc)
"""
CUDA = """// ktune: BLOCK in [256]; name_prefix in ["", "cutlass_"]
// ktune: nvcc_flags in [[], ["--use_fast_math"], ["-maxrregcount=32"]]
// ktune: grid = cdiv(n, BLOCK); block = BLOCK; bytes = 8 * n
""" + HEAVY_BODY
TRITON = """# ktune: BLOCK in [128]; name_prefix in ["", "cutlass_"]; maxnreg in [128, 255]
# ktune: num_warps in [4]; grid = cdiv(M, BLOCK) * cdiv(N, BLOCK); flops = 2 * M * N * K
""" + MM_BODY


def heavy_reference(x, y, n):
    i = np.arange(n)
    a = np.stack([x[(i + k * 977) % n] for k in range(24)]).astype(np.float64)
    s = np.zeros(n)
    for r in range(8):
        for k in range(24):
            s += a[k] * a[(k * 7 + r) % 24] + np.sin(a[(k + r) % 24])
    return s.astype(np.float32)


def triton_mm_spec(size: int) -> Any:
    """The Triton cell at M = N = K = ``size`` (fp32 inputs, a TF32 dot: --reduction K)."""
    from jupyter_ktune.api import parse_cell

    def mm_inputs() -> dict[str, Any]:
        a = np.random.randn(size, size).astype(np.float32)
        b = np.random.randn(size, size).astype(np.float32)
        return dict(a=a, b=b, c=np.empty((size, size), dtype=np.float32), M=size, N=size,
                    K=size)

    return parse_cell(f"mm --backend triton --inputs inputs --reference reference --out c "
                      f"--reduction {size}", TRITON,
                      {"inputs": mm_inputs, "reference": lambda a, b, c, M, N, K: a @ b})


def main() -> None:
    from jupyter_ktune.api import parse_cell, run_kernel
    from jupyter_ktune.runner.client import DeviceWorker

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--n", type=int, default=1 << 20, help="elements of the CUDA cell")
    ap.add_argument("--mnk", type=int, default=2048, help="M = N = K of the Triton cell")
    args = ap.parse_args()
    n, size = args.n, args.mnk

    def heavy_inputs():
        x = np.random.rand(n).astype(np.float32)
        return dict(x=x, y=np.empty_like(x), n=n)

    cells = [
        ("cuda", parse_cell("heavy --backend cuda --inputs inputs --reference reference "
                            "--out y --rtol 1e-3 --atol 1e-3", CUDA,
                            {"inputs": heavy_inputs, "reference": heavy_reference})),
        ("triton", triton_mm_spec(size)),
    ]
    rows = []
    with DeviceWorker() as worker:
        for backend, spec in cells:
            for config in spec.space.configs():
                t0 = time.perf_counter()
                r = run_kernel(spec, dict(config), worker=worker)
                k = next(iter(r.static.kernels.values()), None) if r.static else None
                t = r.measurement.timing if r.measurement else None
                rows.append({
                    "backend": backend, "config": config.label(), "status": r.status.value,
                    "reason": r.reason[:300], "median_ms": t.median_ms if t else None,
                    "iqr_ms": t.iqr_ms if t else None, "device": r.device,
                    "symbol": k.name if k else None, "registers": k.registers if k else None,
                    "spill_stores": k.spill_stores if k else None,
                    "wall_s": round(time.perf_counter() - t0, 2)})
                print(json.dumps(rows[-1]), flush=True)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "rows.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
