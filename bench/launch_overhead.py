"""Host cost of the calls one timed run makes, for a microsecond kernel (issue 21).

A timed run enqueues an L2 flush, two events and the kernel. When the kernel and the flush take
tens of microseconds on the GPU, the host's enqueue cost decides how long a config's timing
takes. This measures each call's host cost by a loop of N enqueues (no synchronize inside),
then the GPU time of the same N runs, for a corpus kernel bound as a sweep binds it.

    python3 bench/launch_overhead.py fla-chunk-cumsum --out $OUT     # H200
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]


def per_call_us(fn, n: int, sync) -> float:
    fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    host = (time.perf_counter() - t0) / n * 1e6
    sync()
    return round(host, 2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("kernel", nargs="?", default="fla-chunk-cumsum")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    from corpus.entries import BY_ID

    import jupyter_ktune
    from jupyter_ktune.backends import get_backend
    from jupyter_ktune.measure.timing import TimingPlan, time_kernel

    e = BY_ID[a.kernel]
    line, body, _ = e.cell()
    spec = jupyter_ktune.parse_cell(line, body, {"inputs": e.inputs, "reference": e.reference})
    config = next(iter(spec.space.configs()))
    backend = get_backend("triton")
    backend.device()
    variant = backend.compile(spec, config)
    bound = variant.bind(spec.inputs())
    timer = backend.timer()
    sync = timer.synchronize
    out = {"kernel": a.kernel, "config": dict(config), "n": a.n}
    out["kernel launch us"] = per_call_us(bound.launch, a.n, sync)
    out["flush us"] = per_call_us(timer.flush_l2, a.n, sync)
    out["empty launch us"] = per_call_us(timer.empty_launch, a.n, sync)
    out["two events us"] = per_call_us(lambda: (timer.record(timer.new_event()),
                                                timer.record(timer.new_event())), a.n, sync)

    def one_run():
        timer.flush_l2()
        s, t = timer.new_event(), timer.new_event()
        timer.record(s)
        bound.launch()
        timer.record(t)

    out["one timed run, host us"] = per_call_us(one_run, a.n, sync)
    s, t = timer.new_event(), timer.new_event()
    timer.record(s)
    for _ in range(a.n):
        one_run()
    timer.record(t)
    sync()
    out["one timed run, GPU us"] = round(timer.elapsed_ms(s, t) / a.n * 1e3, 2)
    for budget in (5.0, 25.0):
        t0 = time.perf_counter()
        tm = time_kernel(bound.launch, timer, TimingPlan(budget_ms=budget, warmup_ms=25.0))
        out[f"time_kernel at --budget-ms {budget:g}: wall ms"] = round(
            (time.perf_counter() - t0) * 1e3, 2)
        out[f"time_kernel at --budget-ms {budget:g}: runs"] = int(tm.times_ms.size)
    print(json.dumps(out, indent=1))
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "launch_overhead.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
