"""Probe: does CUPTI kernel tracing perturb the kernel it times? Events vs CUPTI, interleaved.

    PYTHONPATH=/tmp/site:. python3 bench/events_vs_cupti.py

For a memory-bound kernel at two grid sizes and two block sizes, alternate four times between
(A) CUDA events only and (B) CUPTI concurrent-kernel records (events recorded too), 60 runs
each, L2 flushed (read) before each run. Prints medians in microseconds.
"""

from __future__ import annotations

import numpy as np

from jupyter_ktune.api import parse_cell
from jupyter_ktune.backends.cuda.backend import BACKEND
from jupyter_ktune.measure.timing import timed_runs

SRC = open("bench/timing_vs_ncu.py").read().split('SCALE = """')[1].split('"""')[0]


def main() -> None:
    timer = BACKEND.timer()
    print(f"{'case':<26} {'mode':<7} {'events µs':>10} {'cupti µs':>10}")
    for n in (1 << 24, 1 << 28):
        for block in (256, 1024):
            spec = parse_cell("scale", SRC.replace("[128, 256, 512]", "[256, 1024]"), {})
            v = BACKEND.compile(spec, spec.space.config(BLOCK=block))
            x = np.random.rand(n).astype(np.float32)
            b = v.bind(dict(x=x, y=np.empty_like(x), n=n))
            timed_runs(b.launch, timer, 30, True)
            for rep in range(3):
                for mode in ("events", "cupti"):
                    ev, kt = timed_runs(b.launch, timer, 60, True, mode == "cupti")
                    k = f"{np.median(kt) * 1e3:10.2f}" if kt else f"{'-':>10}"
                    print(f"n=2^{n.bit_length() - 1} BLOCK={block:<5} rep{rep} {mode:<7} "
                          f"{np.median(ev) * 1e3:10.2f} {k}", flush=True)


if __name__ == "__main__":
    main()
