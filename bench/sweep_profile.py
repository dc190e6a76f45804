"""Where a sweep's per-config time goes, function by function (issue 21).

``sweep_phases`` says how long each phase of a config took; this says why. It runs one
exhaustive sweep per named kernel with Python's ``cProfile`` on in the device worker (through
its ``call`` request) and in the sweep's own thread, and prints the functions with the most
cumulative time on each side. Worker start, pool start and the cell's imports happen first and
are not profiled. Kernels: ``matmul`` and corpus ids (as ``bench/corpus_vs_autotune.py``), and
``cuda-copy`` (the CUDA scaled copy of ``bench/sweep_vs_kernel_tuner.py``).

    python3 bench/sweep_profile.py fla-softmax matmul cuda-copy --out $OUT    # H200
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]


def profile_start() -> bool:
    """Worker side: start a profiler on the worker's request thread (kept on ``sys``, as this
    function is pickled by value and has no module state of its own there)."""
    import cProfile as cp
    import sys as s

    s._ktune_profile = cp.Profile()  # type: ignore[attr-defined]
    s._ktune_profile.enable()  # type: ignore[attr-defined]
    return True


def profile_stop(limit: int) -> str:
    """Worker side: stop the profiler and return its top functions as text."""
    import io as i
    import pstats as ps
    import sys as s

    prof = s._ktune_profile  # type: ignore[attr-defined]
    prof.disable()
    buf = i.StringIO()
    ps.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(limit)
    buf.write("\n--- by own time ---\n")
    ps.Stats(prof, stream=buf).sort_stats("tottime").print_stats(limit)
    return buf.getvalue()


def cuda_copy_spec() -> Any:
    """The CUDA scaled copy of bench/sweep_vs_kernel_tuner.py, as ktune's cell."""
    import sweep_vs_kernel_tuner

    return sweep_vs_kernel_tuner.ktune_spec()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="+")
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--limit", type=int, default=35)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    import corpus_vs_autotune as cva
    import sweep_phases

    from jupyter_ktune.runner.client import get_worker
    from jupyter_ktune.tuning import tune

    tmp = Path(tempfile.mkdtemp(prefix="ktune-profile-"))
    os.environ["TRITON_CACHE_DIR"] = str(tmp / "cache")
    rows: dict[str, Any] = {}
    for name in a.names:
        spec = cuda_copy_spec() if name == "cuda-copy" else cva.build(name, a.size)[0]
        start = {"worker_start_s": sweep_phases.start_worker(spec.backend),
                 "pool_start_s": sweep_phases.start_pool(spec.backend),
                 "preload_s": sweep_phases.preload_pool(spec)}
        worker = get_worker()
        worker.call(profile_start)
        here = cProfile.Profile()
        t0 = time.perf_counter()
        here.enable()
        report = tune(spec, "exhaustive", store=tmp / f"{name}.sqlite", top_k=3)
        here.disable()
        wall = time.perf_counter() - t0
        worker_text = worker.call(profile_stop, a.limit, timeout=120)
        buf = io.StringIO()
        pstats.Stats(here, stream=buf).sort_stats("cumulative").print_stats(a.limit)
        phases = sweep_phases.breakdown(report, wall)
        rows[name] = {**start, "wall_s": round(wall, 3), "configs": report.valid_configs,
                      "counts": dict(report.counts), "phases_s": phases}
        print(f"==== {name}: {json.dumps(rows[name])}", flush=True)
        print(f"---- worker (request thread), {name}\n{worker_text}", flush=True)
        print(f"---- sweep thread, {name}\n{buf.getvalue()}", flush=True)
        if a.out:
            a.out.mkdir(parents=True, exist_ok=True)
            (a.out / f"{name}.worker.txt").write_text(worker_text)
            (a.out / f"{name}.sweep.txt").write_text(buf.getvalue())
            (a.out / "sweep_profile.json").write_text(json.dumps(rows, indent=1))
    print(f"\n{'kernel':14} {'configs':>7} {'wall s':>7}  phases (s)")
    for name, r in rows.items():
        print(f"{name:14} {r['configs']:>7} {r['wall_s']:7.2f}  {r['phases_s']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
