"""Where a sweep's variants are compiled and timed.

* **Precompile pool**: a process pool on the CPU cores compiles upcoming configs while the GPU
  times others (:func:`precompiled` says what each backend precompiles).
* :class:`LocalRunner`: one :class:`~jupyter_ktune.runner.client.DeviceWorker` per GPU of this
  host (``CUDA_VISIBLE_DEVICES`` per worker), each timing one variant at a time.
* :class:`DaskRunner`: a ``dask.distributed`` cluster; each Dask worker process owns its own
  DeviceWorker and runs the same path (``DeviceWorker.run``), results come back as futures.

The notebook process never imports CUDA: GPUs are counted with ``nvidia-smi -L``.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import queue
import shutil
import subprocess
import threading
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import cloudpickle

from jupyter_ktune.backends import get_backend
from jupyter_ktune.backends.base import COMPILE_ONLY_ENV, LAUNCHER_AHEAD_ENV
from jupyter_ktune.errors import CompileFailure, KtuneError
from jupyter_ktune.measure.static import SWEEP_STATIC_ENV
from jupyter_ktune.results import RunResult
from jupyter_ktune.runner.client import DeviceWorker, RequestAbandoned, get_worker
from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec
from jupyter_ktune.tuning import main_guard
from jupyter_ktune.tuning.pool import (  # noqa: F401 - the pool's names, re-exported here
    POOL_NICENESS,
    close_pools,
    lower_priority,
    make_pool,
    pool_process_setup,
    shared_pool,
    submit_soon,
    warm_up,
)


def precompiled(backend: str) -> str | None:
    """What the CPU pool compiles ahead for ``backend`` (its ``precompile``); None: no pool."""
    return get_backend(backend).precompile


def compile_pool_size(backend: str, asked: int | None, slots: int, remote: bool = False) -> int:
    """Processes of a sweep's compile pool: ``asked``, or the CPU count less one per device
    slot for a backend with a precompile step (:func:`precompiled`); none for a Dask cluster
    (remote workers compile for themselves), nor in an unguarded script (spawned processes
    would run the script's ``tune()`` again: ``main_guard``, with a warning)."""
    if remote:
        return 0
    n = asked
    if n is None:
        if precompiled(backend) is None:
            return 0
        n = max(1, (os.cpu_count() or 2) - slots)
    where = main_guard.unguarded_call() if n > 0 else None
    if where is not None:
        warnings.warn(main_guard.UNGUARDED.format(where=where, cpus=n),
                      main_guard.UnguardedScriptWarning, stacklevel=4)
        return 0
    return max(0, n)


def detect_gpus() -> int:
    """Count the NVIDIA GPUs visible to this host (``nvidia-smi -L``), 0 when none or unknown."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [v for v in visible.split(",") if v.strip() and v.strip() != "-1"]
        if not ids:
            return 0
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20,
                             check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    n = sum(1 for line in out.splitlines() if line.startswith("GPU "))
    return min(n, len(ids)) if visible is not None else n


def precompile(blob: bytes) -> bytes:
    """Pool task: compile one (spec, config) ahead; returns the pickled ``(static report or
    failure, seconds per phase in this process)``: ``unpickle`` (the spec and the functions it
    names), the backend's own phases where it reports them (``compile_phases``), ``total``."""
    t0 = time.perf_counter()
    os.environ[COMPILE_ONLY_ENV] = "1"  # a pool process compiles, never launches
    os.environ[SWEEP_STATIC_ENV] = "1"  # and reports what a sweep reads (no SASS mix)
    spec, config, *more = cloudpickle.loads(blob)
    ahead, hints = (more + [False, None])[:2]
    os.environ[LAUNCHER_AHEAD_ENV] = "1" if ahead else ""  # see launcher_ahead
    phases = {"unpickle": time.perf_counter() - t0}
    backend = get_backend(spec.backend)
    try:
        if hints is not None:
            backend.seed_pool_hints(spec, hints)
        backend.check(spec)
        out: Any = backend.static_report(spec, config)
    except CompileFailure as exc:
        out = exc
    except Exception as exc:  # noqa: BLE001 - the worker will report it with its own context
        out = KtuneError(f"[ktune] precompile failed: {type(exc).__name__}: {exc}")
    phases.update(backend.compile_phases)
    phases["total"] = time.perf_counter() - t0
    try:
        return cloudpickle.dumps((out, phases))
    except Exception:  # noqa: BLE001
        return cloudpickle.dumps((None, phases))


def launcher_ahead(blob: bytes) -> tuple[bool, float]:
    """Pool task: build the kernel's host launcher for a pickled (spec, config) without
    compiling it, beside the sweep's first compiles; (built, seconds). False where the backend
    has nothing to build (``backends.triton.launcher_ahead``)."""
    os.environ[COMPILE_ONLY_ENV] = "1"
    spec, config, *hints = cloudpickle.loads(blob)
    backend = get_backend(spec.backend)
    try:
        if hints and hints[0] is not None:
            backend.seed_pool_hints(spec, hints[0])
        return backend.launcher_ahead(spec, config)
    except Exception:  # noqa: BLE001 - only a head start: the compiles' own path remains
        return False, 0.0


def preload(blob: bytes) -> float:
    """Pool task: :func:`preload_here` for a pickled spec (0 s where the process has it)."""
    return preload_here(cloudpickle.loads(blob))


def preload_pool(pool: cf.ProcessPoolExecutor, spec: KernelSpec,
                 processes: int | None = None) -> list[Future]:
    """Ask every process of ``pool`` (or about ``processes`` of them) to preload ``spec``: twice
    as many tasks as processes, so each takes one while the others import (a process that has
    it returns at once)."""
    blob = cloudpickle.dumps(spec)
    n = pool._max_workers if processes is None else min(processes, pool._max_workers)  # noqa: SLF001
    return [submit_soon(pool, preload, blob) for _ in range(2 * n)]  # no wait for a process


def seed_static(source_hash: str, arch: str, config: Config, static: Any,
                race_ms: float | None = None, quick: bool = False) -> bool:
    """Worker-side, before a sweep's run: take a precompiled static report so the run does not
    recompile it, the incumbent's median to race against, and whether it may launch before
    the kernel's host launcher is built (``execute.quick_launch``): one round trip for all."""
    from jupyter_ktune.runner.execute import quick_launch, race_against
    from jupyter_ktune.runner.execute import seed_static as seed

    race_against(source_hash, config, race_ms)
    quick_launch(source_hash, config, quick)
    return seed(source_hash, arch, config, static) if static is not None else False


def prepare_inputs(spec: KernelSpec) -> dict[str, Any]:
    """Worker-side: import what the cell needs (``Backend.preload``: its module and packages,
    once per worker), draw the first input set and run the reference
    (``execute.prepare_inputs``); ms per phase, and under ``"inputs_seen"`` the set's shapes,
    dtypes and scalars (:func:`~jupyter_ktune.problem_key.inputs_signature`), which the sweep
    compares with the stored rows' (issue 34)."""
    from jupyter_ktune.runner.execute import prepare_inputs as prepare
    from jupyter_ktune.runner.input_sets import seen_inputs

    return {"module": preload_here(spec) * 1e3, **prepare(spec), "inputs_seen": seen_inputs(spec)}


def prepare_ahead(runner: Any, spec: KernelSpec) -> Future:
    """``runner.prepare(spec)`` on a thread of its own: the first input set and its reference
    are drawn while the pool compiles the first configs. On Kernel Tuner's convolution they
    took 6.1 s (a fresh worker's torch for the reference) before the first compile was even
    sent (bench/results/convolution_vs_kernel_tuner/2026-12-03-1236)."""
    thread = cf.ThreadPoolExecutor(1, thread_name_prefix="ktune-prepare")
    try:
        return thread.submit(runner.prepare, spec)
    finally:
        thread.shutdown(wait=False)


def preload_here(spec: KernelSpec) -> float:
    """Import what compiling and running the cell needs, in this process (``Backend.preload``;
    a failure is left to the first config's run, which reports it on its cell line); seconds."""
    t0 = time.perf_counter()
    try:
        get_backend(spec.backend).preload(spec)
    except Exception:  # noqa: BLE001 - reported by the first config's own run
        pass
    return time.perf_counter() - t0


def dask_run(spec: KernelSpec, config: Config, race_ms: float | None = None) -> RunResult:
    """Dask task: run one variant on this Dask worker's own device worker."""
    w = get_worker()
    if race_ms is not None:
        w.call(seed_static, spec.source_hash, spec.options.arch, config, None, race_ms)
    return w.run(spec, config)


class LocalRunner:
    """Time variants on this host's device workers, one request per worker at a time."""

    def __init__(self, workers: int | Sequence[DeviceWorker] | None = None):
        self.owned: list[DeviceWorker] = []
        if workers is None:
            gpus = detect_gpus()
            if gpus > 1:
                workers = gpus
            else:
                workers = [get_worker()]
        if isinstance(workers, int):
            if workers < 1:
                raise ValueError(f"[ktune] workers must be at least 1, got {workers}")
            gpus = detect_gpus()
            self.owned = [DeviceWorker(env={"CUDA_VISIBLE_DEVICES": str(i)} if gpus >= workers
                                       else None) for i in range(workers)]
            workers = self.owned
        self.workers = list(workers)
        self._free: queue.Queue[DeviceWorker] = queue.Queue()
        for w in self.workers:
            self._free.put(w)
        self._threads: set[threading.Thread] = set()  # the pool's, whose requests close abandons
        self._pool = cf.ThreadPoolExecutor(
            max_workers=len(self.workers), thread_name_prefix="ktune-sweep",
            initializer=lambda: self._threads.add(threading.current_thread()))

    @property
    def slots(self) -> int:
        """How many variants can be timed at once."""
        return len(self.workers)

    def device(self, backend: str) -> Any:
        """DeviceInfo as the first worker sees it."""
        return self.workers[0].device(backend)

    def limits(self, spec: KernelSpec) -> dict[str, Any]:
        """What ``spec``'s ``require`` lines read, as the first worker sees it."""
        return self.workers[0].limits(spec)

    def submit(self, spec: KernelSpec, config: Config, static: Any = None,
               pin: bool = False, race_ms: float | None = None, quick: bool = False) -> Future:
        """Time ``config`` on a free worker (``pin``: always the first, for fair re-timing;
        ``race_ms``: the incumbent's median, timing stops once clearly slower; ``quick``: it
        may launch before the kernel's host launcher is built, ``QUICK_LAUNCH``)."""
        return self._pool.submit(self._run, spec, config, static, pin, race_ms, quick)

    def prepare(self, spec: KernelSpec) -> dict[str, Any]:
        """Draw each worker's first input set and run the reference there, each in a request
        of its own (its own time limit, ``--timeout``), so no config's timeout pays for them.
        Returns the slowest worker's phase times in ms and the set's ``"inputs_seen"``; a
        failure is left to the first config, which reports it on its cell line."""
        if spec.inputs is None:
            return {}

        def one(w: DeviceWorker) -> dict[str, float]:
            try:
                return w.call(prepare_inputs, spec, timeout=spec.options.timeout_s)
            except Exception:  # noqa: BLE001 - reported by the first config's own run
                return {}

        out: dict[str, Any] = {}
        for phases in self._pool.map(one, self.workers):
            for k, v in phases.items():
                out[k] = v if isinstance(v, str) else max(out.get(k, 0.0), v)
        return out

    def _run(self, spec: KernelSpec, config: Config, static: Any, pin: bool,
             race_ms: float | None, quick: bool = False) -> RunResult:
        if pin:
            w = self.workers[0]
            with w._lock:
                return self._on(w, spec, config, static, race_ms, quick)
        w = self._free.get()
        try:
            return self._on(w, spec, config, static, race_ms, quick)
        finally:
            self._free.put(w)

    @staticmethod
    def _on(w: DeviceWorker, spec: KernelSpec, config: Config, static: Any,
            race_ms: float | None, quick: bool = False) -> RunResult:
        if static is not None or race_ms is not None or quick:
            try:
                w.call(seed_static, spec.source_hash, spec.options.arch, config, static,
                       race_ms, quick, timeout=60)
            except RequestAbandoned:
                raise  # the runner is closing: the variant must not be sent after it
            except KtuneError:
                pass  # only an optimisation: the worker compiles the report itself
        # a sweep sends only configs its strategy listed as allowed under these workers'
        # limits: the worker takes that check rather than making it again (issue 37)
        return w.run(spec, config, violations=[])

    def close(self) -> None:
        """Stop queued requests, abandon those in flight, stop the workers this runner started.

        A request still in flight at close has no reader: the sweep was interrupted or failed.
        Its worker is replaced at once rather than waited on (issue 34): behind a hanging
        variant, the shared worker's next request waited for that variant's time limit.
        """
        self._pool.shutdown(wait=False, cancel_futures=True)
        for w in self.workers:
            w.abandon(self._threads, refuse_later=True)
        for w in self.owned:
            w.close()


def dask_ask(question: str, arg: Any) -> Any:
    """Dask task: ``device(backend)`` or ``limits(spec)`` of this Dask worker's device worker."""
    return getattr(get_worker(), question)(arg)


class DaskRunner:
    """Fan variants out over a ``dask.distributed`` cluster (a Client or a scheduler address)."""

    def __init__(self, client: Any):
        try:
            from distributed import Client
        except ImportError:
            raise ImportError("[ktune] a Dask cluster needs dask.distributed: "
                              "pip install 'jupyter_ktune[sweep]'") from None
        self._own = isinstance(client, str)
        self.client = Client(client) if isinstance(client, str) else client
        info = self.client.scheduler_info()
        self.addresses = sorted(info.get("workers", {}))
        if not self.addresses:
            raise KtuneError("[ktune] the Dask cluster has no workers")

    @property
    def slots(self) -> int:
        """One variant per Dask worker at a time."""
        return sum(max(1, w.get("nthreads", 1))
                   for w in self.client.scheduler_info()["workers"].values())

    def device(self, backend: str) -> Any:
        """DeviceInfo as the first Dask worker sees it."""
        return self.client.submit(dask_ask, "device", backend, pure=False,
                                  workers=[self.addresses[0]]).result()

    def limits(self, spec: KernelSpec) -> dict[str, Any]:
        """What ``spec``'s ``require`` lines read, as the first Dask worker sees it."""
        return self.client.submit(dask_ask, "limits", spec, pure=False,
                                  workers=[self.addresses[0]]).result()

    def prepare(self, spec: KernelSpec) -> dict[str, float]:
        """Nothing ahead on a cluster: each Dask worker draws its own first set."""
        return {}

    def submit(self, spec: KernelSpec, config: Config, static: Any = None,
               pin: bool = False, race_ms: float | None = None, quick: bool = False) -> Future:
        """Run ``config`` on the cluster; ``pin`` keeps re-timing on the first worker
        (``quick`` is ignored: each Dask worker launches as Triton does)."""
        fut = self.client.submit(dask_run, spec, config, race_ms, pure=False,
                                 workers=[self.addresses[0]] if pin else None)
        out: Future = Future()

        def done(f: Any) -> None:
            try:
                out.set_result(f.result())
            except BaseException as exc:  # noqa: BLE001 - handed to the sweep as a failure
                out.set_exception(exc)

        fut.add_done_callback(done)
        out._dask = fut  # type: ignore[attr-defined]  # keep the Dask future alive
        return out

    def close(self) -> None:
        """Close the client if this runner opened it."""
        if self._own:
            self.client.close()
