"""Held against unheld timed runs, with the host idle and with the host busy (issue 21).

A sweep's first pass read 4-25 us for 1-2 us kernels that read 1.4-1.9 us timed alone
(bench/results/corpus_vs_autotune/2026-12-02-1420), with no HOST-BOUND flag: one timed run of a
microsecond kernel costs the host 61 us and the GPU 70 us (bench/results/launch_overhead/
2026-12-01-2305), so a host slowed by 15 % lets the GPU drain its queue and the events time
launch calls. ``measure.held_runs`` enqueues each batch behind a hold. This times the same
kernels both ways, interleaved (A B A B ...), in three host conditions:

* ``idle``: nothing else runs;
* ``gil``: a Python thread in this process computes in bursts (2 ms of work, 3 ms asleep), as
  the worker's own threads do when a compile result is unpickled or a static report is built
  beside a timing (two threads computing without pause starved the timing thread so badly, at
  5 ms per GIL switch, that the first attempt ran past its 120 s cap:
  bench/results/hold_ab/2026-12-02-1654);
* ``cpu``: one busy process per core, as the compile pool's processes are during a sweep.

Kernels: a Triton corpus kernel as a sweep binds it (fla's chunk cumsum, ~1.4 us) and, through
CuPy, a 4096-element scale (~2 us) and a 64 MiB copy (~30 us: held and unheld must agree there,
where the unheld protocol agreed with ncu to 1 %).

    python3 bench/hold_ab.py --rounds 3 --out $OUT      # H200
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

HOLD_NAMES = ("hold", "release", "hold_timeouts")


class Unheld:
    """The timer without its hold: the protocol enqueues as it did before the hold."""

    def __init__(self, timer: Any) -> None:
        self._timer = timer

    def __getattr__(self, name: str) -> Any:
        if name in HOLD_NAMES:
            raise AttributeError(name)
        return getattr(self._timer, name)


def _burn(stop: Any) -> None:
    while not stop.is_set():
        sum(i * i for i in range(2000))


def _bursts(stop: Any) -> None:
    while not stop.is_set():
        t_end = time.perf_counter() + 0.002
        while time.perf_counter() < t_end:
            sum(i * i for i in range(200))
        time.sleep(0.003)


class Load:
    """A host condition, started and stopped around a block."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.stop_t = threading.Event()
        self.stop_p = mp.Event()
        self.parts: list = []

    def __enter__(self) -> Load:
        if self.kind == "gil":
            self.parts = [threading.Thread(target=_bursts, args=(self.stop_t,), daemon=True)]
        elif self.kind == "cpu":
            self.parts = [mp.Process(target=_burn, args=(self.stop_p,), daemon=True)
                          for _ in range(os.cpu_count() or 4)]
        for p in self.parts:
            p.start()
        time.sleep(0.2 if self.parts else 0)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop_t.set()
        self.stop_p.set()
        for p in self.parts:
            p.join(5)


def triton_kernel(name: str) -> tuple[Any, Any]:
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
    return bound.launch, backend.timer()


def cupy_kernels() -> dict[str, tuple[Any, Any]]:
    import cupy

    from jupyter_ktune.backends.cuda.timer import CupyTimer

    timer = CupyTimer()
    src = r"""
    extern "C" __global__ void scale(const float* x, float* y, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2.0f * x[i]; }
    extern "C" __global__ void copy(const float4* x, float4* y, long long n) {
      for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
           i += (long long)gridDim.x * blockDim.x) y[i] = x[i]; }
    """
    mod = cupy.RawModule(code=src)
    scale, copy = mod.get_function("scale"), mod.get_function("copy")
    xs, ys = cupy.ones(4096, cupy.float32), cupy.zeros(4096, cupy.float32)
    n4 = (64 << 20) // 16
    xc, yc = cupy.ones(n4 * 4, cupy.float32), cupy.zeros(n4 * 4, cupy.float32)
    return {"cuda scale 4096": (lambda: scale((16,), (256,), (xs, ys, cupy.int32(4096))), timer),
            "cuda copy 64 MiB": (lambda: copy((132 * 8,), (512,), (xc, yc, cupy.int64(n4))),
                                 timer)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--budget-ms", type=float, default=10.0, help="a sweep's first-pass budget")
    ap.add_argument("--cap-s", type=float, default=25.0, help="wall seconds per host condition")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    import numpy as np

    from jupyter_ktune.measure.timing import HOST_BOUND_MARK, TimingPlan, time_kernel

    print("building the kernels", flush=True)
    kernels = {"triton fla-chunk-cumsum": triton_kernel("fla-chunk-cumsum"), **cupy_kernels()}
    plan = TimingPlan(budget_ms=a.budget_ms)
    rows: list[dict] = []
    for cond in ("idle", "gil", "cpu"):
        t_cond = time.perf_counter() + a.cap_s
        with Load(cond):
            for name, (launch, timer) in kernels.items():
                for arm_timer in (timer, Unheld(timer)):  # warm both paths once
                    time_kernel(launch, arm_timer, plan)
                for r in range(a.rounds):
                    if time.perf_counter() > t_cond:
                        print(f"[hold_ab] {cond}: past --cap-s {a.cap_s:g}, {name} round {r} "
                              "and after not run", flush=True)
                        break
                    for arm, t in (("held", timer), ("unheld", Unheld(timer))):
                        t0 = time.perf_counter()
                        tm = time_kernel(launch, t, plan)
                        rows.append({"condition": cond, "kernel": name, "arm": arm, "round": r,
                                     "median_us": tm.median_ms * 1e3,
                                     "floor_us": (tm.event_floor_ms or 0) * 1e3, "n": tm.n,
                                     "wall_ms": (time.perf_counter() - t0) * 1e3,
                                     "host_bound": HOST_BOUND_MARK in tm.method,
                                     "method": tm.method})
                        print(cond, name, arm, r, f"{tm.median_ms * 1e3:.2f} us",
                              f"{rows[-1]['wall_ms']:.0f} ms", flush=True)
    timeouts = {n: int(t.hold_timeouts()) for n, (_l, t) in kernels.items()}
    summary = []
    for cond in ("idle", "gil", "cpu"):
        for name in kernels:
            for arm in ("held", "unheld"):
                rs = [r for r in rows if (r["condition"], r["kernel"], r["arm"]) == (cond, name, arm)]
                m = [r["median_us"] for r in rs]
                if not m:
                    continue
                summary.append({"condition": cond, "kernel": name, "arm": arm,
                                "median_of_medians_us": float(np.median(m)),
                                "min_us": min(m), "max_us": max(m),
                                "floor_us": float(np.median([r["floor_us"] for r in rs])),
                                "wall_ms": float(np.median([r["wall_ms"] for r in rs])),
                                "host_bound": sum(r["host_bound"] for r in rs)})
    out = {"rounds": a.rounds, "budget_ms": a.budget_ms, "hold_timeouts": timeouts,
           "summary": summary, "rows": rows, "example_method": rows[0]["method"]}
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "hold_ab.json").write_text(json.dumps(out, indent=1))
    print("hold timeouts:", timeouts)
    print(f"{'condition':9} {'kernel':26} {'arm':7} {'median':>8} {'min':>8} {'max':>8} "
          f"{'floor':>7} {'wall ms':>8} HOST-BOUND")
    for s in summary:
        print(f"{s['condition']:9} {s['kernel']:26} {s['arm']:7} {s['median_of_medians_us']:8.2f} "
              f"{s['min_us']:8.2f} {s['max_us']:8.2f} {s['floor_us']:7.2f} {s['wall_ms']:8.1f} "
              f"{s['host_bound']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
