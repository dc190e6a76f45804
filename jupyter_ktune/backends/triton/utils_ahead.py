"""Triton's driver utilities, built in a subprocess while a fresh worker imports torch.

Triton's NVIDIA driver compiles a small C extension (``cuda_utils``: module loading, device
queries, TMA descriptors) with the host's C compiler the first time a process touches
``triton.runtime.driver.active``, and caches it in ``TRITON_CACHE_DIR``. On a cold cache, a
fresh worker's first Triton cell paid that build after torch's import, on its first result's
path (Triton's driver utilities: 0.60 s cold, 0.20 s warm on an H100 host,
bench/results/import_costs/2026-12-06-0549). Nothing in the build needs torch, so a separate
interpreter runs it while the worker imports torch (2.3-2.6 s there): the worker's own build then
finds the extension in the cache. The subprocess costs an interpreter and Triton's import on
another core; on a warm cache it finds the extension and exits.

Only in the device worker on a machine that shows a GPU, once per process; never under the
interpreter or in a compile-only pool process (neither loads the driver). Nothing here can fail
the cell: if the subprocess fails or is slow, the worker builds the utilities itself, as before
(Triton writes its cache entries atomically, so two builds at once are safe).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from jupyter_ktune.backends.base import COMPILE_ONLY_ENV, nvidia_gpu_visible

BUILD = "from triton.backends.nvidia.driver import CudaUtils; CudaUtils()"
SWITCH_ENV = "KTUNE_UTILS_AHEAD"  # "0": no subprocess, the worker builds them itself (to compare)
_started: list[subprocess.Popen] = []
_lock = threading.Lock()


def start_in_worker() -> subprocess.Popen | None:
    """Start the build in a device worker on a GPU machine (the process, or None)."""
    if not nvidia_gpu_visible() or os.environ.get(COMPILE_ONLY_ENV) \
            or os.environ.get(SWITCH_ENV) == "0":
        return None
    with _lock:
        if _started:
            return _started[0]
        try:
            proc = subprocess.Popen([sys.executable, "-c", BUILD], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except OSError:
            return None
        _started.append(proc)
    threading.Thread(target=proc.wait, name="ktune-triton-utils", daemon=True).start()  # reaped
    return proc
