"""GPU check of the Triton backend: the example GEMM at 4096^3 bf16 through the worker, against
``triton.testing.do_bench(return_mode="median")`` for the same config.

Run on the H200 from the repository root: ``python bench/triton_vs_do_bench.py [SIZE] [--json
PATH]``
(``--json`` defaults to ``triton_gpu_check.json`` in the current folder).
Prints the device, both medians, their ratio, the static report's registers/SASS highlights and
the extension's method line. do_bench *writes* its 256 MB flush buffer (``zero_``) while the
extension reads one and subtracts the empty-kernel floor, so expect a few percent difference.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import nbformat
import numpy as np

from jupyter_ktune.api import parse_cell, run_kernel
from jupyter_ktune.runner.client import DeviceWorker

_ap = argparse.ArgumentParser(description="Triton backend against do_bench")
_ap.add_argument("size", type=int, nargs="?", default=4096)
_ap.add_argument("--json", type=Path, default=Path("triton_gpu_check.json"))
ARGS = _ap.parse_args()  # at import: SIZE is the inputs' default and travels to the worker
SIZE = ARGS.size
NB = Path(__file__).parent.parent / "examples" / "matmul_triton.ipynb"
CONFIGS = [dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3),
           dict(BLOCK_M=128, BLOCK_N=64, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=4),
           dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=4, num_warps=4, num_stages=3)]


def inputs(M=SIZE, N=SIZE, K=SIZE):
    import ml_dtypes

    a = np.random.randn(M, K).astype(ml_dtypes.bfloat16)
    b = np.random.randn(K, N).astype(ml_dtypes.bfloat16)
    return dict(a=a, b=b, c=np.empty((M, N), dtype=ml_dtypes.bfloat16), M=M, N=N, K=K)


def reference(a, b, c, M, N, K):
    return a.astype(np.float32) @ b.astype(np.float32)


def do_bench_median(source: str, config: dict) -> float:
    """Run in the worker: import the same cell module and time it with Triton's do_bench."""
    import torch
    import triton

    from jupyter_ktune.backends.triton.module import load_module

    kernel = load_module(source, "matmul").matmul
    a = torch.randn(SIZE, SIZE, device="cuda").to(torch.bfloat16)
    b = torch.randn(SIZE, SIZE, device="cuda").to(torch.bfloat16)
    c = torch.empty(SIZE, SIZE, device="cuda", dtype=torch.bfloat16)
    grid = (triton.cdiv(SIZE, config["BLOCK_M"]) * triton.cdiv(SIZE, config["BLOCK_N"]),)
    return float(triton.testing.do_bench(
        lambda: kernel[grid](a, b, c, SIZE, SIZE, SIZE, **config), return_mode="median"))


def main() -> None:
    nb = nbformat.read(NB, as_version=4)
    cell = next(c.source for c in nb.cells if c.source.startswith("%%kernel"))
    line, body = cell.split("\n", 1)
    spec = parse_cell(line.removeprefix("%%kernel").split(" --config")[0] + " --budget-ms 300",
                      body, {"inputs": inputs, "reference": reference})
    rows = []
    with DeviceWorker() as w:
        for cfg in CONFIGS:
            r = run_kernel(spec, cfg, worker=w)
            ext = r.measurement.timing.median_ms if r.measurement else float("nan")
            bench = w.call(do_bench_median, body, cfg)
            k = r.static.kernel("matmul") if r.static else None
            rows.append(dict(config=cfg, status=r.status.value, reason=r.reason[:200],
                             device=r.device, ext_ms=ext, do_bench_ms=bench,
                             tflops=2 * SIZE**3 / ext / 1e9 if ext == ext else None,
                             regs=k.registers if k else None,
                             wgmma=k.sass.uses_wgmma if k and k.sass else None,
                             method=r.measurement.timing.method if r.measurement else ""))
    print(f"{'config':58} {'status':8} {'ext ms':>9} {'do_bench':>9} {'ratio':>6} {'TFLOP/s':>8}"
          f" {'regs':>5} wgmma")
    for row in rows:
        cfg = " ".join(f"{k}={v}" for k, v in row["config"].items())
        print(f"{cfg:58} {row['status']:8} {row['ext_ms']:9.4f} {row['do_bench_ms']:9.4f} "
              f"{row['ext_ms'] / row['do_bench_ms']:6.3f} {row['tflops'] or 0:8.1f} "
              f"{row['regs']!s:>5} {row['wgmma']}")
    print("device:", rows[0]["device"])
    print("method:", rows[0]["method"])
    ARGS.json.write_text(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    main()
