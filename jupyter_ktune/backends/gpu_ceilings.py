"""An NVIDIA GPU's own ceilings for the roofline, measured with CuPy in the device worker.

A 1 GiB device-to-device copy (bytes read + written over its median time) and an 8192^3 fp16
cuBLAS matrix product (2*N^3 over its median time), each timed with events, ten runs after a
warm-up. The backends whose devices are NVIDIA GPUs name :func:`measure_ceilings` in their
``DeviceInfo`` (``measure_ceilings=``); :mod:`jupyter_ktune.measure.ceilings` caches what it
returns. It lived in ``measure/``, which every backend shares and which names no runtime.
"""

from __future__ import annotations

from typing import Any


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
