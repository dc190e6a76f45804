"""Latency from a control change to the panel's data updated, and drag prefetch hit rate.

    PYTHONPATH=. python3 bench/panel_latency.py --out DIR

Drives a real KernelPanel (ipywidgets + Bokeh sources, no browser) over the device worker:

1. cached variant: alternate a slider between two compiled CUDA configs 30 times; latency is
   from setting the widget value to the ColumnDataSources updated, minus the device time the
   timing protocol itself spent (the kernel's own run time, which the target excludes);
2. drag: step one slider through its values and back, one step every 150 ms (a human drag),
   with the session prefetching neighbours; count the single-step moves whose variant was
   already compiled when asked;
3. new Triton variant: first request of never-compiled configs of the example GEMM.
A table is printed last; raw per-request records go to DIR/panel_latency.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import nbformat
import numpy as np

from jupyter_ktune.api import parse_cell
from jupyter_ktune.runner.client import DeviceWorker
from jupyter_ktune.session import TuningSession
from jupyter_ktune.ui.app import KernelPanel

ROOT = Path(__file__).parent.parent
CUDA = """// ktune: BLOCK in [64, 128, 256, 512, 1024]; VEC in [1, 2, 4]
// ktune: grid = cdiv(n, BLOCK * VEC); block = BLOCK; bytes = 8 * n; flops = n
template <int BLOCK, int VEC>
__global__ void scale(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = (blockIdx.x * BLOCK + threadIdx.x) * VEC;
  #pragma unroll
  for (int k = 0; k < VEC; ++k) if (i + k < n) y[i + k] = 2.0f * x[i + k];
}
"""


def vec_inputs():
    x = np.random.rand(1 << 22).astype(np.float32)
    return dict(x=x, y=np.empty_like(x), n=x.size)


def stats(xs: list[float]) -> str:
    a = np.asarray(xs) * 1e3
    return f"p50 {np.median(a):7.1f} ms  p90 {np.percentile(a, 90):7.1f} ms  n={a.size}"


def panel_for(worker: DeviceWorker, spec, prefetch: bool) -> KernelPanel:
    limits = worker.limits(spec)
    session = TuningSession(spec, worker, limits, prefetch=prefetch)
    panel = KernelPanel(session, spec.space.config(spec.initial), ceilings=None)
    panel.result  # noqa: B018 - first result
    return panel


def move(panel: KernelPanel, name: str, value, wait: bool = True) -> None:
    panel.controls.widgets[name].value = value
    if wait:
        panel.session.wait_idle(120)


def overhead(rec: dict) -> float:
    return rec["panel_s"] - rec["device_ms"] / 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("bench/results/raw"))
    ap.add_argument("--triton-size", type=int, default=2048)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    out: dict = {}
    with DeviceWorker() as worker:
        ns = {"inputs": vec_inputs, "reference": lambda x, y, n: 2 * x}
        spec = parse_cell("scale --inputs inputs --reference reference --out y --budget-ms 20 "
                          "--config BLOCK=256 --config VEC=4", CUDA, ns)
        p = panel_for(worker, spec, prefetch=False)
        move(p, "BLOCK", 512)                      # compile the second config once
        p.latencies.clear()
        for i in range(30):
            move(p, "BLOCK", 256 if i % 2 == 0 else 512)
        cached = [r for r in p.latencies if r["current"]]
        out["cached"] = cached
        p.session.close()

        p = panel_for(worker, spec.with_options(budget_ms=10), prefetch=True)
        time.sleep(3)                              # prefetch the first neighbours
        p.latencies.clear()
        path = [64, 128, 256, 512, 1024, 512, 256, 128, 64]
        for v in path + path[1:]:
            move(p, "BLOCK", v, wait=False)
            time.sleep(0.15)
        p.session.wait_idle(120)
        drag = [r for r in p.latencies]
        out["drag"] = drag
        p.session.close()

        nb = nbformat.read(ROOT / "examples" / "matmul_triton.ipynb", as_version=4)
        setup = next(c.source for c in nb.cells
                     if c.cell_type == "code" and "def inputs" in c.source)
        cell = next(c.source for c in nb.cells if c.source.startswith("%%kernel"))
        tns: dict = {}
        exec(setup.replace("%load_ext jupyter_ktune", "")
             .replace("SIZE = 128", f"SIZE = {args.triton_size}"), tns)
        line, _, body = cell.partition("\n")
        tspec = parse_cell(line.removeprefix("%%kernel").strip() + " --budget-ms 20", body, tns)
        p = panel_for(worker, tspec, prefetch=False)
        p.latencies.clear()
        for name, value in (("BLOCK_N", 128), ("BLOCK_K", 64), ("num_warps", 8)):
            move(p, name, value)
        out["triton_new"] = [r for r in p.latencies if r["current"]]
        out["triton_status"] = [r["status"] for r in p.latencies]
        p.session.close()
    (args.out / "panel_latency.json").write_text(json.dumps(out, indent=1, default=str))
    hits = [r["precompiled"] for r in drag if r["current"]]
    print("\nlatency from control change to panel data updated (kernel's own device time excluded)")
    print(f"cached CUDA variant     {stats([overhead(r) for r in cached])}")
    print(f"  (including device)    {stats([r['panel_s'] for r in cached])}")
    phases = {k: np.median([r["phases_ms"].get(k, 0) for r in cached])
              for k in (cached[0]["phases_ms"] if cached else {})}
    print("  worker phases (median ms): " + ", ".join(f"{k} {v:.1f}" for k, v in phases.items()))
    print(f"drag, served requests   {stats([overhead(r) for r in drag if r['current']])}")
    print(f"drag single steps precompiled: {sum(hits)}/{len(hits)} "
          f"({100 * sum(hits) / max(len(hits), 1):.0f}%), stale deliveries "
          f"{sum(1 for r in drag if not r['current'])}")
    print(f"new Triton variant      {stats([overhead(r) for r in out['triton_new']])} "
          f"statuses {out['triton_status']}")


if __name__ == "__main__":
    main()
