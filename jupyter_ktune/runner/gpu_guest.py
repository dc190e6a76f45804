"""GPU work beside the device worker that gives way to it: the roofline's ceilings.

The ceilings (a 1 GiB copy and an 8192^3 product in CuPy, with CuPy's first-use costs) ran as
a worker request after a fresh notebook's first result, and an Autotune pressed then waited
2.1-3.1 s for them before its sweep began: the sweep's first request queued behind theirs
(``setup_ms`` "device" in ``0d9de0a:bench/results/corpus_vs_autotune/2026-12-05-1519``, on an
H100). Here such a job runs in an interpreter of its own, only while the worker has been idle for
:data:`IDLE_S`, and every worker request stops it before it is sent
(``DeviceWorker.request`` calls :func:`give_way`): a request never waits for it, and nothing
the worker times shares the GPU with it. A job stopped that way runs again at the next idle
spell. The job is a module-level function named ``module:qualname``; what it returns must be
JSON.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

IDLE_S = 0.5  #: s the worker must have been idle before a guest job starts
ATTEMPTS = 50  #: starts of one job at most (each stopped by a request); then it gives up
POLL_S = 0.05

_lock = threading.Lock()  # a guest starts, or the worker's next request stops them, not both
_one_job = threading.Lock()  # one guest at a time: two would share the GPU, as with the worker
_running: set[subprocess.Popen] = set()
_yielded: set[subprocess.Popen] = set()
#: What guest jobs did in this process (benchmarks report it): started, stopped by a request,
#: finished with a value, failed or timed out on their own (or returned no value).
STATS = {"started": 0, "stopped": 0, "finished": 0, "failed": 0}


def give_way() -> None:
    """Stop every guest job now and wait for its process to exit: the worker is about to be
    sent a request (the caller has marked itself in flight, so none starts meanwhile)."""
    with _lock:
        for proc in list(_running):
            proc.kill()
            proc.wait()
            _yielded.add(proc)
            _running.discard(proc)


# a guest outliving its notebook would share the GPU with whatever runs next
atexit.register(give_way)


def run_beside(worker: Any, fn: Callable[[], Any], timeout: float = 120.0,
               env: Mapping[str, str] | None = None) -> Any:
    """Run ``fn`` in a fresh interpreter while ``worker`` is idle (``worker.idle_s()``: seconds
    since its last request ended, 0 while one is in flight) and return what it returned.
    None where it failed on its own, ran past ``timeout``, or was stopped :data:`ATTEMPTS`
    times. Blocks (also while another guest job runs): call it on a thread of its own."""
    with _one_job:
        return _run(worker, f"{fn.__module__}:{fn.__qualname__}", timeout, env)


def _run(worker: Any, name: str, timeout: float, env: Mapping[str, str] | None) -> Any:
    for _ in range(ATTEMPTS):
        while worker.idle_s() < IDLE_S:
            time.sleep(POLL_S)
        with _lock:
            if worker.idle_s() < IDLE_S:  # a request began between the two looks
                continue
            proc = subprocess.Popen([sys.executable, "-m", __name__, name, str(os.getpid())],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    stdin=subprocess.DEVNULL, env=None if env is None else
                                    dict(env))
            _running.add(proc)
            STATS["started"] += 1
        try:
            out, timed_out = proc.communicate(timeout=timeout)[0], False
        except subprocess.TimeoutExpired:
            give_way()
            proc.communicate()  # reads to the end and closes the pipe of the killed job
            out, timed_out = "", True
        with _lock:
            _running.discard(proc)
            stopped = proc in _yielded and not timed_out
            _yielded.discard(proc)
            STATS["stopped"] += stopped
        if stopped:
            continue  # a request came: run it again at the next idle spell
        value = _value(out) if proc.returncode == 0 else None
        with _lock:
            STATS["failed" if value is None else "finished"] += 1
        return value
    return None


def _value(out: bytes | str) -> Any:
    """The JSON value on the job's last line of output; None where it printed none."""
    lines = out.strip().splitlines()
    try:
        return json.loads(lines[-1]) if lines else None
    except ValueError:
        return None


def _main(name: str, parent: int) -> None:
    from jupyter_ktune.runner.parent_death import exit_with_parent

    exit_with_parent(parent)  # a notebook killed with kill -9 takes its guest with it
    module, _, qualname = name.partition(":")
    fn: Any = importlib.import_module(module)
    for part in qualname.split("."):
        fn = getattr(fn, part)
    sys.stdout.write(json.dumps(fn()))


if __name__ == "__main__":
    _main(sys.argv[1], int(sys.argv[2]))
