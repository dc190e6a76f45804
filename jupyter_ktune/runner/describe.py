"""Parse-time questions about a cell's module, answered by the device worker; and the cold
costs the notebook's requests paid before a first result, as phases of that result.

A Triton cell's ``@triton.autotune`` list is only known once the cell's module has run, which
imports the kernel's package (fla, liger-kernel: seconds). The notebook never imports it (nor
torch, nor triton: no CUDA context here), and the device worker has to import it to run the
cell anyway, so the worker reads the list (request ``("describe", spec)``, answered by the
backend's ``describe(spec)``) and keeps the module loaded for the run: the package is imported
once. It used to be read in a child interpreter at parse and imported again by the worker
(16-20 s, then ~12 s, of fla's first cell on the H200, issue 33).

What the parse waited for (the worker's start, the backend's imports and the device, the cell's
module) is noted per worker and cell (:func:`note_cold`) and added to the cell's first result
by its panel (:func:`take_cold`): every cold cost is a phase of the first result. The device's
opening is split as the worker timed it (``DeviceInfo.opening_ms``: "torch import", "triton
import", "device context"; :func:`cold_phases`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from jupyter_ktune.errors import CellError, KtuneError
from jupyter_ktune.spec import KernelSpec

DESCRIBE_TIMEOUT_S = 300.0  # a package's first import from a cold disk, a slow file system
MODULE_PHASE = "kernel module import"  # the describe request: the cell's module in the worker

#: called with (spec, device) once the worker has said which device it has and before it reads
#: the cell's module: the notebook layer appends the compile pool's start there
#: (``ui.start``), so the pool imports the module beside the worker; the core knows no pool
DEVICE_KNOWN: list[Callable[[KernelSpec, Any], Any]] = []

_cold: dict[tuple[int, str, str], dict[str, float]] = {}
#: (id(worker), backend) -> the device opening's parts and when they came (:func:`open_device`)
_openings: dict[tuple[int, str], tuple[dict[str, float], float]] = {}
_cold_lock = threading.Lock()


def describe_in_worker(spec: KernelSpec, worker: Any = None,
                       timeout: float = DESCRIBE_TIMEOUT_S) -> dict[str, Any]:
    """The backend's ``describe(spec)`` as the device worker answers it (plain data).

    The backend opens the device first (``worker.device``): it picks its mode (GPU or
    interpreter) before the spec is unpickled there. What each step waited for is noted as a
    cold phase of the cell's first result (:func:`take_cold`)."""
    if worker is None:
        from jupyter_ktune.runner.client import get_worker

        worker = get_worker()
    waits, t0 = len(worker.ready_waits_s), time.perf_counter()
    try:
        device = open_device(worker, spec.backend)
        t1 = time.perf_counter()
        for hook in DEVICE_KNOWN:  # the notebook layer starts the compile pool here (ui.start)
            hook(spec, device)
        # the cell without the user's functions: the worker unpickles no inputs() at parse
        bare = replace(spec, inputs=None, reference=None, compare=None)
        kind, value = worker.request(("describe", bare), timeout)
    except KtuneError as exc:  # the worker died or hung while it loaded the module
        raise CellError(f"the device worker failed while it loaded the cell's module: {exc}",
                        line=1, fix="Check the module-level code of the cell (its imports).")\
            from None
    t2 = time.perf_counter()
    if kind != "ok":
        raise CellError(f"the device worker could not read the cell's module: {value}", line=1,
                        fix="Check the module-level code of the cell (its imports).")
    phases = cold_phases(worker, waits, t0, t1, spec.backend)
    phases[MODULE_PHASE] = (t2 - t1) * 1e3
    note_cold(worker, spec, phases)
    return value


def open_device(worker: Any, backend: str, torch_soon: bool = False) -> Any:
    """``worker.device(backend)``, its opening's parts (``DeviceInfo.opening_ms``) kept for the
    first result that waited for them (:func:`cold_phases`). The worker sends the parts only to
    the request that opened the device, and that is often one whose answer nobody reads: a
    ``%%kernel`` cell's start opens it on a thread (``magics.warm_worker``) while the cell is
    parsed, and the parse's own request queues behind it. ``torch_soon``: the cell uses torch
    (:func:`.torch_warm.line_uses_torch`)."""
    device = worker.device(backend, torch_soon=True) if torch_soon else worker.device(backend)
    parts = getattr(device, "opening_ms", None)
    if parts:
        with _cold_lock:
            _openings[(id(worker), backend)] = (dict(parts), time.perf_counter())
    return device


def cold_phases(worker: Any, waits_before: int, started: float, ended: float,
                backend: str) -> dict:
    """A first request's cold costs, ms per phase, for a wait from ``started`` to ``ended``
    (``time.perf_counter``): waiting for the worker's start (0 when ``%load_ext`` started it
    early enough) and opening the device, which in a fresh worker is the backend's imports and
    the device context.

    Where the worker timed the opening's parts ("torch import", "triton import", "device
    context"...) and the opening ended within this wait (:func:`open_device` kept them), each
    is a phase, once, and the rest of the wait (the request's round trip, jupyter_ktune's own
    imports in the worker) is "<backend> device request". An opening begun on the cell's
    start thread began a moment before this wait (the parse between): its parts are reported
    whole. Without the parts (an older worker, a backend that does not time them) the wait is
    one phase, "<backend> imports and device". Phases under 1 ms are left out."""
    waited = sum(worker.ready_waits_s[waits_before:])
    opening_ms = max(ended - started - waited, 0.0) * 1e3
    with _cold_lock:
        parts, at = _openings.pop((id(worker), backend), ({}, 0.0))
    parts = parts if started <= at else {}  # opened before this wait: not what it waited for
    out = {"worker start": waited * 1e3, **parts}
    if parts:
        out[f"{backend} device request"] = max(opening_ms - sum(parts.values()), 0.0)
    else:
        out[f"{backend} imports and device"] = opening_ms
    return {k: v for k, v in out.items() if v >= 1.0}


def _key(worker: Any, spec: KernelSpec) -> tuple[int, str, str]:
    return (id(worker), spec.name, spec.source)


def note_cold(worker: Any, spec: KernelSpec, phases: dict[str, float]) -> None:
    """Keep cold costs paid for ``spec`` at parse until its panel's first result takes them."""
    kept = {k: v for k, v in phases.items() if v >= 1.0}
    if kept:
        with _cold_lock:
            _cold[_key(worker, spec)] = kept


def take_cold(worker: Any, spec: KernelSpec) -> dict[str, float]:
    """The cold costs noted for ``spec`` on ``worker`` (once: a second panel pays none)."""
    with _cold_lock:
        return _cold.pop(_key(worker, spec), {})
