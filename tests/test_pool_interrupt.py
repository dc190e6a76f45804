"""The compile pool outlives a notebook Interrupt.

Jupyter's Interrupt sends SIGINT to the kernel's process group, pool processes included; one
that dies of KeyboardInterrupt breaks the ProcessPoolExecutor for every later sweep.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from jupyter_ktune.tuning.runners import make_pool


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_pool_process_ignores_sigint_and_keeps_working() -> None:
    pool = make_pool(1)
    try:
        pid = pool.submit(os.getpid).result(timeout=120)
        os.kill(pid, signal.SIGINT)
        time.sleep(1.0)
        assert pool.submit(os.getpid).result(timeout=120) == pid  # same process, still alive
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
