"""Guest jobs for tests/test_gpu_guest.py: each runs in an interpreter of its own
(``runner.gpu_guest``), so it is found on the tests' import path, as the fake backend is."""

from __future__ import annotations

import os
import time
from pathlib import Path


def slow_then_fast() -> dict:
    """Its first start sleeps (a worker request stops it); a later one returns at once. Each
    start leaves a file named by its count, holding its process id."""
    folder = Path(os.environ["KTUNE_TEST_GUEST_DIR"])
    starts = len(list(folder.glob("start-*")))
    (folder / f"start-{starts}").write_text(str(os.getpid()))
    if starts == 0:
        time.sleep(60)
    return {"tflops": 1.5, "starts": starts + 1}


def fails() -> dict:
    """A job that fails on its own: no device, say."""
    folder = Path(os.environ["KTUNE_TEST_GUEST_DIR"])
    (folder / f"start-{len(list(folder.glob('start-*')))}").write_text(str(os.getpid()))
    raise RuntimeError("no device here")


def takes_a_while() -> dict:
    """Writes when it began and ended (wall seconds), half a second apart."""
    folder = Path(os.environ["KTUNE_TEST_GUEST_DIR"])
    began = time.time()
    time.sleep(0.5)
    (folder / f"job-{os.getpid()}").write_text(f"{began} {time.time()}")
    return {}
