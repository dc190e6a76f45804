"""Start a tuning session for a parsed kernel cell and return its live panel.

``%%kernel`` calls this for its own cell; ``jupyter_ktune.panel(spec)`` calls it for any spec,
e.g. a variant of a cell built in code with ``parse_cell`` (the fp8 build of an fp16 cell, a
cell at another problem size), so that variant gets the same sliders, Autotune button and
Bokeh views instead of a printed result. A new panel closes the session of the panel it
replaces: for ``%%kernel``, the last panel of that kernel name (re-running the cell); for a spec
built in code, the last panel of the same kernel and source, so that the fp8 variant's panel
leaves the fp16 cell's panel of the same kernel live.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
import time
from typing import Any

from jupyter_ktune.runner.describe import DEVICE_KNOWN
from jupyter_ktune.spec import KernelSpec
from jupyter_ktune.tuning.pool_warm import start_pool_at_parse

_live: dict[Any, Any] = {}  # what a new panel replaces -> its live panel
_measuring = threading.Lock()  # the ceilings, measured by one panel at a time
# a cell whose autotune list the worker reads at parse: the compile pool starts then, beside it
# (Autotune's first result waited 7.2-11.8 s for the pool's own imports when it started after)
if start_pool_at_parse not in DEVICE_KNOWN:
    DEVICE_KNOWN.append(start_pool_at_parse)

#: The widget stack a panel is made of, imported by :func:`import_widgets_soon`. Only these
#: third-party packages (0.43-0.49 s of the panel's 0.5-0.67 s import on a 2-core machine), not
#: the panel's own modules, which the cell's parse may be importing on the main thread then:
#: two threads importing modules that import each other could meet half-initialized ones.
WIDGET_MODULES = ("ipywidgets", "bokeh.models", "bokeh.plotting", "bokeh.layouts",
                  "bokeh.palettes", "jupyter_bokeh.widgets")


def import_widgets_soon() -> threading.Thread | None:
    """Import the panel's widget stack (ipywidgets, bokeh) on a thread, at a cell's start.

    ``panel_for`` imports it after the cell's parse, and a Triton cell's parse waits for the
    worker to read the cell's module (torch's import first): the import then ran after that
    wait, in series with it, where the worker's import could hide it. Once per process; an
    import that fails here fails again, with its message, where the panel needs it."""
    if all(m in sys.modules for m in WIDGET_MODULES):
        return None

    def run() -> None:
        for name in WIDGET_MODULES:
            with contextlib.suppress(Exception):
                importlib.import_module(name)

    thread = threading.Thread(target=run, name="ktune-import-widgets", daemon=True)
    thread.start()
    return thread


def panel_for(spec: KernelSpec, replaces: Any = None) -> Any:
    """The live panel of ``spec``, its first result shown (it waits for that result).

    ``replaces`` keys the panel this one supersedes (default: the kernel's name, as a cell)."""
    from jupyter_ktune.api import choose_config
    from jupyter_ktune.backends import get_backend
    from jupyter_ktune.errors import CellError
    from jupyter_ktune.measure.ceilings import cached_ceilings
    from jupyter_ktune.runner.client import get_worker
    from jupyter_ktune.runner.describe import cold_phases, open_device, take_cold
    from jupyter_ktune.runner.first_set import claim_first_set
    from jupyter_ktune.session import TuningSession
    from jupyter_ktune.tuning import compile_ahead
    from jupyter_ktune.tuning.pool_warm import learn_from_worker, warm_pool
    from jupyter_ktune.ui.app import KernelPanel

    if not spec.space.params:
        raise CellError(f"kernel {spec.name} declares no tunables, so it has no panel",
                        fix="Declare one (// ktune: BLOCK in [64, 128]) or call run_kernel.")
    get_backend(spec.backend).check(spec)
    worker = get_worker()
    waits, t0 = len(worker.ready_waits_s), time.perf_counter()
    device = open_device(worker, spec.backend)
    # what the parse waited for (the describe request: the worker's start, the backend's
    # imports, the cell's module), then what this panel's device question waited for (the
    # opening's parts are reported once, by whichever waited for them first)
    cold = _added(take_cold(worker, spec),
                  cold_phases(worker, waits, t0, time.perf_counter(), spec.backend))
    pool = warm_pool(spec, device)  # the compile pool starts now: Autotune finds it ready
    limits = worker.limits(spec)  # the inputs' values a require line names: read in the worker
    first = choose_config(spec, None, limits)
    claim_first_set(worker, spec, first)  # its set taken, and its build started, while the
    # notebook makes the panel (0.36-0.40 s of widgets and figures)
    key = spec.name if replaces is None else replaces
    old = _live.pop(key, None)
    if old is not None:
        old.session.close()
    # BokehJS is not put in the notebook (1.3 MB per saved notebook): the jupyter server
    # extension serves bokeh's own copy and the labextension loads it (labextension/src/bokeh.ts)
    session = TuningSession(spec, worker, limits)
    session.cold_phases_ms = cold
    # the pool compiles the configs Autotune will sweep; where the worker's own compile hits
    # the pool's builds in a cache (Triton's), the worker no longer prefetches them
    told = session.compiled_elsewhere if get_backend(spec.backend).pool_builds_cached else None
    compile_ahead.send_soon(pool, spec, limits, then=told, launcher_of=first)
    ceilings = cached_ceilings(device)
    panel = KernelPanel(session, first, ceilings)
    panel.shown()  # the first result, so the output shows numbers (its report may follow)
    if pool is not None and get_backend(spec.backend).shares_pool_hints:
        learn_from_worker(worker, spec)  # the types the run read: no pool process draws a set
    if ceilings is None and device.compute_capability is not None:
        measure_ceilings_after(panel, worker, device)
    _live[key] = panel
    return panel


def measure_ceilings_after(panel: Any, worker: Any, device: Any) -> None:
    """Measure the device's ceilings for the roofline after the first result, on a thread:
    in a fresh notebook they held the first result back by 1.6-2.8 s on the H200 (a 1 GiB
    copy and an 8192^3 product in CuPy, issue 33). Not in the worker: an Autotune pressed
    meanwhile waited 2.1-3.1 s behind them (on an H100); in a process of their own while the
    worker is idle, stopped by its next request and run again later (``gpu_guest``)."""
    from jupyter_ktune.measure.ceilings import device_ceilings
    from jupyter_ktune.runner.gpu_guest import run_beside

    def measure() -> None:
        try:
            with _measuring:  # a second panel's finds the first's in the cache
                found = device_ceilings(worker, device,
                                        lambda probe: run_beside(worker, probe, env=worker.env))
        except Exception:  # noqa: BLE001 - no ceilings: the roofline says so
            return
        if found:
            panel.roofline.set_ceilings(found)
            if panel.result is not None:
                panel.roofline.show(panel.shown())

    threading.Thread(target=measure, name="ktune-ceilings", daemon=True).start()


def _added(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {k: a.get(k, 0.0) + b.get(k, 0.0) for k in {**a, **b}}
