"""The static report of a CUDA cell counts the launch's dynamic shared memory (the cell's
``smem =`` line) in its occupancy and shows it beside the static shared memory."""

from __future__ import annotations

from cuda_tools import needs_nvcc

from jupyter_ktune.api import parse_cell
from jupyter_ktune.backends.cuda.backend import CudaBackend
from jupyter_ktune.measure.static_html import report_html
from jupyter_ktune.measure.static_text import report_text

CELL = """// ktune: BLOCK in [128]; KB in [0, 150]
// ktune: grid = 1; block = BLOCK; smem = KB * 1024
extern "C" __global__ void fill(float* out) {
  extern __shared__ float buf[];
  buf[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = buf[(threadIdx.x + 1) % BLOCK];
}
"""


@needs_nvcc
def test_dynamic_shared_memory_is_in_the_report_and_its_occupancy() -> None:
    spec = parse_cell("fill --backend cuda --arch sm_90 --out out", CELL, {})
    backend = CudaBackend()
    none = backend.static_report(spec, spec.space.config({"KB": 0}))
    big = backend.static_report(spec, spec.space.config({"KB": 150}))
    assert none.dynamic_smem == 0 and big.dynamic_smem == 150 * 1024
    assert none.occupancy("fill", 128).active_blocks_per_sm == 16  # threads / block-slot bound
    assert big.occupancy("fill", 128).active_blocks_per_sm == 1    # 150 KiB: one block per SM
    assert big.occupancy("fill", 128, dynamic_smem=0).active_blocks_per_sm == 16  # explicit wins
    assert "150.0 KiB dynamic" in report_text(big) and "150.0 KiB dynamic" in report_html(big)
    assert "dynamic" not in report_text(none)
