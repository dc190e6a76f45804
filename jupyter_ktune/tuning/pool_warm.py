"""The compile pool started ahead, and what one of its processes learns for all the others.

A notebook's first Autotune press paid for the pool's start: 15 processes spawned, each
importing Triton and the cell's module and calling ``inputs()`` to learn the argument types,
so the first sweep result came 5.5-6.1 s after the press on the H200 (issue 33). Here the pool
is started when the cell first runs (:func:`warm_pool`), and the argument types are read once
(:func:`hints_for`) and handed to every compile (``runners.precompile``).
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import threading
import warnings
from concurrent.futures import Future
from typing import Any

import cloudpickle

from jupyter_ktune.backends import get_backend
from jupyter_ktune.backends.base import COMPILE_ONLY_ENV
from jupyter_ktune.problem_key import inputs_key
from jupyter_ktune.spec import KernelSpec
from jupyter_ktune.tuning import main_guard
from jupyter_ktune.tuning.pool import follow, shared_pool, submit_soon
from jupyter_ktune.tuning.runners import compile_pool_size, preload_pool


def pool_hints(blob: bytes) -> bytes:
    """Pool task: what every compile of a pickled spec shares and one process can learn for
    all (``Backend.pool_hints``: Triton's argument types, one ``inputs()`` call), pickled;
    None where the backend has none or it failed (each compile then learns it itself)."""
    os.environ[COMPILE_ONLY_ENV] = "1"
    spec = cloudpickle.loads(blob)
    try:
        return cloudpickle.dumps(get_backend(spec.backend).pool_hints(spec))
    except Exception:  # noqa: BLE001 - the compiles report it on the cell's line
        return cloudpickle.dumps(None)


_hints: dict[tuple, Future] = {}  # (source hash, inputs key) -> the pickled hints, once known
_hints_lock = threading.Lock()
#: How long a sweep holds its first compiles for hints on their way (the worker's, or the pool
#: task's), rather than have each process call ``inputs()``: fla's 4096^2 operands took 0.7 s
#: per process on the H200, and eight processes drawing at once summed 5.6 s of the sweep's
#: "argument types" (eec153a:bench/results/first_minute/2026-12-06-0056).
HINTS_WAIT_S = 2.0


def _key(spec: KernelSpec) -> tuple:
    """Keyed by the inputs function's one key (:func:`~jupyter_ktune.problem_key.inputs_key`,
    as the Triton backend keys the argument types these hints carry): a changed ``inputs`` is
    a new key, an unchanged one run again is not."""
    return spec.source_hash, inputs_key(spec.inputs)


def _failed(future: Future) -> bool:
    return future.done() and future.exception() is not None


def _empty(future: Future) -> bool:
    return future.done() and not _failed(future) and cloudpickle.loads(future.result()) is None


def hints_for(pool: cf.ProcessPoolExecutor, spec: KernelSpec) -> Future:
    """The hints of ``spec``: known already (:func:`learn_hints`: the device worker read them
    from its first run's input set), or the :func:`pool_hints` task sent to ``pool`` once: a
    panel sends it when its cell first runs (:func:`warm_pool`), so the Autotune press finds
    it done. A failed task (a pool shut down) is sent again."""
    with _hints_lock:
        future = _hints.get(_key(spec))
        if future is not None and not _failed(future):
            return future
        future = _hints[_key(spec)] = Future()
    task = submit_soon(pool, pool_hints, cloudpickle.dumps(spec))  # no wait for a process
    task.add_done_callback(lambda done: follow(future, done))  # unless the worker's came first
    return future


def learn_hints(spec: KernelSpec, blob: bytes | None) -> None:
    """Take the pickled hints the device worker read from the input set its run drew
    (``Backend.known_pool_hints``), so no compile-pool process calls ``inputs()`` for them:
    :func:`hints_for` answers with them at once, and a pool task still running is not waited
    for."""
    if blob is None or cloudpickle.loads(blob) is None:
        return
    with _hints_lock:
        future = _hints.get(_key(spec))
        if future is None or _failed(future) or _empty(future):
            future = _hints[_key(spec)] = Future()
    try:
        future.set_result(blob)
    except cf.InvalidStateError:
        pass  # known already


def learn_from_worker(worker: Any, spec: KernelSpec) -> threading.Thread:
    """Ask the device worker, on a thread, for the hints its first run read (one short
    request, after the first result), and :func:`learn_hints` them."""
    def ask() -> None:
        try:
            learn_hints(spec, worker.call(known_hints, spec, timeout=30.0))
        except Exception:  # noqa: BLE001 - a head start only: the pool task remains
            return

    thread = threading.Thread(target=ask, name="ktune-pool-hints", daemon=True)
    thread.start()
    return thread


def known_hints(spec: KernelSpec) -> bytes | None:
    """Worker-side: the backend's hints for ``spec`` from an input set it drew, pickled; None
    where it drew none (nothing is drawn for them here)."""
    hints = get_backend(spec.backend).known_pool_hints(spec)
    return None if hints is None else cloudpickle.dumps(hints)


def read_hints(future: Future | None, wait_s: float = 0.0) -> Any:
    """The value of a done :func:`pool_hints` future (waiting up to ``wait_s`` for it); None
    while it runs, or none, or failed: a compile sent meanwhile learns the argument types in
    its own process, as before."""
    if future is None:
        return None
    try:
        return cloudpickle.loads(future.result(timeout=wait_s))
    except Exception:  # noqa: BLE001 - a head start only (a timeout included)
        return None


#: Pool processes that import the cell's module at parse, beside the device worker's import.
#: All 15 at once slowed the worker's own import (the first result) by 3-4 s: fla's modules
#: 12.0-15.9 s in the worker against 8.0 s in a lone process on the same H200
#: (bench/results/corpus_vs_autotune/2026-12-04-1959). Two are enough for Autotune's first
#: results; :func:`warm_pool` has the rest import it once the worker has. Against the pool started
#: with the panel, on an H100 host: liger's Autotune first result 1.87 -> 0.55 s, fla's the same,
#: both first cells the same (bench/results/first_minute_ab/2026-12-07-2117, calls 3-5).
PARSE_PRELOADERS = 2
POOL_AT_PARSE_ENV = "KTUNE_POOL_AT_PARSE"  # "0": the pool starts with warm_pool (to compare)


def start_pool_at_parse(spec: KernelSpec, device: Any) -> cf.ProcessPoolExecutor | None:
    """Start the compile pool while the device worker still reads the cell's module at parse
    (:mod:`jupyter_ktune.runner.describe`), and have its processes import that module too.

    Once the worker imported the kernel's package at parse, the first result came 3-4 s after
    the pool started, and each pool process then paid the same import (fla, liger: 7-9 s on a
    cold H200 process), so Autotune's first result waited 7.2-11.8 s after the press (run
    first_minute/2026-12-04-1554, in the history at faf832e). Started here, the imports run
    beside the worker's, in :data:`PARSE_PRELOADERS` processes only. The argument types are
    not read yet: the spec's space is not complete before the describe answers;
    :func:`warm_pool` sends that task with the complete spec. ``KTUNE_POOL_AT_PARSE=0``: none
    here, the pool starts with :func:`warm_pool` (to compare: its imports run beside the
    worker's import of torch)."""
    if os.environ.get(POOL_AT_PARSE_ENV) == "0":
        return None
    pool = _pool_for(spec, device)
    if pool is not None:
        preload_pool(pool, spec, PARSE_PRELOADERS)
    return pool


def _pool_for(spec: KernelSpec, device: Any) -> cf.ProcessPoolExecutor | None:
    if not getattr(device, "available", False) or device.compute_capability is None:
        return None
    with warnings.catch_warnings():  # an unguarded script gets its warning from tune() itself
        warnings.simplefilter("ignore", main_guard.UnguardedScriptWarning)
        n = compile_pool_size(spec.backend, None, 1)
    return shared_pool(n, spec.backend) if n else None


def warm_pool(spec: KernelSpec, device: Any) -> cf.ProcessPoolExecutor | None:
    """Start the compile pool a sweep of ``spec`` will use, now, in the background: its
    processes import the compiler and the cell's module, and one reads the argument types
    (:func:`hints_for`), while the cell's first result is measured. A panel calls it when its
    cell first runs, so the Autotune press finds the pool ready (issue 33: the first sweep
    result came 5.5-6.1 s after the press, most of it the pool's start). Only where a device
    runs the variants: on a CPU machine the pool would take the cores the interpreter needs.
    Returns the pool (None: no pool for this backend or here)."""
    pool = _pool_for(spec, device)
    if pool is None:
        return None
    hints_for(pool, spec)
    preload_pool(pool, spec)
    return pool
