"""One build per CUDA C++ cell (issue 36): published idioms compiled by nvcc and by NVRTC, timed,
and (on a GPU) run from the static report's own cubin.

Usage::

    python bench/one_build.py [--repeat 3] [--out DIR]

Without a GPU: per idiom, the compile time of nvcc's build as the backend runs it (the static
report: ``nvcc -cubin`` then the SASS disassembly) and of NVRTC's (the ``nvidia-cuda-nvrtc``
wheel, with the options the backend gives it), medians of ``--repeat``. With a CUDA GPU and
CuPy, each idiom then runs through the device worker (the run loads nvcc's cubin) and must come
back "ok". tests/test_cuda_one_build.py compiles the same cells both ways.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HEAD = "// ktune: BLOCK in [128, 256]; grid = cdiv(n, BLOCK); block = BLOCK\n"
IDIOMS = {
    "math constants (M_PI, M_SQRT2, M_LN2)": """
__global__ void k(float* y, const float* x, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) y[i] = 0.5f * x[i] * (1.f + erff(x[i] * (float)M_SQRT1_2)) + (float)(M_PI * M_LN2);
}""",
    "INFINITY and NAN": """
__global__ void k(float* y, const float* x, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  float m = -INFINITY;
  if (i < n) m = fmaxf(m, x[i]);
  if (i < n) y[i] = isnan(x[i]) ? NAN : m + HUGE_VALF * 0.f;
}""",
    "<cmath> and <cstdint>": """
#include <cmath>
#include <cstdint>
__global__ void k(float* y, const float* x, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) y[i] = std::sqrt(std::fabs(x[i])) + expf(x[i]) + rsqrtf(1.f + x[i] * x[i]);
}""",
    "<math.h> with its constants": """
#include <math.h>
__global__ void k(float* y, const float* x, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) y[i] = sinf(x[i] * (float)M_PI) + (isinf(x[i]) ? 0.f : 1.f);
}""",
    "<cuda_bf16.h>": """
#include <cuda_bf16.h>
__global__ void k(__nv_bfloat16* y, const __nv_bfloat16* x, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16(__bfloat162float(x[i]) * 2.f);
}""",
    "<cuda/std/limits> and <cuda/std/type_traits>": """
#include <cuda/std/limits>
#include <cuda/std/type_traits>
template <typename T>
static __device__ T lowest() {
  static_assert(cuda::std::is_floating_point<T>::value, "floating point only");
  return cuda::std::numeric_limits<T>::lowest();
}
__global__ void k(float* y, const float* x, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], lowest<float>());
}""",
    "cooperative groups (block tile reduce)": """
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
__global__ void k(float* y, const float* x, int n) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  int i = blockIdx.x * BLOCK + threadIdx.x;
  float v = i < n ? x[i] : 0.f;
  v = cg::reduce(warp, v, cg::plus<float>());
  if (warp.thread_rank() == 0 && i < n) atomicAdd(y, v);
}""",
    "<cstdio>, <cstring> and device printf": """
#include <cstdio>
#include <cstring>
__global__ void k(float* y, const float* x, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i == n) printf("k: %d rows\\n", n);
  float v[1] = {0.f};
  if (i < n) memcpy(v, x + i, sizeof(float));
  if (i < n) y[i] = v[0];
}""",
    "__launch_bounds__ and static __device__ helpers": """
static __device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__global__ void __launch_bounds__(BLOCK) k(float* y, const float* x, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  float v = warp_sum(i < n ? x[i] : 0.f);
  if ((threadIdx.x & 31) == 0) atomicAdd(y, v);
}""",
}

N = 1 << 20


def inputs_for(body: str):
    """Inputs for an idiom cell: y, x of the cell's element type, n."""
    def inputs():
        import ml_dtypes

        dtype = ml_dtypes.bfloat16 if "__nv_bfloat16" in body else np.float32
        x = np.random.rand(N).astype(dtype)
        return dict(y=np.zeros_like(x), x=x, n=N)
    return inputs


def compile_times(repeat: int) -> list[dict]:
    """Per idiom: median seconds of nvcc's build (the static report) and of NVRTC's."""
    sys.path.insert(0, str(ROOT / "tests"))
    import os

    from nvrtc_wheel import load_nvrtc, nvrtc_compile

    from jupyter_ktune.api import parse_cell
    from jupyter_ktune.backends.cuda.backend import CudaBackend
    from jupyter_ktune.backends.cuda.nvrtc import nvrtc_options
    from jupyter_ktune.backends.cuda.source import parse_signature, static_source
    from jupyter_ktune.backends.cuda.templates import type_arguments

    nvrtc = load_nvrtc()
    rows = []
    for idiom, body in IDIOMS.items():
        spec = parse_cell("k --backend cuda", HEAD + body)
        config = spec.space.config(BLOCK=128)
        nvcc_s, nvrtc_s = [], []
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as tmp:  # a cold compile cache each time
                os.environ["KTUNE_CACHE_DIR"] = tmp
                clock = time.perf_counter()
                CudaBackend().static_report(spec, config)
                nvcc_s.append(time.perf_counter() - clock)
            if nvrtc is not None:
                sig = parse_signature(spec)
                cxx = spec.space.cxx_env(config)
                src = static_source(spec, sig, cxx, type_arguments(spec, sig))
                clock = time.perf_counter()
                ok, log = nvrtc_compile(nvrtc, src, ["--gpu-architecture=sm_90",
                                                     *nvrtc_options(spec, sig, cxx)])
                nvrtc_s.append(time.perf_counter() - clock)
                assert ok, log
        rows.append({"idiom": idiom, "nvcc_s": statistics.median(nvcc_s),
                     "nvrtc_s": statistics.median(nvrtc_s) if nvrtc_s else None})
    return rows


def gpu_runs() -> list[dict]:
    """Each idiom through the device worker (one config): its status and where it ran."""
    from jupyter_ktune.api import parse_cell
    from jupyter_ktune.runner.client import DeviceWorker

    rows = []
    with DeviceWorker() as worker:
        for idiom, body in IDIOMS.items():
            spec = parse_cell("k --backend cuda --inputs inputs --out y", HEAD + body,
                              {"inputs": inputs_for(body)})
            r = worker.run(spec, spec.space.config(BLOCK=128))
            t = r.measurement.timing.median_ms if r.measurement else None
            rows.append({"idiom": idiom, "status": r.status.value, "reason": r.reason[:200],
                         "device": r.device, "median_ms": t})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = compile_times(args.repeat)
    print(f"{'idiom':48} {'nvcc (report) s':>16} {'NVRTC s':>9}")
    for row in rows:
        nv = f"{row['nvrtc_s']:.3f}" if row["nvrtc_s"] is not None else "-"
        print(f"{row['idiom']:48} {row['nvcc_s']:16.3f} {nv:>9}")
    out = {"compile": rows}
    from jupyter_ktune.backends.cuda.backend import CudaBackend

    bad = []
    if CudaBackend().device().available:
        out["gpu"] = runs = gpu_runs()
        for row in runs:
            print(f"{row['idiom']:48} {row['status']:10} {row['reason'][:80]}")
        bad = [r for r in runs if r["status"] != "ok"]
        print("all ok on the GPU" if not bad else f"{len(bad)} of {len(runs)} not ok")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "one_build.json").write_text(json.dumps(out, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
