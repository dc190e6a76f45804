"""Where do a sweep's ~0.8 s per config of "verify" go on the device? (issue 21)

Runs the bf16 matmul of bench/sweep_vs_autotune.py through one worker: three configs, each twice
(the second run finds the kernel loaded), with and without Triton's on-disk cache warmed by a
static compile first, and prints the worker's phase times per run. If the first run's verify
holds the time and the second's does not, the cost is the kernel's first launch (JIT or cubin
load) and not the comparison.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    import sweep_vs_autotune as sva

    from jupyter_ktune.runner.client import DeviceWorker
    from jupyter_ktune.spec import parse_cell

    inputs, reference = sva.make_io(args.size)
    spec = parse_cell("matmul --backend triton --inputs inputs --reference reference --out c "
                      "--budget-ms 10", sva.SPACE + sva.KERNEL,
                      {"inputs": inputs, "reference": reference})
    configs = list(spec.space.configs())[:6]
    rows = []
    with DeviceWorker() as worker:
        for i, config in enumerate(configs):
            warmed = i % 2 == 1
            if warmed:  # the static compile fills Triton's cache, as the sweep's pool does
                worker.compile(spec, config)
            for attempt in (1, 2):
                t0 = time.perf_counter()
                r = worker.run(spec, config)
                rows.append({"config": dict(config), "cache warmed first": warmed,
                             "run": attempt, "status": r.status.value,
                             "wall_ms": round((time.perf_counter() - t0) * 1e3, 1),
                             "phases_ms": {k: round(v, 1) for k, v in r.phases_ms.items()}})
                print(json.dumps(rows[-1]), flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "verify_phase_probe.json").write_text(json.dumps(rows, indent=1))
    print(f"\n{'config':8} {'warmed':7} {'run':4} {'wall ms':>8}  phases (ms)")
    for k, row in enumerate(rows):
        print(f"{k // 2:<8} {str(row['cache warmed first']):7} {row['run']:<4} "
              f"{row['wall_ms']:8.1f}  {row['phases_ms']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
