"""The compile pool: the processes that compile a sweep's upcoming configs on the CPU cores.

Never forked from the notebook (it has threads and maybe a GPU context): forked from
multiprocessing's fork server, a clean process that imported the compiler (and torch, for a cell
that imports it) once, or spawned where there is none (:func:`pool_context`); warmed with the
backend's compiler imports; kept for later sweeps of the same process (:func:`shared_pool`);
at a lower CPU priority than the device worker; deaf to the notebook's Interrupt. What the
pool runs is in :mod:`jupyter_ktune.tuning.runners` (``precompile``, ``preload``).
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import contextlib
import os
import re
import signal
import threading
from concurrent.futures import Future
from typing import Any

import cloudpickle


def warm_up(backend: str) -> None:
    """Pool task: import the backend and its compiler (``warm_compiler``: only the compiler;
    torch is the cell's business, never a compile process's just to learn argument types,
    issue 33), so the first real compile does not pay."""
    from jupyter_ktune.backends import get_backend

    get_backend(backend).warm_compiler()


#: How much nicer than the sweep a compile-pool process runs (its ptxas and nvcc inherit it).
POOL_NICENESS = 10


def pool_process_setup(parent: int | None = None, env: dict[str, str] | None = None) -> None:
    """Pool initializer: leave Interrupt to the notebook, compile at a lower priority, and
    exit when the process ``parent`` that started the pool dies (:func:`die_with`). ``env``:
    the notebook's environment when the pool started, which a process forked from the fork
    server (started earlier, with the environment of then) takes, as a spawned one would.

    Jupyter signals the kernel's whole process group: each pool process died of
    KeyboardInterrupt with a traceback (bench/results/notebook_headless/2026-12-01-1618) and
    the pool was broken for the next sweep. The sweep stops in the notebook's process."""
    with contextlib.suppress(ValueError, AttributeError):  # not the main thread / no SIGINT
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if env is not None and env != dict(os.environ):  # forked by the fork server
        os.environ.clear()
        os.environ.update(env)
    lower_priority()
    if parent is not None:
        die_with(parent, forked=env is not None)


def die_with(parent: int, forked: bool = False) -> None:
    """Exit once the notebook (or script) ``parent`` is gone, whatever killed it (issue 34).

    A pool process waits on its call queue, whose pipe it holds both ends of: ``kill -9`` of
    the notebook left it alive (354 MB), and with it multiprocessing's resource tracker and the
    pool's named semaphores in /dev/shm. Once every pool process has exited the tracker sees its
    pipe close and unlinks them. A watch of the parent id, not ``PR_SET_PDEATHSIG``: the pool is
    started from whichever thread submits first, and would die with that thread.
    """
    from jupyter_ktune.runner.parent_death import exit_with_parent, exit_with_process

    if forked:  # the fork server's child: the notebook is not its parent
        exit_with_process(parent)
    else:
        exit_with_parent(parent)


def lower_priority() -> None:
    """Compile at a lower CPU priority than the device worker.

    The pool takes every CPU but the worker's. While it compiles, the worker times kernels,
    and the protocol relies on the host enqueueing the next kernel while the L2 flush keeps the
    GPU busy (``measure.timing``); a worker that waits for a CPU behind ptxas can leave a gap
    inside the events of a microsecond kernel. On the H200, fla's swiglu picked a 2.40 us
    config whose autotune-picked rival re-timed at 1.65 us after the pool was idle
    (bench/results/corpus_vs_autotune/2026-12-01-1315). A nicer pool yields the CPU to the
    worker the moment it wakes, and costs the compiles nothing while the worker sleeps.
    """
    with contextlib.suppress(OSError, AttributeError):  # no os.nice on Windows
        os.nice(POOL_NICENESS)


def make_pool(workers: int, backend: str | None = None) -> cf.ProcessPoolExecutor:
    """Start a spawn-context process pool (never fork a notebook with threads and a GPU context).

    With ``backend``, every process is started now and imports that backend's compiler, while
    the caller goes on (a sweep starts its device worker meanwhile): spawned processes otherwise
    start one by one as configs arrive and each pays its imports on the critical path.
    """
    context = pool_context(preload_for(backend) if backend is not None else [])
    forked = context.get_start_method() == "forkserver"
    pool = cf.ProcessPoolExecutor(max_workers=workers, initializer=pool_process_setup,
                                  initargs=(os.getpid(), dict(os.environ) if forked else None),
                                  mp_context=context)
    if backend is not None:
        for _ in range(workers):
            submit_soon(pool, warm_up, backend)
    return pool


_soon: dict[int, list[tuple[Any, tuple, Future]]] = {}  # id(pool) -> submits not made yet
_soon_lock = threading.Lock()


def submit_soon(pool: cf.ProcessPoolExecutor, fn: Any, *args: Any) -> Future:
    """``pool.submit(fn, *args)`` made on a thread of its own (one per pool while it has
    submits to make, in the order asked); returns at once a future that follows the task's
    (one cancelled before its submit is never sent).

    A submit starts a pool process when none is idle, and a process forked from the fork
    server waits until that server has imported its preload: torch for a cell that imports it,
    1.4-1.9 s. A fresh notebook's first Triton cell started its pool at parse, before it asked
    the worker for the cell's module, and its main thread waited there 0.5 s for the server
    while the worker sat idle (a sampled first cell of fla's matmul on an H100, issue 33)."""
    out: Future = Future()
    with _soon_lock:
        queued = _soon.get(id(pool))
        if queued is None:
            queued = _soon[id(pool)] = []
            threading.Thread(target=_submit_in_order, args=(pool,), name="ktune-pool-submit",
                             daemon=True).start()
        queued.append((fn, args, out))
    return out


def _submit_in_order(pool: cf.ProcessPoolExecutor) -> None:
    while True:
        with _soon_lock:
            queued = _soon[id(pool)]
            if not queued:
                del _soon[id(pool)]  # the next submit_soon starts a thread again
                return
            fn, args, out = queued.pop(0)
        if not out.set_running_or_notify_cancel():
            continue  # cancelled before it was sent
        try:
            task = pool.submit(fn, *args)
            task.add_done_callback(lambda done, out=out: follow(out, done))
        except BaseException as exc:  # noqa: BLE001 - a pool shut down or broken meanwhile
            if not out.done():
                out.set_exception(exc)


def follow(out: Future, task: Future) -> None:
    """Give ``out`` the outcome of the done ``task`` (a cancelled task: CancelledError), unless
    ``out`` has one already (another source answered first)."""
    try:
        if task.cancelled():
            out.set_exception(cf.CancelledError())
        elif task.exception() is not None:
            out.set_exception(task.exception())
        else:
            out.set_result(task.result())
    except cf.InvalidStateError:
        pass


FORKSERVER_ENV = "KTUNE_POOL_FORKSERVER"  # "0": spawn every compile process, as before


_preload_chosen = False  # the fork server's preload is chosen once, by the first to ask
_preload_lock = threading.Lock()


def pool_context(preload: list[str]) -> Any:
    """The multiprocessing context of the compile pools: the fork server where this platform
    has one, whose first start imports the modules ``preload`` names, once; else spawn.

    Spawned, each of 15 processes imported Triton, torch and the cell's package itself, all at
    once beside the device worker's own imports: on an H100 Autotune pressed at the first
    result found no process ready for 1.8-3.3 s after the press, while the compiles it waited
    for took 0.05-0.35 s each (``4c899fe:bench/results/corpus_vs_autotune/2026-12-05-1821``);
    forked from a server that imported them once, the first compile sent ahead was back 6-16
    ms after the press (eec153a:bench/results/corpus_vs_autotune/2026-12-05-1839). The server is
    multiprocessing's own (one per notebook) and its preload is the first one asked for (a
    cell's start: :func:`start_fork_server`); what it lacks, a process imports for itself, as
    a spawned one does. The server never opens the GPU (compiles are ahead of time, for a
    target)."""
    import multiprocessing

    if os.environ.get(FORKSERVER_ENV, "1") == "0" \
            or "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    global _preload_chosen
    with _preload_lock:
        if preload and not _preload_chosen:  # the first asked, a cell's start: kept
            _preload_chosen = True
            context.set_forkserver_preload(["__main__", "jupyter_ktune.tuning.runners", *preload])
    return context


def preload_for(backend: str, cell: str = "") -> list[str]:
    """What a compile process of ``backend`` imports before its first compile: the backend's
    compiler modules, and torch where ``cell`` imports it (the cell's module imports it in
    each process otherwise: 2-3 s each on an H100 host)."""
    import importlib.util

    from jupyter_ktune.backends import get_backend

    names = list(getattr(get_backend(backend), "compiler_modules", ()))
    if re.search(r"^\s*(import|from)\s+torch\b", cell, re.M) \
            and importlib.util.find_spec("torch") is not None:
        names.append("torch")
    return names


def start_fork_server(backend: str, cell: str) -> None:
    """Start the compile pools' fork server now, on a thread, with ``backend``'s compiler
    (and torch, where ``cell`` imports it) imported in it: a ``%%kernel`` cell calls this when
    it starts, where a GPU is visible, so the pool its panel starts a few seconds later forks
    ready processes. Nothing where the pools are spawned."""
    context = pool_context(preload_for(backend, cell))
    if context.get_start_method() != "forkserver":
        return
    from multiprocessing import forkserver

    threading.Thread(target=forkserver.ensure_running, name="ktune-fork-server",
                     daemon=True).start()


_pools: dict[tuple[Any, ...], cf.ProcessPoolExecutor] = {}
_pools_lock = threading.Lock()


def shared_pool(workers: int, backend: str) -> cf.ProcessPoolExecutor:
    """The process's compile pool for ``backend``, started on first use and kept for later sweeps.

    A sweep started from a notebook's panel should not pay for spawning its compile processes
    and importing the compiler again (seconds with Triton): the device worker already outlives
    sweeps, now the pool does too. Keyed by the environment that a compile reads, so changing
    ``TRITON_CACHE_DIR`` between sweeps gets fresh processes. Shut down at interpreter exit.
    """
    key = (workers, backend, os.environ.get("TRITON_CACHE_DIR"), os.environ.get("KTUNE_CACHE_DIR"))
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None or getattr(pool, "_broken", False):
            if not _pools:
                atexit.register(close_pools)
            pool = _pools[key] = make_pool(workers, backend)
        return pool


def close_pools() -> None:
    """Shut the kept compile pools down (at exit, or to free the CPUs)."""
    with _pools_lock:
        for pool in _pools.values():
            pool.shutdown(wait=False, cancel_futures=True)
        _pools.clear()


def unpack_precompiled(future: Future) -> tuple[Any, dict[str, float]]:
    """``(static report, failure or None; seconds per phase in the pool process)`` of a done
    :func:`precompile` future."""
    if future.exception() is not None:
        return None, {}
    return cloudpickle.loads(future.result())


def pool_summary(compiled: list[tuple[float, dict[str, float]]]) -> dict[str, Any]:
    """The compile pool's share of a sweep, from ``(seconds into the sweep it came back, its
    phases in the pool process)`` per compile: how many, their summed and longest time, when
    the first came back, and the summed seconds per phase (issue 21)."""
    compiled = [(at, p) for at, p in compiled if "total" in p]
    if not compiled:
        return {}
    phases: dict[str, float] = {}
    for _, p in compiled:
        for k, v in p.items():
            phases[k] = phases.get(k, 0.0) + v
    return {"n": len(compiled), "sum_s": round(phases["total"], 3),
            "max_s": round(max(p["total"] for _, p in compiled), 3),
            "first_back_s": round(min(at for at, _ in compiled), 3),
            "phases_s": {k: round(v, 3) for k, v in phases.items() if k != "total"}}
