"""A device worker's one timer, built ahead on a thread as the device opens.

A timer compiles its kernels (the L2 flush, the empty kernel, the hold) before its first use.
Built on first use, the first timed config of a worker paid for it: the Triton timer's compiles
and, on Triton 3.6, their launchers, about 0.8 s (fla's softmax as the first kernel of a
session: its first run's "time" phase took 0.76 s against 0.03 s for the next,
bench/results/corpus_vs_autotune/2026-12-01-2251); the CUDA timer's NVRTC compile of its
kernels and CuPy's fill kernel for the hold's gate word, on a cold CuPy cache. The Triton and
CUDA backends start the build when the device opens, beside the first run's compile, inputs
and reference; the result's "time: timer ready" phase is what the first timing still waited.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any


class TimerSlot:
    """A worker's one timer: built on first use, or ahead in a background thread.

    ``get`` waits for a build in progress, so no launch of the build can fall inside a
    measurement; a background build that failed is retried by ``get``, which then raises the
    error where the first config can report it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._timer: Any = None

    def get(self, build: Callable[[], Any]) -> Any:
        """The timer, built by ``build`` if no build has succeeded yet."""
        with self._lock:
            if self._timer is None:
                self._timer = build()
            return self._timer

    def start_ahead(self, build: Callable[[], Any]) -> threading.Thread:
        """Build the timer in a daemon thread now; errors are left to the next :meth:`get`."""
        def run() -> None:
            with contextlib.suppress(Exception):
                self.get(build)

        thread = threading.Thread(target=run, name="ktune-timer-ahead", daemon=True)
        thread.start()
        return thread
