"""Does a short warm-up give the same median when the SM clock already reads at its maximum?

The timing protocol warms up for 25 ms of flushed runs so the SM clock has ramped before any run
counts. In a sweep the previous config has just kept the GPU busy, and for a microsecond kernel
those 25 ms were most of its timing (issue 21). The protocol now reads the clock (NVML) first
and, when it is within 10 % of its maximum, warms up for 1 ms instead (``clock_ready``).

This checks the rule on the H200. For each kernel (a microsecond softmax from fla, a bf16 matmul
at 4096^3), in rounds, four arms, their order reversed every other round: time another kernel
as the previous config would, read the clock, then time the kernel with the warm-up the rule
picks ("rule") or the full 25 ms ("full"), with the event floor's empty runs interleaved with
the kernel's (the protocol's default) or measured in 51 runs after them ("floor after", the
protocol before 2026-12-02). It prints each arm's medians over the rounds (median, min, max),
how often the clock read "up", and the host ms each timing took. It also reads the clock after idle
gaps
(0-2000 ms after work), to show when the rule falls back to the full warm-up. Each round also
times the kernel and the empty kernel in alternating flushed runs, to see whether a jump
between a microsecond kernel's medians is in its own events or in the floor measured after.

    python3 bench/warmup_rule.py --out $OUT     # H200
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]


def bound_kernel(name: str) -> tuple:
    """(launch, timer) of the first config of a corpus kernel, or of the bench matmul."""
    from corpus_vs_autotune import build

    from jupyter_ktune.backends import get_backend

    spec, _ = build(name, 4096)
    config = next(iter(spec.space.configs()))
    backend = get_backend("triton")
    backend.device()
    bound = backend.compile(spec, config).bind(spec.inputs())
    return bound.launch, backend.timer()


def interleaved(launch, timer, n: int = 200) -> dict:
    """The kernel's and the empty kernel's event times from alternating flushed runs: the
    floor taken under the same conditions, run by run, as the kernel (a probe: is the jump
    between medians in the kernel's events or in the separately measured floor?)."""
    pairs = {"kernel": [], "empty": []}
    for i in range(n):
        for which, fn in (("kernel", launch), ("empty", timer.empty_launch))[::1 - 2 * (i % 2)]:
            timer.flush_l2()
            s, e = timer.new_event(), timer.new_event()
            timer.record(s)
            fn()
            timer.record(e)
            pairs[which].append((s, e))
    timer.synchronize()
    med = {k: float(np.median([timer.elapsed_ms(s, e) for s, e in v])) for k, v in pairs.items()}
    return {"kernel_event_ms": med["kernel"], "empty_event_ms": med["empty"],
            "difference_ms": med["kernel"] - med["empty"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    from jupyter_ktune.measure.clocks import clock_is_up, read_clocks
    from jupyter_ktune.measure.timing import TimingPlan, time_kernel

    kernels = {"fla-softmax": bound_kernel("fla-softmax"), "matmul": bound_kernel("matmul")}
    out: dict = {"rounds": a.rounds, "kernels": {}, "idle": []}
    arms = {"rule": dict(floor_every=2), "full": dict(floor_every=2),
            "rule, floor after": dict(floor_every=0), "full, floor after": dict(floor_every=0)}
    for name, (launch, timer) in kernels.items():
        other = next(v for k, v in kernels.items() if k != name)
        rows = []
        for i in range(a.rounds):
            order = list(arms) if i % 2 == 0 else list(arms)[::-1]
            row: dict = {}
            for arm in order:
                time_kernel(other[0], other[1], TimingPlan(budget_ms=10))  # the previous config
                clk = read_clocks()
                ready = clock_is_up(clk)
                plan = TimingPlan(budget_ms=10, clock_ready=ready and arm.startswith("rule"),
                                  **arms[arm])
                t0 = time.perf_counter()
                tm = time_kernel(launch, timer, plan)
                row[arm] = {"median_ms": tm.median_ms, "n": tm.n, "warmup_runs": tm.warmup_runs,
                            "event_median_ms": tm.event_median_ms, "floor_ms": tm.event_floor_ms,
                            "clock_mhz": clk.sm_mhz if clk else None, "ready": ready,
                            "host_ms": round((time.perf_counter() - t0) * 1e3, 2)}
            row["interleaved"] = interleaved(launch, timer)
            rows.append(row)
        summary = {}
        for arm in arms:
            med = np.array([r[arm]["median_ms"] for r in rows]) * 1e3
            summary[arm] = {"median_us": float(np.median(med)), "min_us": float(med.min()),
                            "max_us": float(med.max()),
                            "host_ms": float(np.median([r[arm]["host_ms"] for r in rows])),
                            "ready_share": float(np.mean([r[arm]["ready"] for r in rows]))}
        out["kernels"][name] = {"rows": rows, "arms": summary}
    launch, timer = kernels["matmul"]
    for gap_ms in (0, 10, 50, 100, 250, 500, 1000, 2000):
        time_kernel(launch, timer, TimingPlan(budget_ms=10))
        time.sleep(gap_ms / 1e3)
        clk = read_clocks()
        out["idle"].append({"gap_ms": gap_ms, "clock_mhz": clk.sm_mhz if clk else None,
                            "ready": clock_is_up(clk)})
    print(json.dumps(out["idle"]))
    print("per round, softmax (us): corrected median, raw event median, floor per arm | "
          "alternating probe: kernel, empty, difference")
    for r in out["kernels"]["fla-softmax"]["rows"]:
        cells = "  ".join(f"{r[arm]['median_ms'] * 1e3:6.3f} {r[arm]['event_median_ms'] * 1e3:6.3f}"
                          f" {r[arm]['floor_ms'] * 1e3:6.3f}" for arm in arms)
        il = r["interleaved"]
        print(f"  {cells} | {il['kernel_event_ms'] * 1e3:6.3f} {il['empty_event_ms'] * 1e3:6.3f} "
              f"{il['difference_ms'] * 1e3:6.3f}")
    print(f"{'kernel':<12} {'arm':<18} {'ready':>5} {'median us':>10} {'min us':>8} "
          f"{'max us':>8} {'host ms':>8}")
    for name, k in out["kernels"].items():
        for arm, v in k["arms"].items():
            print(f"{name:<12} {arm:<18} {v['ready_share']:>5.2f} {v['median_us']:>10.3f} "
                  f"{v['min_us']:>8.3f} {v['max_us']:>8.3f} {v['host_ms']:>8.1f}")
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "warmup_rule.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
