"""What a first_minute notebook side records beyond its marks, by wrapping the product's
steps (measurement only): the ``%%kernel`` cell's steps, what happens between the Autotune
press and ``panel.tune``'s return, the worker's start, and what the roofline ceilings' guest
job did."""

from __future__ import annotations

import time
from typing import Any


def trace_cell() -> dict[str, float]:
    """Seconds spent in the steps of a ``%%kernel`` cell, by wrapping them (measurement only).

    ``ui.app`` (ipywidgets and bokeh, 0.55-0.67 s) is imported where ``panel_for`` imports it,
    at its start, and its ``KernelPanel`` wrapped then: imported here, before the cell's start,
    that import left the cell and ran in front of the worker's start of work, an order no
    notebook runs. The other steps' modules are imported by ``%load_ext`` already."""
    import functools
    import importlib

    spans: dict[str, float] = {}

    def wrap(owner: Any, attr: str, label: str | None, before: Any = None) -> None:
        *path, last = attr.split(".")
        for p in path:
            owner = getattr(owner, p)
        fn = getattr(owner, last)

        @functools.wraps(fn)
        def timed(*a: Any, _fn: Any = fn, **k: Any) -> Any:
            if before is not None:
                before()
            t = time.perf_counter()
            try:
                return _fn(*a, **k)
            finally:
                if label is not None:
                    spans[label] = spans.get(label, 0.0) + time.perf_counter() - t
        setattr(owner, last, timed)

    def panel_modules() -> None:  # what panel_for's first lines import, once
        app = importlib.import_module("jupyter_ktune.ui.app")
        if not hasattr(app.KernelPanel.__init__, "__wrapped__"):
            wrap(app, "KernelPanel.__init__", "KernelPanel()")

    magics = importlib.import_module("jupyter_ktune.magics")
    wrap(magics, "panel_for", None, before=panel_modules)  # inside the timed span below
    steps = {"jupyter_ktune.magics:parse_cell": "parse_cell",
             "jupyter_ktune.runner.client:DeviceWorker.device": "worker.device()",
             "jupyter_ktune.measure.ceilings:device_ceilings": "device_ceilings",
             "jupyter_ktune.magics:panel_for": "panel_for (all)"}
    for where, label in steps.items():
        module, _, attr = where.partition(":")
        wrap(importlib.import_module(module), attr, label)
    return spans


def trace_tune(panel: Any, t0: float) -> dict[str, Any]:
    """What happens between the press and ``panel.tune``'s return, in seconds after the press:
    the sweep's end, the winner set on the sliders, and every delivery to the panel (its
    latency, whether it was the current request, its phases). Filled while the sweep runs."""
    from jupyter_ktune.tuning.sweep import Sweep

    tail: dict[str, Any] = {"deliveries": []}
    run = Sweep.run

    def timed_run(self: Any) -> Any:
        try:
            return run(self)
        finally:
            tail["sweep_run_returned_s"] = round(time.perf_counter() - t0, 4)
            Sweep.run = run
    Sweep.run = timed_run  # type: ignore[method-assign]
    set_values = panel.controls.set_values

    def timed_set(values: Any, *a: Any, **k: Any) -> Any:
        tail["set_values_s"] = round(time.perf_counter() - t0, 4)
        return set_values(values, *a, **k)
    panel.controls.set_values = timed_set

    def delivered(d: Any) -> None:
        if getattr(d, "late", False) or d.current:
            tail["deliveries"].append({
                "at_s": round(time.perf_counter() - t0, 4), "latency_s": round(d.latency_s, 4),
                "late": bool(getattr(d, "late", False)), "config": dict(d.result.config),
                "phases_ms": {k: round(v, 1) for k, v in (d.result.phases_ms or {}).items()}})
    panel.session.subscribe(delivered)
    with_sass = panel.session._with_sass

    def timed_sass(*a: Any, **k: Any) -> Any:
        t = time.perf_counter()
        try:
            return with_sass(*a, **k)
        finally:
            tail["with_sass_s"] = round(tail.get("with_sass_s", 0) + time.perf_counter() - t, 4)
    panel.session._with_sass = timed_sass
    return tail


def worker_start() -> float | None:
    """The device worker's start, spawn to ready, in seconds (None: not started)."""
    from jupyter_ktune.runner.client import get_worker

    return get_worker().last_start_s


def guest_after(panel: Any, wait_s: float = 5.0) -> dict[str, Any]:
    """What the roofline ceilings' guest job did (``runner.gpu_guest``: started, stopped by a
    request, finished), waiting up to ``wait_s`` for it once every timing above is taken."""
    from jupyter_ktune.runner import gpu_guest

    deadline = time.perf_counter() + wait_s
    while gpu_guest.STATS["finished"] + gpu_guest.STATS["failed"] == 0 \
            and time.perf_counter() < deadline:
        time.sleep(0.05)
    roofline = getattr(panel, "roofline", None)
    return {**gpu_guest.STATS, "panel_has_ceilings": bool(getattr(roofline, "ceilings", None))}
