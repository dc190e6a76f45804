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
import warnings
from concurrent.futures import Future
from typing import Any

import cloudpickle

from jupyter_ktune.backends import get_backend
from jupyter_ktune.backends.base import COMPILE_ONLY_ENV
from jupyter_ktune.problem_key import inputs_key
from jupyter_ktune.spec import KernelSpec
from jupyter_ktune.tuning import main_guard
from jupyter_ktune.tuning.pool import shared_pool
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


_hints: dict[tuple, Future] = {}  # (pool, source hash, inputs key) -> pool_hints task


def hints_for(pool: cf.ProcessPoolExecutor, spec: KernelSpec) -> Future:
    """The :func:`pool_hints` task of ``spec`` on ``pool``, sent once: a panel sends it when
    its cell first runs (:func:`warm_pool`), so the Autotune press finds it done. Keyed by
    the inputs function's one key (:func:`~jupyter_ktune.problem_key.inputs_key`, as the
    Triton backend keys the argument types these hints carry): a changed ``inputs`` is a new
    key, an unchanged one run again is not."""
    key = (id(pool), spec.source_hash, inputs_key(spec.inputs))
    future = _hints.get(key)
    if future is None or (future.done() and future.exception() is not None):
        future = _hints[key] = pool.submit(pool_hints, cloudpickle.dumps(spec))
    return future


def read_hints(future: Future | None) -> Any:
    """The value of a done :func:`pool_hints` future; None while it runs, or none, or failed:
    a compile sent meanwhile learns the argument types in its own process, as before."""
    if future is None or not future.done():
        return None
    try:
        return cloudpickle.loads(future.result())
    except Exception:  # noqa: BLE001 - a head start only
        return None


#: Pool processes that import the cell's module at parse, beside the device worker's import.
#: All 15 at once slowed the worker's own import (the first result) by 3-4 s: fla's modules
#: 12.0-15.9 s in the worker against 8.0 s in a lone process on the same H200
#: (bench/results/corpus_vs_autotune/2026-12-04-1959). Two are enough for Autotune's first
#: results; :func:`warm_pool` has the rest import it once the worker has.
PARSE_PRELOADERS = 2


def start_pool_at_parse(spec: KernelSpec, device: Any) -> cf.ProcessPoolExecutor | None:
    """Start the compile pool while the device worker still reads the cell's module at parse
    (:mod:`jupyter_ktune.runner.describe`), and have its processes import that module too.

    Once the worker imported the kernel's package at parse, the first result came 3-4 s after
    the pool started, and each pool process then paid the same import (fla, liger: 7-9 s on a
    cold H200 process), so Autotune's first result waited 7.2-11.8 s after the press (run
    first_minute/2026-12-04-1554, in the history at faf832e). Started here, the imports run
    beside the worker's, in :data:`PARSE_PRELOADERS` processes only. The argument types are
    not read yet: the spec's space is not complete before the describe answers;
    :func:`warm_pool` sends that task with the complete spec."""
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
