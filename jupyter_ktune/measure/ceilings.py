"""The device's own ceilings for the roofline: measured once, cached, datasheet numbers never.

A 1 GiB device-to-device copy (bytes read + written over its median time) and an 8192^3 fp16
cuBLAS matrix product (2*N^3 over its median time), each timed with events, ten runs after a
warm-up. (For scale: the device machine's notes give about 4.24 TB/s for a copy and 710-790
TFLOP/s for bf16 through torch on the H200; this module's own numbers have not been recorded in
bench/results yet, so the panel shows whatever it measures, labelled as measured.)
Cached per device and driver in ``~/.cache/jupyter-ktune/ceilings.json``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

CACHE = Path(os.environ.get("KTUNE_CEILINGS_CACHE",
                            Path.home() / ".cache" / "jupyter-ktune" / "ceilings.json"))


def measure_ceilings() -> dict[str, Any] | None:
    """Measure copy bandwidth and matrix rate on the current CUDA device (worker side)."""
    try:
        import cupy as cp

        if cp.cuda.runtime.getDeviceCount() == 0:
            return None
    except Exception:  # noqa: BLE001 - no CuPy or no driver: no ceilings, said so by the panel
        return None
    import numpy as np

    def median_ms(fn: Any, reps: int = 10) -> float:
        fn()
        cp.cuda.runtime.deviceSynchronize()
        times = []
        for _ in range(reps):
            s, e = cp.cuda.Event(), cp.cuda.Event()
            s.record()
            fn()
            e.record()
            e.synchronize()
            times.append(cp.cuda.get_elapsed_time(s, e))
        return float(np.median(times))

    n = 1 << 30
    src = cp.random.randint(0, 255, n, dtype=cp.uint8)
    dst = cp.empty_like(src)
    copy_ms = median_ms(lambda: cp.copyto(dst, src))
    src = dst = None  # free 2 GiB before the matrix product
    size = 8192
    a = cp.random.standard_normal((size, size), dtype=cp.float32).astype(cp.float16)
    b = cp.random.standard_normal((size, size), dtype=cp.float32).astype(cp.float16)
    mm_ms = median_ms(lambda: cp.matmul(a, b))
    return {"bandwidth_gbps": 2 * n / (copy_ms * 1e-3) / 1e9,
            "tflops": 2 * size**3 / (mm_ms * 1e-3) / 1e12,
            "source": "measured: 1 GiB copy, fp16 8192^3 cuBLAS, median of 10"}


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


def device_ceilings(worker: Any, device: Any) -> dict[str, Any] | None:
    """Cached ceilings for ``device`` (a DeviceInfo), measured in the worker when missing."""
    key = _cache_key(device)
    if key is None:
        return None
    cache = _read_cache()
    if key not in cache:
        found = worker.call(measure_ceilings, timeout=120)
        if found is None:
            return None
        cache[key] = found
        try:
            CACHE.parent.mkdir(parents=True, exist_ok=True)
            CACHE.write_text(json.dumps(cache, indent=1))
        except OSError:
            pass  # a read-only home still gets the numbers for this session
    return cache[key]
