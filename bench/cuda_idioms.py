"""CUDA C++ idioms of issue 18 on a GPU: ``__constant__`` memory, a two-stage pipeline, a
``typename T`` template with ``#pragma unroll FACTOR``. Each is run, verified and timed per
config through the device worker, as a cell would be.

Usage::

    python bench/cuda_idioms.py [--out results.json]

Needs a CUDA GPU with CuPy. Prints, per cell and config: status, verification, median time and,
for the pipeline, each stage's median. On a machine without a GPU every row is "cannot run
here" (or a compile error), which is what the CPU tests check already.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

N = 1 << 20

CONSTANT = """\
// ktune: BLOCK in [128, 256, 512]; grid = cdiv(n, BLOCK); block = BLOCK
__constant__ float filter[5];

__global__ void conv5(float* y, const float* x, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i >= 2 && i + 2 < n) {
    float acc = 0.f;
    for (int k = -2; k <= 2; ++k) acc += filter[k + 2] * x[i + k];
    y[i] = acc;
  } else if (i < n) {
    y[i] = 0.f;
  }
}
"""

PIPELINE = """\
// ktune: BLOCK in [128, 256, 512, 1024]
// ktune: pipeline = [partials(grid=cdiv(n, BLOCK), block=BLOCK), total(grid=1, block=1024)]
template <int BLOCK>
__global__ void partials(const float* x, float* partial, int n) {
  __shared__ float s[BLOCK];
  int i = blockIdx.x * BLOCK + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : 0.f;
  __syncthreads();
  for (int k = BLOCK / 2; k > 0; k /= 2) {
    if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

__global__ void total(const float* partial, float* out, int n) {
  __shared__ float s[1024];
  int blocks = (n + BLOCK - 1) / BLOCK;
  float acc = 0.f;
  for (int b = threadIdx.x; b < blocks; b += 1024) acc += partial[b];
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int k = 512; k > 0; k /= 2) {
    if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[0] = s[0];
}
"""

TEMPLATE = """\
// ktune: BLOCK in [128, 256]; FACTOR in [1, 4]; grid = cdiv(n, BLOCK * 4); block = BLOCK
template <typename T, int BLOCK>
__global__ void axpy4(T* y, const T* __restrict__ x, float alpha, int n) {
  int base = blockIdx.x * BLOCK * 4 + threadIdx.x;
#pragma unroll FACTOR
  for (int k = 0; k < 4; ++k) {
    int i = base + k * BLOCK;
    if (i < n) y[i] = T(alpha * float(x[i]) + float(y[i]));
  }
}
"""


def conv_inputs():
    x = np.random.rand(N).astype(np.float32)
    return dict(y=np.empty_like(x), x=x, n=N,
                filter=np.array([0.1, 0.2, 0.4, 0.2, 0.1], np.float32))


def conv_reference(x, filter, **_):
    y = np.zeros_like(x)
    for k in range(-2, 3):
        y[2:-2] += filter[k + 2] * x[2 + k:len(x) - 2 + k]
    return y


def sum_inputs():
    x = np.random.rand(N).astype(np.float32)
    return dict(x=x, partial=np.empty(N // 128, np.float32), out=np.empty(1, np.float32), n=N)


def sum_reference(x, **_):
    return np.array([x.astype(np.float64).sum()], np.float32)


def axpy_inputs():
    return dict(y=np.random.rand(N).astype(np.float16), x=np.random.rand(N).astype(np.float16),
                alpha=2.0, n=N)


def axpy_reference(y, x, alpha, **_):
    return (alpha * x.astype(np.float32) + y.astype(np.float32)).astype(np.float16)


CELLS = [
    ("conv5 --backend cuda --inputs inputs --reference reference --out y", CONSTANT,
     conv_inputs, conv_reference),
    ("partials --backend cuda --inputs inputs --reference reference --out out --reduction "
     f"{N}", PIPELINE, sum_inputs, sum_reference),
    ("axpy4 --backend cuda --inputs inputs --reference reference --out y", TEMPLATE,
     axpy_inputs, axpy_reference),
]


def main() -> int:
    """Run every config of every cell and print/store one row per config."""
    from jupyter_ktune.api import parse_cell
    from jupyter_ktune.runner.client import DeviceWorker

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = []
    with DeviceWorker() as worker:
        for line, body, inputs, reference in CELLS:
            spec = parse_cell(line, body, {"inputs": inputs, "reference": reference})
            for config in spec.space.configs():
                r = worker.run(spec, config)
                t = r.measurement.timing.median_ms if r.measurement else None
                stages = [s.get("median_ms") for s in (r.launch or {}).get("stages", [])]
                row = {"kernel": spec.name, "config": dict(config), "status": r.status.value,
                       "reason": r.reason[:200], "median_ms": t, "stage_ms": stages}
                rows.append(row)
                print(json.dumps(row))
    if args.out:
        path = args.out / "cuda_idioms.json" if args.out.is_dir() else args.out
        path.write_text(json.dumps(rows, indent=1))
    print(f"\n{'kernel':10} {'config':28} {'status':14} {'median':>10}  stages")
    for row in rows:
        med = f"{row['median_ms'] * 1e3:8.2f} us" if row["median_ms"] else ""
        print(f"{row['kernel']:10} {str(row['config']):28} {row['status']:14} {med:>10}  "
              + ", ".join(f"{s * 1e3:.2f} us" for s in row["stage_ms"] if s))
    bad = [r for r in rows if r["status"] != "ok"]
    print("all ok" if not bad else f"{len(bad)} of {len(rows)} not ok")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
