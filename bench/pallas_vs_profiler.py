"""Pallas on an NVIDIA GPU: the example matmuls through the worker vs ``profiler.measure`` directly.

Run from the repository root on the GPU machine (jax[cuda] installed)::

    PYTHONPATH=. python bench/pallas_vs_profiler.py --size 4096

For each %%kernel cell of ``examples/matmul_pallas.ipynb`` (the Triton-lowered ``matmul`` and the
Mosaic GPU ``matmul_mgpu``) and a few configs, it prints the status, jupyter-ktune's median with
the L2 flushed and with a warm cache (``--warm-cache``), and the median of
``jax.experimental.mosaic.gpu.profiler.measure(compiled, iterations=50)`` taken directly in this
process (warm cache, as ``measure`` has no flush), plus XLA's own ``a @ b`` for scale. The warm
jupyter-ktune number and the direct one should agree within a few percent.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import ml_dtypes
import numpy as np

from jupyter_ktune.api import parse_cell
from jupyter_ktune.results import Status
from jupyter_ktune.runner.client import DeviceWorker

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "matmul_pallas.ipynb"
CONFIGS = {"matmul": [dict(BM=64, BN=64, BK=32, num_warps=4, num_stages=3),
                      dict(BM=128, BN=128, BK=64, num_warps=8, num_stages=3),
                      dict(BM=128, BN=64, BK=64, num_warps=4, num_stages=4)],
           "matmul_mgpu": [dict(BM=128, BN=128, SWIZZLE="128B", STEPS=4),
                           dict(BM=64, BN=256, SWIZZLE="128B", STEPS=3),
                           dict(BM=128, BN=128, SWIZZLE="64B", STEPS=4)]}


def kernel_cells() -> dict[str, tuple[str, str]]:
    """Return the notebook's %%kernel cells: name -> (magic line, body)."""
    out = {}
    for cell in json.loads(NOTEBOOK.read_text())["cells"]:  # plain JSON: no nbformat needed
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and source.startswith("%%kernel "):
            line, _, body = source.partition("\n")
            line = line.removeprefix("%%kernel ")
            out[line.split()[0]] = (line, body)
    return out


def main() -> None:
    """Run the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=4096)
    size = ap.parse_args().size

    def inputs(M=size, N=size, K=size):  # noqa: N803 - matrix sizes
        return dict(a=np.random.randn(M, K).astype(ml_dtypes.bfloat16),
                    b=np.random.randn(K, N).astype(ml_dtypes.bfloat16))

    def reference(a, b):
        return (a.astype(np.float32) @ b.astype(np.float32)).astype(a.dtype)

    ns = {"inputs": inputs, "reference": reference}
    rows, specs = [], []
    with DeviceWorker() as w:
        print("device:", w.device("pallas"))
        for name, (line, body) in kernel_cells().items():
            for config in CONFIGS[name]:
                row = {"kernel": name, "config": config}
                for mode, extra in (("flushed", ""), ("warm", " --warm-cache")):
                    spec = parse_cell(line + " --timeout 300" + extra, body, ns)
                    r = w.run(spec, spec.space.config(config))
                    row["status"], row["reason"] = r.status.value, r.reason.splitlines()[0][:160]
                    if r.measurement is not None:
                        row[mode] = r.measurement.timing.median_ms
                        row.setdefault("method", r.measurement.timing.method)  # the flushed one
                    if r.status is not Status.OK:
                        break
                rows.append(row)
                specs.append(spec)
    direct(rows, specs, inputs)
    flops = 2 * size**3
    print(f"\n{size}^3 bf16, medians in ms (TFLOP/s at the warm figure)")
    print(f"{'kernel':12} {'config':48} {'status':14} {'flushed':>9} {'warm':>9} "
          f"{'measure':>9} {'TFLOP/s':>8}")
    for row in rows:
        cfg = " ".join(f"{k}={v}" for k, v in row["config"].items())
        warm = row.get("warm")
        print(f"{row['kernel']:12} {cfg:48} {row['status']:14} {fmt(row.get('flushed')):>9} "
              f"{fmt(warm):>9} {fmt(row.get('direct')):>9} "
              f"{(flops / warm / 1e9 if warm else float('nan')):8.1f}")
        if row["status"] != "ok":
            print("    ", row["reason"])
    if rows and "method" in rows[0]:
        print("\nmethod (first row):", rows[0]["method"])


def direct(rows: list[dict], specs: list, inputs) -> None:
    """profiler.measure on the same compiled executables, in this process (after the worker)."""
    import jax
    from jax.experimental.mosaic.gpu import profiler

    from jupyter_ktune.backends.pallas.backend import BACKEND

    host = inputs()
    for row, spec in zip(rows, specs, strict=True):
        if row["status"] != "ok":
            continue
        variant = BACKEND.compile(spec, spec.space.config(row["config"]))
        compiled, _, names = variant.prepare(host)
        args = [jax.device_put(host[n]) for n in names]
        _, times = profiler.measure(compiled, iterations=50)(*args)
        row["direct"] = statistics.median(times)
    a, b = jax.device_put(host["a"]), jax.device_put(host["b"])
    _, times = profiler.measure(jax.jit(lambda x, y: x @ y), iterations=50)(a, b)
    print(f"XLA a @ b (cuBLAS), profiler.measure median: {statistics.median(times):.4f} ms")


def fmt(ms: float | None) -> str:
    """Milliseconds with 4 decimals, or a dash."""
    return "-" if ms is None else f"{ms:.4f}"


if __name__ == "__main__":
    main()
