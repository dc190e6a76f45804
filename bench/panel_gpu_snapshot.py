"""What does the live panel show for a GPU run? A panel's results saved on the device.

Builds the live panel for the project's bf16 Triton matmul (4096^3, the 72-config space of
bench/sweep_vs_autotune.py) on the GPU, as the ``%%kernel`` magic does, runs an Autotune sweep
from it (greedy, 24 configs), and saves the panel with :func:`jupyter_ktune.ui.replay.save_panel`
to ``{out}/h200_matmul.panel.json``. On a machine with a browser the docs screenshot is then made
from that file (ui-tests/tests/panel.spec.ts, ``KTUNE_PANEL_REPLAY``): the figures hold the
numbers measured here. ``--check`` builds the spec only (CPU).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--budget", type=int, default=24)
    ap.add_argument("--check", action="store_true", help="build the spec only (CPU)")
    ap.add_argument("--out", type=Path, default=Path("."))
    args = ap.parse_args()

    import sweep_vs_autotune as sva

    from jupyter_ktune.api import parse_cell

    inputs, reference = sva.make_io(args.size)
    spec = parse_cell("matmul --backend triton --inputs inputs --reference reference --out c "
                      "--budget-ms 20", sva.SPACE + sva.KERNEL,
                      {"inputs": inputs, "reference": reference})
    print(f"matmul {args.size}^3: {spec.space.count().text()}")
    if args.check:
        return 0

    from jupyter_ktune.measure.ceilings import device_ceilings
    from jupyter_ktune.runner.client import DeviceWorker
    from jupyter_ktune.session import TuningSession
    from jupyter_ktune.ui.app import KernelPanel
    from jupyter_ktune.ui.replay import save_panel

    with DeviceWorker() as worker:
        device = worker.device(spec.backend)
        limits = worker.limits(spec)
        session = TuningSession(spec, worker, limits)
        start = spec.space.default(limits)
        panel = KernelPanel(session, start, device_ceilings(worker, device))
        first = panel.result
        print("first result:", first.status.value, first.reason[:160])
        t0 = time.perf_counter()
        report = panel.tune("greedy", args.budget)
        print(f"sweep: {time.perf_counter() - t0:.1f} s, {report.counts}")
        print(report.summary())
        path = save_panel(panel, args.out / "h200_matmul.panel.json")
        print(f"saved {len(panel.history)} results to {path} ({path.stat().st_size} bytes)")
        session.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
