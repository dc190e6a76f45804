"""Where a sweep's wall time went: the per-phase breakdown every sweep benchmark prints.

The worker reports, per config, the ms it spent in each phase of ``run_variant`` (inputs,
reference, bind, verify, time); summed over the sweep and set beside the sweep's wall time,
the rest is compile, queueing and the host's side (``other``). The first input set and its
reference are drawn in a request of their own (``prepare``), and the worker's start is measured
apart by the caller (``worker_start_s``), so neither hides inside a config.
"""

from __future__ import annotations

import time
from typing import Any


def start_worker(backend: str) -> float:
    """Start (or find) the process's device worker; return the seconds it took."""
    from jupyter_ktune.runner.client import get_worker

    t0 = time.perf_counter()
    get_worker().device(backend)
    return time.perf_counter() - t0


def start_pool(backend: str) -> float:
    """Start the process's compile pool as a sweep on one GPU sizes it (every CPU but the
    worker's) and wait until each process has imported the compiler; return the seconds.

    Like the worker, the pool outlives sweeps (``runners.shared_pool``), so it is paid once
    per session and stated apart.
    """
    import os

    from jupyter_ktune.tuning.runners import shared_pool, warm_up

    t0 = time.perf_counter()
    n = max(1, (os.cpu_count() or 2) - 1)
    pool = shared_pool(n, backend)
    for f in [pool.submit(warm_up, backend) for _ in range(2 * n)]:
        f.result()
    return time.perf_counter() - t0


def preload_pool(spec: Any) -> float:
    """Have every process of the started pool, and the device worker, import what ``spec``
    needs (the cell's module and its packages), as they have once the cell ran in a notebook;
    its inputs and reference stay the sweep's own (timed). Returns the seconds."""
    import os

    from jupyter_ktune.runner.client import get_worker
    from jupyter_ktune.tuning.runners import preload_here, shared_pool
    from jupyter_ktune.tuning.runners import preload_pool as preload

    t0 = time.perf_counter()
    futures = preload(shared_pool(max(1, (os.cpu_count() or 2) - 1), spec.backend), spec)
    get_worker().call(preload_here, spec, timeout=600)  # the worker imports the cell too
    for f in futures:
        f.result()
    return time.perf_counter() - t0


def breakdown(report: Any, wall_s: float) -> dict[str, float]:
    """Seconds per phase over a sweep (``report``: a TuneReport), ``other`` = the rest."""
    out: dict[str, float] = {}
    for e in [*report.evaluations]:
        for k, v in e.result.extra.get("phases_ms", {}).items():
            out[k] = out.get(k, 0.0) + v / 1e3
    prep = report.info.get("prepare_ms") or {}
    out["prepare"] = sum(prep.values()) / 1e3
    out["other (compile, queue, host)"] = max(wall_s - sum(out.values()), 0.0)
    pool = report.info.get("pool_compiles") or {}
    if pool:  # CPU seconds in the pool's processes, beside (not part of) the wall time
        out["pool compiles (CPU, summed)"] = pool["sum_s"]
        out["pool compile longest"] = pool["max_s"]
        out["first compile back at"] = pool["first_back_s"]
        for k, v in pool.get("phases_s", {}).items():
            out[f"pool: {k}"] = v
    return {k: round(v, 3) for k, v in out.items()}


def text(phases: dict[str, float]) -> str:
    """``inputs 0.8 s · reference 0.0 s · ...``."""
    return " · ".join(f"{k} {v:.2f} s" for k, v in phases.items())


def worker_ms(report: Any) -> float:
    """The worker's own ms inside ``run_variant`` over the sweep's configs (its phases summed):
    set beside the timeline's ``run`` wait (sent to back, seen from the sweep) it leaves the
    round trips' cost: pickling, the pipe, the static report's seeding."""
    return round(sum(v for e in report.evaluations
                     for v in e.result.extra.get("phases_ms", {}).values()), 2)
