"""GPU evidence for the foundation: the CUDA backend end to end, against ncu and do_bench.

Run on a CUDA machine from the repository root (see bench/README.md for the exact command):

    PYTHONPATH=. python3 bench/timing_vs_ncu.py --out OUTDIR

1. Three vector-scale kernels (tiny 16 KiB, 64 MiB -> ~30 us, 1 GiB -> ~0.5 ms) are compiled,
   verified and timed through the device worker, exactly as the %%kernel magic does.
2. The same NVRTC kernels are timed with triton.testing.do_bench (median, its own 256 MB flush),
   in a separate process.
3. ncu (--clock-control none, default cache flush) reports gpu__time_duration for the same
   kernels launched 20 times each; the median per kernel is compared.
4. Fault recovery: an illegal-address kernel, a misaligned-access kernel and a hanging kernel
   (timeout 3 s) each cost that variant only; the time until the next good result is recorded.
A table is printed last; everything raw goes to OUTDIR.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from jupyter_ktune.api import parse_cell
from jupyter_ktune.runner.client import DeviceWorker

SCALE = """// ktune: BLOCK in [128, 256, 512]
// ktune: grid = cdiv(n, BLOCK); block = BLOCK; bytes = 8 * n; flops = n
#include <ktune.cuh>
template <int BLOCK>
__global__ void scale(const float* __restrict__ x, float* __restrict__ y, long long n) {
  long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
"""
FAULTS = {
    "illegal_address": """// ktune: grid = 64; block = 128
__global__ void boom(const float* x, float* y, long long n) {
  if (threadIdx.x == 0 && blockIdx.x == 7) { float* p = (float*)0x100; *p = x[0]; }
  y[blockIdx.x * 128 + threadIdx.x] = x[0];
}
""",
    "misaligned": """// ktune: grid = 64; block = 128
__global__ void boom(const float* x, float* y, long long n) {
  float4* p = (float4*)((char*)y + 4);
  p[threadIdx.x] = make_float4(x[0], x[1], x[2], x[3]);
}
""",
    "hang": """// ktune: grid = 1; block = 32
__global__ void boom(const float* x, float* y, long long n) {
  while (((volatile const float*)x)[0] < 10.0f) { }
  y[0] = 1.0f;
}
""",
}
SIZES = {"tiny_16KiB": 1 << 12, "mid_64MiB": 1 << 24, "large_1GiB": 1 << 28}


def make_inputs(n: int):
    def inputs():
        x = np.random.rand(n).astype(np.float32)
        return dict(x=x, y=np.empty_like(x), n=n)
    return inputs


def reference(x, y, n):
    return 2 * x


def extension_runs(out: Path) -> dict:
    res: dict = {}
    with DeviceWorker() as w:
        t0 = time.perf_counter()
        info = w.device("cuda")
        res["worker_start_s"] = time.perf_counter() - t0
        res["device"] = repr(info)
        for label, n in SIZES.items():
            ns = {"inputs": make_inputs(n), "reference": reference}
            spec = parse_cell(
                "scale --inputs inputs --reference reference --out y --config BLOCK=256", SCALE, ns)
            r = w.run(spec, spec.space.config(BLOCK=256))
            t = r.measurement.timing if r.measurement else None
            res[label] = dict(status=r.status.value, reason=r.reason, launch=dict(r.launch),
                              median_ms=t.median_ms if t else None, iqr_ms=t.iqr_ms if t else None,
                              n=t.n if t else None, graph_ms=t.graph_ms if t else None,
                              method=t.method if t else None,
                              gbps=r.measurement.gbps if r.measurement else None,
                              clocks=(r.measurement.provenance.sm_clock_mhz
                                      if r.measurement else None),
                              static=(r.static.to_dict() if r.static is not None
                                      and hasattr(r.static, "to_dict") else None))
            (out / f"ext_{label}.txt").write_text(repr(r) + "\n" + r._repr_html_())
        good = parse_cell("scale --inputs inputs --reference reference --out y",
                          SCALE, {"inputs": make_inputs(1 << 20), "reference": reference})
        for kind, src in FAULTS.items():
            ns = {"inputs": make_inputs(1 << 14), "reference": reference}
            spec = parse_cell("boom --inputs inputs --timeout 3", src, ns)
            t0 = time.perf_counter()
            bad = w.run(spec, spec.space.default())
            t1 = time.perf_counter()
            ok = w.run(good.with_options(budget_ms=20), good.space.default())
            t2 = time.perf_counter()
            res[f"fault_{kind}"] = dict(status=bad.status.value, reason=bad.reason[:300],
                                        fault_result_s=t1 - t0, next_good_status=ok.status.value,
                                        recovered_s=t2 - t0, restarts=w.restarts)
    return res


DO_BENCH = r"""
import json, sys, numpy as np, cupy, torch, triton
from triton.testing import do_bench
from jupyter_ktune.backends.cuda.backend import BACKEND
from jupyter_ktune.api import parse_cell
sizes = json.loads(sys.argv[1]); src = sys.argv[2]; reps = int(sys.argv[3])
out = {}
for label, n in sizes.items():
    spec = parse_cell("scale", src, {})
    v = BACKEND.compile(spec, spec.space.config(BLOCK=256))
    x = np.random.rand(n).astype(np.float32)
    b = v.bind(dict(x=x, y=np.empty_like(x), n=n))
    b.launch(); cupy.cuda.runtime.deviceSynchronize()
    if reps:   # the ncu target: plain launches, ncu flushes caches itself
        for _ in range(reps): b.launch()
        cupy.cuda.runtime.deviceSynchronize(); continue
    # do_bench times on torch's current stream; CuPy launches on the legacy default stream,
    # which synchronises with it, and its 256 MB flush runs before each launch.
    ms = do_bench(b.launch, warmup=25, rep=200, return_mode="median")
    out[label] = ms
print(json.dumps({"triton": triton.__version__, "do_bench_median_ms": out}))
"""


def do_bench_runs(out: Path) -> dict:
    p = subprocess.run([sys.executable, "-c", DO_BENCH, json.dumps(SIZES), SCALE, "0"],
                       capture_output=True, text=True, timeout=300)
    (out / "do_bench_raw.txt").write_text(p.stdout + p.stderr)
    return json.loads(p.stdout.strip().splitlines()[-1])


def ncu_runs(out: Path) -> dict:
    rep = out / "scale.ncu-rep"
    cmd = ["ncu", "--clock-control", "none",
           "--metrics", "gpu__time_duration.sum,launch__grid_size",
           "-k", "regex:scale", "-f", "-o", str(rep.with_suffix("")),
           sys.executable, "-c", DO_BENCH,
           json.dumps(SIZES), SCALE, "20"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    (out / "ncu_profile_log.txt").write_text(" ".join(cmd[:8]) + " ...\n" + p.stdout + p.stderr)
    q = subprocess.run(["ncu", "--import", str(rep), "--page", "raw", "--csv",
                        "--print-units", "base",
                        "--metrics", "gpu__time_duration.sum,launch__grid_size"],
                       capture_output=True, text=True, timeout=300)
    (out / "ncu_raw.csv").write_text(q.stdout + q.stderr)
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(q.stdout)))
    by_grid: dict[int, list[float]] = {}
    for row in rows:  # the first row holds units and fails to parse
        try:
            g = int(row["launch__grid_size"].replace(",", ""))
            ns = float(row["gpu__time_duration.sum"].replace(",", ""))
            by_grid.setdefault(g, []).append(ns / 1e6)
        except (KeyError, ValueError):
            continue
    res = {}
    for label, n in SIZES.items():
        ts = by_grid.get(-(-n // 256), [])
        res[label] = dict(median_ms=float(np.median(ts)) if ts else None, n=len(ts))
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench/results/raw")))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    ext = extension_runs(args.out)
    try:
        db = do_bench_runs(args.out)
    except Exception as exc:  # noqa: BLE001
        db = {"error": str(exc)}
    try:
        nc = ncu_runs(args.out)
    except Exception as exc:  # noqa: BLE001
        nc = {"error": str(exc)}
    summary = {"extension": ext, "do_bench": db, "ncu": nc}
    (args.out / "timing_vs_ncu.json").write_text(json.dumps(summary, indent=1, default=str))
    print(f"\n{'kernel':<12} {'ktune median':>14} {'IQR':>10} {'n':>5} {'ncu median':>12} "
          f"{'Δ vs ncu':>9} {'do_bench':>11} {'Δ vs db':>8} {'GB/s':>8}")
    for label in SIZES:
        e = ext.get(label, {})
        m = e.get("median_ms")
        nm = nc.get(label, {}).get("median_ms") if isinstance(nc.get(label), dict) else None
        dm = db.get("do_bench_median_ms", {}).get(label)
        def d(a, b):
            return f"{(a / b - 1) * 100:+.1f}%" if a and b else "-"
        print(f"{label:<12} {m * 1e3 if m else float('nan'):>11.2f} µs "
              f"{(e.get('iqr_ms') or 0) * 1e3:>7.2f} µs "
              f"{e.get('n') or 0:>5} {nm * 1e3 if nm else float('nan'):>9.2f} µs {d(m, nm):>9} "
              f"{dm * 1e3 if dm else float('nan'):>8.2f} µs {d(m, dm):>8} "
              f"{e.get('gbps') or 0:>8.0f}")
        if e.get("graph_ms"):
            print(f"{'':<12} CUDA-graph per launch {e['graph_ms'] * 1e3:.2f} µs; "
                  f"status {e.get('status')}")
    print(f"\nworker start {ext.get('worker_start_s', 0):.2f} s")
    for kind in FAULTS:
        f = ext.get(f"fault_{kind}", {})
        print(f"fault {kind:<16} -> {f.get('status')!s:<14} "
              f"next run {f.get('next_good_status')!s:<8} "
              f"recovered in {f.get('recovered_s', float('nan')):.2f} s")


if __name__ == "__main__":
    main()
