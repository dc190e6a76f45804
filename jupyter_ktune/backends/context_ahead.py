"""The GPU's primary context, created on a thread while a fresh worker imports its backend.

A fresh worker's first Triton cell imports torch (2.3-2.6 s on an H100 host), then asks torch for
the device, which initialises the CUDA driver and the device's context: "device context", 0.19 s of
fla's first result in bench/results/first_minute/2026-12-06-0934 (0cf38d4 in the history). Neither
needs the other: the driver's ``cuInit`` and ``cuDevicePrimaryCtxRetain`` are called here through
ctypes, which releases the GIL around each call, so they run on another core while the import runs
Python. torch, CuPy and Triton all use the device's primary context (the runtime
API's), so they find the driver initialised and the context made. On an H100 host, medians
of 5 fresh processes a side (4 for the CUDA cell): fla's "device context" 195 -> 15 ms
(c65966b:bench/results/first_minute_ab/2026-12-06-1235); the CUDA C++ cell's 230 -> 110 ms,
and the rest of its CuPy opening 76 -> 0 ms (c65966b:bench/results/first_minute_ab/2026-12-06-1239).

Only in the device worker, where a GPU is visible and the backend will open it anyway; never in
a compile-pool process (compiles are ahead of time, for a target) nor the notebook (issue 34).
The context is retained for the worker's life, as the backend's own would be. Nothing here can
fail the cell: any error leaves the backend to open the device as before, and report.
"""

from __future__ import annotations

import ctypes
import os
import threading

from jupyter_ktune.backends.base import COMPILE_ONLY_ENV, nvidia_gpu_visible

_started: list[threading.Thread] = []
_lock = threading.Lock()
RESULT: dict[str, object] = {}  # "error": the driver call that failed, or "context": True
SWITCH_ENV = "KTUNE_CONTEXT_AHEAD"  # "0": the backend opens the context itself (to compare)


def start_in_worker() -> None:
    """:func:`start`, in a device worker on a machine that shows a GPU; nothing in a
    compile-only process or where no GPU is visible."""
    if nvidia_gpu_visible() and not os.environ.get(COMPILE_ONLY_ENV) \
            and os.environ.get(SWITCH_ENV) != "0":
        start()


def start(ordinal: int = 0) -> threading.Thread:
    """Begin initialising the driver and retaining device ``ordinal``'s primary context, once
    per process; returns the thread doing it."""
    with _lock:
        if not _started:
            thread = threading.Thread(target=_retain, args=(ordinal,),
                                      name="ktune-context-ahead", daemon=True)
            _started.append(thread)
            thread.start()
        return _started[0]


def _retain(ordinal: int) -> None:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        RESULT["error"] = f"libcuda: {exc}"
        return
    device, context = ctypes.c_int(), ctypes.c_void_p()
    for name, call in (("cuInit", lambda: cuda.cuInit(0)),
                       ("cuDeviceGet", lambda: cuda.cuDeviceGet(ctypes.byref(device), ordinal)),
                       ("cuDevicePrimaryCtxRetain",
                        lambda: cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device))):
        code = call()
        if code != 0:  # CUresult: 0 is CUDA_SUCCESS
            RESULT["error"] = f"{name} returned {code}"
            return
    RESULT["context"] = True
