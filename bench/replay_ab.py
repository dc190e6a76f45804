"""Timed runs through Triton's dispatch against timed runs that replay its launcher call (issue 21).

``backends/triton/replay.py`` enqueues a Triton kernel's timed runs by repeating the launcher
call of its first launch instead of going through ``kernel[grid](**kwargs)`` each time. The GPU
times must not move (the runs are queued behind a hold either way); the wall time of a
microsecond kernel's measurement should fall, since there the host's enqueue set it. For each
kernel, bound as a sweep binds it, this measures interleaved (A B A B ...):

* the host cost of one launch call each way (median of 200 calls, then a synchronize);
* ``time_kernel`` at a first pass's budget (the cell's ``--budget-ms``) and a re-timing's (5x):
  the median, the runs it took and its wall time;
* the outputs after each arm's runs, compared bit for bit with the first arm's.

    python3 bench/replay_ab.py --rounds 4 --out $OUT      # H200
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]
KERNELS = ("fla-softmax", "fla-chunk-cumsum", "liger-dyt", "liger-rms-norm")


def bound_kernel(name: str) -> tuple[Any, Any, float]:
    """(bound variant, timer, the cell's budget ms) for the corpus entry's first config."""
    import jupyter_ktune
    from corpus.entries import BY_ID
    from jupyter_ktune.backends import get_backend

    e = BY_ID[name]
    line, body, _ = e.cell()
    spec = jupyter_ktune.parse_cell(line, body, {"inputs": e.inputs, "reference": e.reference})
    config = next(iter(spec.space.configs()))
    backend = get_backend("triton")
    backend.device()
    bound = backend.compile(spec, config).bind(spec.inputs())
    bound.launch()  # compile/load, and Triton's launcher built, outside the arms
    return bound, backend.timer(), spec.options.budget_ms


def outputs_of(bound: Any) -> dict[str, bytes]:
    return {k: v.tobytes() for k, v in bound.read_outputs().items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=list(KERNELS))
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    import numpy as np

    from jupyter_ktune.measure.timing import HOST_BOUND_MARK, TimingPlan, time_kernel
    from jupyter_ktune.measure.timing import _host_launch_us  # one launch call's host cost

    rows: list[dict] = []
    for name in a.names:
        try:
            bound, timer, budget = bound_kernel(name)
        except Exception as exc:  # noqa: BLE001 - a kernel that cannot bind is a finding
            print(f"{name}: cannot bind ({type(exc).__name__}: {str(exc)[:200]})", flush=True)
            continue
        arms = {"dispatch": bound.launch, "replay": bound.timed_launch}
        for launch in arms.values():  # the replay records its call on its first launch
            time_kernel(launch, timer, TimingPlan(budget_ms=budget), user_launch=bound.launch)
        first: dict[str, bytes] | None = None
        for r in range(a.rounds):
            for arm, launch in arms.items():
                row: dict[str, Any] = {"kernel": name, "arm": arm, "round": r,
                                       "call_us": _host_launch_us(launch, timer, 200)}
                for label, factor in (("first pass", 1), ("re-timing", 5)):
                    t0 = time.perf_counter()
                    tm = time_kernel(launch, timer, TimingPlan(budget_ms=budget * factor),
                                     user_launch=bound.launch)
                    row[label] = {"median_us": tm.median_ms * 1e3, "n": tm.n,
                                  "wall_ms": (time.perf_counter() - t0) * 1e3,
                                  "host_bound": HOST_BOUND_MARK in tm.method}
                out = outputs_of(bound)
                first = first or out
                row["outputs_equal"] = out == first
                rows.append(row)
                print(name, arm, r, f"{row['call_us']:.1f} us/call",
                      *(f"{k}: {row[k]['median_us']:.3f} us n={row[k]['n']} "
                        f"{row[k]['wall_ms']:.1f} ms" for k in ("first pass", "re-timing")),
                      "equal" if row["outputs_equal"] else "OUTPUTS DIFFER", flush=True)
        print(f"{name}: replaying={bound._replay.replaying if bound._replay else None} "
              f"({bound._replay.why_not if bound._replay else 'no replay'})", flush=True)
    summary = []
    for name in dict.fromkeys(r["kernel"] for r in rows):
        for arm in ("dispatch", "replay"):
            rs = [r for r in rows if r["kernel"] == name and r["arm"] == arm]
            s = {"kernel": name, "arm": arm,
                 "call_us": float(np.median([r["call_us"] for r in rs])),
                 "outputs_equal": all(r["outputs_equal"] for r in rs)}
            for k in ("first pass", "re-timing"):
                s[k] = {m: float(np.median([r[k][m] for r in rs])) for m in
                        ("median_us", "n", "wall_ms")}
                s[k]["range_us"] = (min(r[k]["median_us"] for r in rs),
                                    max(r[k]["median_us"] for r in rs))
                s[k]["host_bound"] = sum(r[k]["host_bound"] for r in rs)
            summary.append(s)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "replay_ab.json").write_text(json.dumps({"rows": rows, "summary": summary},
                                                         indent=1))
    print(f"\n{'kernel':18} {'arm':9} {'us/call':>7}  {'first pass: us [range] n wall ms':40} "
          f"{'re-timing: us [range] n wall ms':40} outputs")
    for s in summary:
        cells = [f"{s[k]['median_us']:.3f} [{s[k]['range_us'][0]:.3f}-{s[k]['range_us'][1]:.3f}]"
                 f" n={s[k]['n']:.0f} {s[k]['wall_ms']:.1f}" for k in ("first pass", "re-timing")]
        print(f"{s['kernel']:18} {s['arm']:9} {s['call_us']:7.1f}  {cells[0]:40} {cells[1]:40} "
              f"{'equal' if s['outputs_equal'] else 'DIFFER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
