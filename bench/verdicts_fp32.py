"""Do correct fp32 kernels pass by default, and an off-by-one fail, on the device?

The question from the verification issue: a correct fp32 shared-memory GEMM (4096^3) and a
correct 17x17 convolution were called "wrong result" by the old per-element tolerance. This runs,
through the worker with default tolerances, each of:

- a CUDA C++ shared-memory tiled fp32 GEMM (SIMT FMA), at 4096^3 and at 2048x2048 with K = 8192;
- a Triton fp32 GEMM (``tl.dot``: TF32 on Hopper by default) at the same shapes;
- a CUDA C++ direct 2-D convolution, 17x17 filter, fp32;
- each with an off-by-one index, which must fail (and say why).

References are NumPy fp32, as a user writes them (``x @ w``; the convolution as a sum of
shifted slices). ``--check`` runs the same cells small, on the CPU (Triton interpreter; CUDA
compiled for sm_90 only). Prints one row per case and a table last.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

CUDA_GEMM = r"""
// ktune: TILE in [16, 32]
// ktune: grid = (cdiv(N, TILE), cdiv(M, TILE)); block = (TILE, TILE); flops = 2 * M * N * K
template <int TILE>
__global__ void sgemm(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    As[threadIdx.y][threadIdx.x] = (row < M && k0 + threadIdx.x < K)
        ? A[row * K + k0 + threadIdx.x] : 0.0f;
    Bs[threadIdx.y][threadIdx.x] = (col < N && k0 + threadIdx.y < K)
        ? B[(k0 + threadIdx.y) * N + col] : 0.0f;
    __syncthreads();
    #pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
"""

TRITON_GEMM = r"""
# ktune: BM in [64, 128]; BN in [64, 128]; BK in [32]; num_warps in [4]
# ktune: grid = (cdiv(M, BM), cdiv(N, BN)); flops = 2 * M * N * K
@triton.jit
def sgemm_tl(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(A + rm[:, None] * K + (k0 + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        b = tl.load(B + (k0 + rk)[:, None] * N + rn[None, :],
                    mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(C + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
"""

CUDA_CONV = r"""
// ktune: BX in [16, 32]; BY in [8, 16]
// ktune: grid = (cdiv(W, BX), cdiv(H, BY)); block = (BX, BY); flops = 2 * H * W * R * R
__global__ void conv2d(const float* img, const float* filt, float* out, int H, int W, int R) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= W || y >= H) return;
  float acc = 0.0f;
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < R; ++j)
      acc += img[(y + i) * (W + R - 1) + (x + j)] * filt[i * R + j];
  out[y * W + x] = acc;
}
"""

# the same kernels with one index off by one
OFF_BY_ONE = {
    "cuda_gemm": ("B[(k0 + threadIdx.y) * N + col]", "B[(k0 + threadIdx.y) * N + col + 1]"),
    "triton_gemm": ("(k0 + rk)[:, None] * N + rn[None, :],",
                    "(k0 + rk)[:, None] * N + rn[None, :] + 1,"),
    "cuda_conv": ("filt[i * R + j]", "filt[i * R + j + 1]"),
}


def gemm_io(m: int, n: int, k: int):
    def inputs():
        a = np.random.rand(m, k).astype(np.float32) - 0.5
        b = np.random.rand(k, n).astype(np.float32) - 0.5
        return dict(A=a, B=b, C=np.empty((m, n), np.float32), M=m, N=n, K=k)

    def reference(A, B, C, M, N, K):
        return A @ B

    return inputs, reference


def conv_io(h: int, w: int, r: int):
    def inputs():
        img = np.random.rand(h + r - 1, w + r - 1).astype(np.float32)
        filt = np.random.rand(r, r).astype(np.float32)
        return dict(img=img, filt=filt, out=np.empty((h, w), np.float32), H=h, W=w, R=r)

    def reference(img, filt, out, H, W, R):
        acc = np.zeros((H, W), np.float32)
        for i in range(R):
            for j in range(R):
                acc += img[i:i + H, j:j + W] * filt[i, j]
        return acc

    return inputs, reference


def cases(small: bool):
    """(name, backend, kernel, body, io, outputs) for every case."""
    if small:
        gemm_shapes = [(64, 64, 8192), (96, 80, 256)]
        conv_shape = (64, 48, 17)
    else:
        gemm_shapes = [(4096, 4096, 4096), (2048, 2048, 8192)]
        conv_shape = (4096, 4096, 17)
    out = []
    for m, n, k in gemm_shapes:
        out.append((f"cuda_gemm {m}x{n}x{k}", "cuda", "sgemm", "cuda_gemm", CUDA_GEMM,
                    gemm_io(m, n, k), "C"))
        out.append((f"triton_gemm {m}x{n}x{k}", "triton", "sgemm_tl", "triton_gemm",
                    TRITON_GEMM, gemm_io(m, n, k), "C"))
    h, w, r = conv_shape
    out.append((f"cuda_conv {h}x{w} r{r}", "cuda", "conv2d", "cuda_conv", CUDA_CONV,
                conv_io(h, w, r), "out"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="small sizes on the CPU")
    ap.add_argument("--out", type=Path, default=None, help="folder for verdicts_fp32.json")
    args = ap.parse_args()

    from jupyter_ktune.api import parse_cell, run_kernel
    from jupyter_ktune.runner.client import DeviceWorker

    rows = []
    with DeviceWorker() as worker:
        for label, backend, kernel, key, body, (inputs, reference), outs in cases(args.check):
            if args.check and backend == "cuda":
                continue  # no device to run CUDA C++ on; its compile is tested elsewhere
            for variant in ("correct", "off-by-one"):
                src = body if variant == "correct" else body.replace(*OFF_BY_ONE[key])
                assert src != body or variant == "correct", key
                line = (f"{kernel} --backend {backend} --inputs inputs --reference reference "
                        f"--out {outs} --budget-ms 50 --timeout 300")
                spec = parse_cell(line, src, {"inputs": inputs, "reference": reference})
                t0 = time.perf_counter()
                r = run_kernel(spec, worker=worker)
                v = r.verification
                row = dict(case=label, variant=variant, status=r.status.value,
                           verdict=(v.checks[0].verdict() if v is not None else r.reason)[:240],
                           reason=r.reason[:240], wall_s=round(time.perf_counter() - t0, 1),
                           median_ms=r.median_ms)
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "verdicts_fp32.json").write_text(json.dumps(rows, indent=1))
    print(f"\n{'case':28} {'variant':11} {'status':14} verdict")
    good = True
    for row in rows:
        expect_ok = row["variant"] == "correct"
        good &= (row["status"] == "ok") == expect_ok
        print(f"{row['case']:28} {row['variant']:11} {row['status']:14} {row['verdict'][:110]}")
    print("all as expected" if good else "NOT as expected")
    return 0 if good else 1


if __name__ == "__main__":
    raise SystemExit(main())
