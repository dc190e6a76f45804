"""The event floor measured interleaved with the kernel's runs, or in 51 runs after them.

On the CUDA backend's scale kernel (16 KiB: about 1.5 us; 64 MiB: about 48 us), in one process:
six rounds of four timings each, floor interleaved (``floor_every=2``, the protocol's default)
or after (``floor_every=0``, the protocol before 2026-12-02), with the short warm-up of a warm
clock or the full one; the order of the two floors reversed every round. Prints each timing
and, per arm, the median of the medians with their range and the range of the floors.

    python3 bench/floor_ab.py       # H200; bench/results/floor_ab/
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]


def main() -> None:
    from timing_vs_ncu import SCALE, make_inputs, reference

    from jupyter_ktune.backends import get_backend
    from jupyter_ktune.measure.timing import TimingPlan, time_kernel
    from jupyter_ktune.spec import parse_cell

    be = get_backend("cuda")
    be.device()
    rows = []
    for label, n in (("tiny", 1 << 12), ("mid", 1 << 24)):
        spec = parse_cell("scale --inputs inputs --reference reference --out y --config BLOCK=256",
                          SCALE, {"inputs": make_inputs(n), "reference": reference})
        b = be.compile(spec, spec.space.config(BLOCK=256)).bind(spec.inputs())
        timer = be.timer()
        for i in range(6):
            for every in ((2, 0) if i % 2 == 0 else (0, 2)):
                for ready in (True, False):
                    t = time_kernel(b.launch, timer, TimingPlan(budget_ms=200, floor_every=every,
                                                                clock_ready=ready))
                    rows.append((label, every, ready, t.median_ms * 1e3, t.event_median_ms * 1e3,
                                 t.event_floor_ms * 1e3, t.n, t.warmup_runs))
    for r in rows:
        print("%-5s every=%d ready=%-5s median %8.3f us  events %8.3f  floor %8.3f  n=%4d w=%4d"
              % r)
    for label in ("tiny", "mid"):
        for every in (2, 0):
            for ready in (True, False):
                sel = [r for r in rows if r[0] == label and r[1] == every and r[2] == ready]
                m, f = [r[3] for r in sel], [r[5] for r in sel]
                print(f"{label} every={every} ready={ready}: median of medians "
                      f"{np.median(m):.3f} us [{min(m):.3f}, {max(m):.3f}], floors "
                      f"[{min(f):.3f}, {max(f):.3f}]")


if __name__ == "__main__":
    main()
