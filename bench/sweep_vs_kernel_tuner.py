"""The same CUDA kernel tuned by Kernel Tuner (PyPI ``kernel-tuner``) and by jupyter-ktune.

A memory-bound scaled copy, 2^26 floats, tunables block_size_x (6 values) x tile (4 values):
each thread handles ``tile`` elements. Kernel Tuner: ``tune_kernel(..., lang="cupy")``, brute
force, its default 7 iterations per config (mean, no L2 flush). ktune: exhaustive sweep on the
CUDA backend (verification, L2 flush, adaptive run count, re-timing of the top 3). Reports the
wall time of each and the winners, and each winner's time as the other tool measured it, with
ktune's per-phase breakdown (bench/sweep_phases.py) and the worker's start stated apart.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
N = 1 << 26
BODY = '''extern "C" __global__ void scale(const float* x, float* y, int n) {
    int base = blockIdx.x * block_size_x * tile + threadIdx.x;
    #pragma unroll
    for (int t = 0; t < tile; t++) {
        int j = base + t * block_size_x;
        if (j < n) y[j] = 2.0f * x[j];
    }
}
'''
PARAMS = {"block_size_x": [32, 64, 128, 256, 512, 1024], "tile": [1, 2, 4, 8]}


def inputs():
    """Fresh random input for ktune's worker."""
    x = np.random.default_rng().random(N, dtype=np.float32)
    return dict(x=x, y=np.empty_like(x), n=N)


def reference(x, y, n):
    """What the kernel computes."""
    return 2 * x


def run_kernel_tuner() -> dict:
    """Brute force with Kernel Tuner's CuPy backend."""
    import kernel_tuner
    x = np.random.default_rng().random(N, dtype=np.float32)
    y = np.zeros_like(x)
    t0 = time.perf_counter()
    results, env = kernel_tuner.tune_kernel(
        "scale", BODY, N, [x, y, np.int32(N)], PARAMS, grid_div_x=["block_size_x", "tile"],
        lang="cupy", answer=[None, 2 * x, None], quiet=True)
    wall = time.perf_counter() - t0
    ok = [r for r in results if isinstance(r.get("time"), float)]
    best = min(ok, key=lambda r: r["time"])
    return {"wall_s": wall, "configs": len(results), "version": kernel_tuner.__version__,
            "winner": {k: best[k] for k in PARAMS}, "winner_ms": best["time"],
            "times": {f"{r['block_size_x']}x{r['tile']}": r.get("time") for r in results}}


def ktune_spec() -> Any:
    """The same kernel and space as ktune's cell: the directives over Kernel Tuner's BODY."""
    import jupyter_ktune

    directives = ("// ktune: block_size_x in [32, 64, 128, 256, 512, 1024]; tile in [1, 2, 4, 8]\n"
                  "// ktune: grid = cdiv(n, block_size_x * tile); block = block_size_x; "
                  "bytes = 8 * n\n")
    return jupyter_ktune.parse_cell(
        "scale --backend cuda --inputs inputs --reference reference --out y --budget-ms 5",
        directives + BODY, {"inputs": inputs, "reference": reference})


def run_ktune(store: Path, spec: Any = None, names: tuple[str, ...] = tuple(PARAMS)) -> dict:
    """Exhaustive ktune sweep on the CUDA backend (worker started first, timed apart); the
    per-config times are keyed by ``names``' values joined with 'x' (Kernel Tuner's order)."""
    import sweep_phases

    import jupyter_ktune

    start_s = sweep_phases.start_worker("cuda")
    spec = spec if spec is not None else ktune_spec()
    t0 = time.perf_counter()
    report = jupyter_ktune.tune(spec, "exhaustive", store=store, top_k=3,
                                on_result=lambda p: print(p.text(), flush=True))
    wall = time.perf_counter() - t0
    best = report.best
    phases = sweep_phases.breakdown(report, wall)
    print("ktune phases: " + sweep_phases.text(phases), flush=True)
    failed = [e.result for e in report.evaluations if not e.result.ok]
    return {"wall_s": wall, "worker_start_s": start_s, "phases_s": phases,
            "configs": report.valid_configs, "counts": report.counts,
            "first_failure": failed[0].reason[:400] if failed else None,
            "first_result_s": report.evaluations[0].at_s if report.evaluations else None,
            "winner": dict(best.config) if best else None,
            "winner_ms": best.median_ms if best else None,
            "verdict": report.verdict.text() if report.verdict else None,
            "times": {"x".join(str(r.config[n]) for n in names): r.median_ms
                      for r in report.ranked}}


def main() -> None:
    """Run both, write JSON."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("kernel_tuner_compare.json"))
    ap.add_argument("--store", type=Path, default=Path(tempfile.mkdtemp()) / "kt.sqlite")
    args = ap.parse_args()
    out = {"n": N, "ktune": run_ktune(args.store)}
    print(json.dumps(out["ktune"])[:1500], flush=True)
    try:
        out["kernel_tuner"] = run_kernel_tuner()
    except Exception as exc:  # noqa: BLE001 - report, keep ktune's half
        out["kernel_tuner"] = {"error": f"{type(exc).__name__}: {exc}"}
    kt, kk = out["kernel_tuner"], out["ktune"]
    if "winner" in kt and kk["winner"]:
        key = lambda w: f"{w['block_size_x']}x{w['tile']}"  # noqa: E731
        out["kt_winner_in_ktune_ms"] = kk["times"].get(key(kt["winner"]))
        out["ktune_winner_in_kt_ms"] = kt["times"].get(key(kk["winner"]))
    args.out.write_text(json.dumps(out, indent=1, default=str))
    if "wall_s" in kt:
        out["speedup_wall"] = kt["wall_s"] / kk["wall_s"]
        out["speedup_wall_with_worker_start"] = kt["wall_s"] / (kk["wall_s"]
                                                                + kk["worker_start_s"])
    print(json.dumps({k: v for k, v in out.items() if k != "ktune"}, default=str)[:3000])


if __name__ == "__main__":
    main()
