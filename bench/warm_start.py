"""After a one-line edit, how soon does a warm-started sweep reach the final best? (issue 21)

A cold sweep of a kernel, then a sweep of the same kernel with one line edited (a new source
hash: nothing is reused from the store, only the old ranking is used as the search order).
Both are exhaustive, so each knows its final best; the figure is the warm sweep's time to its
first result within 3% of its own final best, over the cold sweep's wall time (target: <= 20%).
Per-phase breakdown (the worker's inputs/reference/bind/verify/time per config, summed) for
both sweeps.

- ``--backend fake`` (default, CPU): a Python "kernel" with config-dependent busy waits, run by
  the test suite's fake backend (tests/ktune_fake_backend.py);
- ``--backend triton`` (GPU): the project's bf16 matmul (bench/sweep_vs_autotune.py's kernel
  and 72-config space).

Examples
--------
    python3 bench/warm_start.py --check                    # CPU, small
    python3 bench/warm_start.py --backend triton --out $OUT   # on the H200
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]
os.environ.setdefault("KTUNE_BACKEND_MODULES", "fake=ktune_fake_backend")
os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests"), str(ROOT),
                                            os.environ.get("PYTHONPATH", "")])

FAKE = """# ktune: BLOCK in [1, 2, 4, 8, 16]; VEC in [1, 2, 4, 8]; UNROLL in [1, 2, 4]
import time
def scale(x, y, n):
    cost = 2e-4 * (1 + abs(BLOCK - 8) / 4 + abs(VEC - 4) / 2 + abs(UNROLL - 2)) ** 2
    t = time.perf_counter() + cost
    while time.perf_counter() < t:
        pass
    y[:] = 2 * x
"""


def fake_io():
    import numpy as np

    def inputs():
        x = np.random.rand(1 << 12)
        return dict(x=x, y=np.empty_like(x), n=x.size)

    def reference(x, y, n):
        return 2 * x

    return inputs, reference


def make_spec(backend: str, size: int, edit: str, budget_ms: float):
    from jupyter_ktune.api import parse_cell

    if backend == "fake":
        inputs, reference = fake_io()
        src = FAKE.replace("    y[:] = 2 * x", f"    y[:] = 2 * x  # {edit}")
        return parse_cell(f"scale --backend fake --inputs inputs --reference reference --out y "
                          f"--budget-ms {budget_ms}", src,
                          {"inputs": inputs, "reference": reference})
    import sweep_vs_autotune as sva

    inputs, reference = sva.make_io(size)
    return parse_cell(f"matmul --backend triton --inputs inputs --reference reference --out c "
                      f"--budget-ms {budget_ms}", sva.SPACE + sva.tagged_kernel(edit),
                      {"inputs": inputs, "reference": reference})


def one_sweep(spec, store: Path, warm: bool) -> dict:
    from jupyter_ktune.tuning import tune

    t0 = time.perf_counter()
    report = tune(spec, "exhaustive", store=store, top_k=0, warm_start=8 if warm else 0)
    wall = time.perf_counter() - t0
    best = min(e.result.median_ms for e in report.evaluations if e.result.ok)
    within = next(e.at_s for e in report.evaluations
                  if e.result.ok and e.result.median_ms <= best * 1.03)
    phases: dict[str, float] = {}
    for e in report.evaluations:
        for k, v in e.result.extra.get("phases_ms", {}).items():
            phases[k] = phases.get(k, 0.0) + v / 1e3
    return {"wall_s": round(wall, 3), "configs": len(report.evaluations),
            "final_best_ms": best, "to_within_3pct_s": round(within, 3),
            "worker_phases_s": {k: round(v, 3) for k, v in phases.items()},
            "prepare_ms": report.info.get("prepare_ms"),
            "moved": report.warm.text() if report.warm else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("fake", "triton"), default="fake")
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--budget-ms", type=float, default=None)
    ap.add_argument("--check", action="store_true", help="CPU, fake backend, small budget")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if a.check:
        a.backend = "fake"
    budget = a.budget_ms or (5.0 if a.backend == "fake" else 10.0)
    tmp = Path(tempfile.mkdtemp(prefix="ktune-warm-"))
    os.environ["TRITON_CACHE_DIR"] = str(tmp / "triton-cache")
    store = tmp / "warm.sqlite"
    from jupyter_ktune.runner.client import get_worker

    t0 = time.perf_counter()
    get_worker().device(a.backend)  # the worker's start, stated apart from both sweeps
    start_s = time.perf_counter() - t0
    cold = one_sweep(make_spec(a.backend, a.size, "v1", budget), store, warm=False)
    warm = one_sweep(make_spec(a.backend, a.size, "v2: a one-line edit", budget), store,
                     warm=True)
    ratio = warm["to_within_3pct_s"] / cold["wall_s"]
    out = {"backend": a.backend, "worker_start_s": round(start_s, 2), "cold": cold,
           "warm": warm, "warm_to_within_3pct_over_cold_wall": round(ratio, 4),
           "target": 0.20}
    print(f"worker start {start_s:.2f} s (apart from both sweeps)")
    for name, r in (("cold", cold), ("warm", warm)):
        print(f"{name}: {r['configs']} configs in {r['wall_s']:.2f} s; within 3% of its final "
              f"best ({r['final_best_ms'] * 1e3:.1f} us) at {r['to_within_3pct_s']:.2f} s; "
              "worker phases (s): " + ", ".join(f"{k} {v:.2f}"
                                                for k, v in r["worker_phases_s"].items()))
    print(warm["moved"])
    print(f"warm time to within 3% / cold wall = {ratio:.1%} (target <= 20%): "
          f"{'met' if ratio <= 0.20 else 'NOT met'}")
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "warm_start.json").write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
