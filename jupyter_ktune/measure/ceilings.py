"""The device's own ceilings for the roofline: measured once, cached, datasheet numbers never.

A 1 GiB device-to-device copy (bytes read + written over its median time) and an 8192^3 fp16
cuBLAS matrix product (2*N^3 over its median time), each timed with events, ten runs after a
warm-up. (For scale: the device machine's notes give about 4.24 TB/s for a copy and 710-790
TFLOP/s for bf16 through torch on the H200; this module's own numbers have not been recorded in
bench/results yet, so the panel shows whatever it measures, labelled as measured.)
Cached per device and driver in ``~/.cache/jupyter-ktune/ceilings.json``.

This module keeps the cache and asks the worker; how a device is measured is its backend's
(``DeviceInfo.measure_ceilings``, e.g. :mod:`jupyter_ktune.backends.gpu_ceilings`), so no CUDA
library is named here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

CACHE = Path(os.environ.get("KTUNE_CEILINGS_CACHE",
                            Path.home() / ".cache" / "jupyter-ktune" / "ceilings.json"))


def _cache_key(device: Any) -> str | None:
    if not getattr(device, "available", False) or device.compute_capability is None:
        return None
    return f"{device.name} | driver {device.driver}"


def _read_cache() -> dict[str, Any]:
    try:
        return json.loads(CACHE.read_text())
    except (OSError, ValueError):
        return {}


def cached_ceilings(device: Any) -> dict[str, Any] | None:
    """The ceilings measured earlier for ``device``, without asking the worker (None: none)."""
    key = _cache_key(device)
    return _read_cache().get(key) if key else None


def device_ceilings(worker: Any, device: Any,
                    measure: Callable[[Callable[[], Any]], Any] | None = None
                    ) -> dict[str, Any] | None:
    """Cached ceilings for ``device`` (a DeviceInfo), measured when missing: ``measure(probe)``
    (the panel's: beside the worker, ``runner.gpu_guest.run_beside``), else in the worker."""
    key = _cache_key(device)
    probe = device.measure_ceilings
    if key is None:
        return None
    cache = _read_cache()
    if key not in cache:
        if probe is None:  # a device its backend cannot measure
            return None
        found = measure(probe) if measure is not None else worker.call(probe, timeout=120)
        if found is None:
            return None
        cache[key] = found
        try:
            CACHE.parent.mkdir(parents=True, exist_ok=True)
            CACHE.write_text(json.dumps(cache, indent=1))
        except OSError:
            pass  # a read-only home still gets the numbers for this session
    return cache[key]
