"""The sweep engine: ask a strategy, precompile ahead on the CPUs, time on the GPUs, store, repeat.

``tune(spec, ...)`` runs a whole sweep and returns a :class:`TuneReport`; :class:`Sweep` is the
same as an object that can be stopped from another thread (the panel's Stop button). Results
already in the store are never timed again (unless ``retime=True``), so a sweep that was killed
resumes where it stopped; a variant stored as crashed or timed out is run once more on resume,
as the crash may have been the machine's, not the variant's. At the end the top ``top_k`` are
re-timed with a larger budget on one device and compared with a bootstrap confidence interval
(:mod:`jupyter_ktune.tuning.report`).
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import cloudpickle

from jupyter_ktune.backends import get_backend
from jupyter_ktune.errors import CompileFailure, KtuneError
from jupyter_ktune.failure_cause import by_cause
from jupyter_ktune.problem_key import problem_key
from jupyter_ktune.results import RunResult, Status
from jupyter_ktune.runner.client import DeviceWorker
from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec
from jupyter_ktune.tuning import compile_ahead, main_guard, search, warm
from jupyter_ktune.tuning.compile_order import compile_first
from jupyter_ktune.tuning.options import TuneOptions
from jupyter_ktune.tuning.pool import pool_summary, shared_pool, unpack_precompiled
from jupyter_ktune.tuning.pool_warm import HINTS_WAIT_S, hints_for, read_hints
from jupyter_ktune.tuning.report import Evaluation, Progress, TuneReport, decide
from jupyter_ktune.tuning.retime import retake_host_bound, retime_top, with_phases
from jupyter_ktune.tuning.runners import (
    DaskRunner,
    LocalRunner,
    compile_pool_size,
    launcher_ahead,
    precompile,
    precompiled,
    preload_pool,
    prepare_ahead,
)
from jupyter_ktune.tuning.shapes import ShapesReport, tune_shapes
from jupyter_ktune.tuning.static_limits import static_excess
from jupyter_ktune.tuning.store import Store, StoredResult, StoreKey
from jupyter_ktune.tuning.timeline import SetupLaps, SweepTimeline

LAUNCHER_WAIT_S = 20.0  #: s the first run waits for the launcher task (a stuck one: the worker's)


class Sweep:
    """A stoppable sweep over ``spec``'s space; see :func:`tune` for the parameters.

    Examples
    --------
    >>> sweep = Sweep(spec, strategy="greedy", budget=32)      # doctest: +SKIP
    >>> threading.Thread(target=sweep.run).start()             # doctest: +SKIP
    >>> sweep.stop()                                           # doctest: +SKIP
    """

    def __init__(self, spec: KernelSpec, strategy: str | None = None, budget: int | None = None,
                 store: Store | str | Path | None = None,
                 workers: int | Sequence[DeviceWorker] | None = None, client: Any = None,
                 on_result: Callable[[Progress], None] | None = None,
                 options: TuneOptions | None = None):
        if not isinstance(spec, KernelSpec):
            raise TypeError(f"[ktune] tune() takes a KernelSpec (parse_cell(...)), "
                            f"got {type(spec).__name__}")
        if budget is not None and (not isinstance(budget, int) or budget < 1):
            raise ValueError(f"[ktune] budget must be a positive number of configs, got {budget!r}")
        self.spec = spec
        self.strategy_name = strategy or search.DEFAULT_STRATEGY
        if self.strategy_name not in search.STRATEGIES:
            search.make_strategy(self.strategy_name, spec.space)  # raises with the known names
        self.budget, self.store_arg, self.workers, self.client = budget, store, workers, client
        self.on_result = on_result
        self.options = options or TuneOptions()
        self._stop = self.options.stop or threading.Event()
        self.progress: Progress | None = None
        self._compiled: list[tuple[float, dict]] = []  # (back at, phases), see pool_summary
        self.report: TuneReport | None = None
        self.timeline = SweepTimeline()
        self.launcher: tuple[bool, float] | None = None  # (built ahead, seconds), Triton 3.6
        self._ahead: cf.Future | None = None  # the task building it, until its result is read
        self._hints: cf.Future | None = None  # runners.pool_hints, read by one pool process
        self._hints_wait_s = HINTS_WAIT_S  # held once, for the first compile sent
        self._prepared: cf.Future | None = None  # the first input set and reference, drawn
        self._taken = 0  # compiles sent when the cell ran (compile_ahead), taken by the sweep

    def stop(self) -> None:
        """Ask the sweep to stop after the results in flight; the report says it stopped."""
        self._stop.set()

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stop.is_set()

    # -- the run -----------------------------------------------------------------------------
    def run(self) -> TuneReport:
        """Run the sweep to its budget (or until stopped) and return the report."""
        where = main_guard.in_spawned_import()
        if where is not None:
            raise KtuneError(main_guard.IN_POOL.format(where=where))
        laps, given = SetupLaps(), isinstance(self.store_arg, Store)
        store, own_store = (self.store_arg if given else Store(self.store_arg)), not given
        runner = DaskRunner(self.client) if self.client is not None else LocalRunner(self.workers)
        try:
            get_backend(self.spec.backend).check(self.spec)
            laps.lap("store and check")
            pool_size = compile_pool_size(self.spec.backend, self.options.compile_workers,
                                          runner.slots, remote=self.client is not None)
            # the pool's processes import their compiler while the device worker starts; the
            # pool is kept for the next sweep of this process (the worker is kept too)
            pool = shared_pool(pool_size, self.spec.backend) if pool_size else None
            if pool is not None:  # the cell's imports in every process, while the worker starts
                if get_backend(self.spec.backend).shares_pool_hints:  # Triton's types
                    self._hints = hints_for(pool, self.spec)
                preload_pool(pool, self.spec)
            laps.lap("compile pool")
            device = runner.device(self.spec.backend)  # the worker's: a busy worker waits
            laps.lap("device")
            shape = " ".join(f"{k}={v}" for k, v in self.options.shape)
            key = StoreKey(self.spec.source_hash + (f" {shape}" if shape else ""), device.name,
                           StoreKey.toolchain_text(device.toolchain),
                           space=warm.space_signature(self.spec.space),
                           problem=problem_key(self.spec))
            limits = runner.limits(self.spec)  # the inputs a require line names: read there
            laps.lap("limits")
            strategy = search.make_strategy(self.strategy_name, self.spec.space, limits,
                                            self.options.seed)
            started = warm.start_from_earlier(store, self.spec.name, key, strategy,
                                              self.options.warm_start)
            if started is None and pool is not None and self.strategy_name == "exhaustive" \
                    and getattr(strategy, "_listed", None) is not None:
                strategy.first = compile_first(self.spec.backend, strategy.valid) or []
            n_valid = strategy.n_valid  # type: ignore[attr-defined]
            total = min(self.budget or n_valid, n_valid)
            laps.lap("strategy")
            t0 = time.perf_counter()
            self.timeline = SweepTimeline(t0)
            # the first input set and its reference, while the pool compiles the first
            # configs (issue 21); no run is sent before they are ready
            self._prepared = prepare_ahead(runner, self.spec) if self.spec.options.time else None
            # rows to serve: only those measured on an input set like this one (issue 34)
            key = self._inputs_seen(store, key) if store.has(key) else key
            evals = self._sweep(strategy, runner, pool, store, key, total, t0, limits)
            key = self._inputs_seen(store, key)
            prepared = {k: v for k, v in (self._prepared.result() if self._prepared else {})
                        .items() if k != "inputs_seen"}
            if self.options.top_k > 0:  # the re-timings launch as a user does
                self._launcher_built(LAUNCHER_WAIT_S - (time.perf_counter() - t0))
            retaken = retake_host_bound(self, strategy, runner, store, key, evals)
            final = retime_top(self, strategy, runner, store, key, total, t0, evals)
            verdict = decide(final, self.options.seed) if final else None
            moved = started.moved({e.result.config: e.result.median_ms if e.result.ok else None
                                   for e in evals}) if started is not None else None
            self.report = TuneReport(
                kernel=self.spec.name, backend=self.spec.backend, strategy=self.strategy_name,
                space=self.spec.space, device=device.name, evaluations=tuple(evals),
                final=tuple(final), verdict=verdict, elapsed_s=time.perf_counter() - t0,
                stopped=self.stopped, valid_configs=n_valid, warm=moved,
                info={"store": str(store.path), "device_slots": runner.slots,
                      "compile_workers": pool_size, "prepare_ms": prepared, "setup_ms": laps.ms,
                      "pool_compiles": pool_summary(self._compiled), "compiled_ahead": self._taken,
                      "timeline": self.timeline.rows(), "waits_s": self.timeline.waits(),
                      "launcher_ahead": self.launcher, "host_bound_retaken": retaken,
                      "precompiled": precompiled(self.spec.backend) or "nothing"})
            return self.report
        finally:
            runner.close()
            if own_store:
                store.close()

    def _read_hints(self) -> Any:
        """The pool hints for the next compile sent: the first waits up to
        :data:`~jupyter_ktune.tuning.pool_warm.HINTS_WAIT_S` for hints on their way (one
        process drawing the inputs for all), the later ones take them if they came."""
        if self._hints is None or self._hints.done():
            return read_hints(self._hints)
        wait, self._hints_wait_s = self._hints_wait_s, 0.0
        return read_hints(self._hints, wait)

    def _emit(self, evals: list[Evaluation], stored: StoredResult, cached: bool, total: int,
              t0: float, best: list[StoredResult | None], stage: str = "sweep",
              retimed: tuple[int, int] = (0, 0)) -> None:
        now = time.perf_counter() - t0
        if stage == "sweep":
            evals.append(Evaluation(stored, now, cached))
        if stored.ok and (best[0] is None or stored.median_ms < best[0].median_ms):  # type: ignore[operator]
            best[0] = stored
        done = len(evals)
        fresh = [e for e in evals if not e.cached]
        eta = None
        if fresh and done < total:
            eta = now / len(fresh) * (total - done)
        self.progress = Progress(done, total, now, eta, best[0], stored, cached, stage, retimed)
        if self.on_result is not None:
            self.on_result(self.progress)

    def _sweep(self, strategy: Any, runner: Any, pool: Any, store: Store, key: StoreKey,
               total: int, t0: float, limits: Mapping[str, Any]) -> list[Evaluation]:
        spec, retime = self.spec, self.options.retime
        evals: list[Evaluation] = []
        best: list[StoredResult | None] = [None]
        compiling: dict[cf.Future, Config] = {}
        running: dict[cf.Future, Config] = {}
        ready: deque[tuple[Config, Any]] = deque()
        lookahead = runner.slots * 2 + (pool._max_workers if pool is not None else 0)
        asked, starved = 0, False
        ahead: cf.Future | None = None  # the kernel's launcher, built beside the first compiles
        backend = get_backend(spec.backend)
        builds_launcher = backend.builds_launcher_ahead
        # a worker that can launch without it (Triton 3.6: direct_launch) is not held for it
        quick_capable = builds_launcher and backend.quick_launch()
        ahead_config: Config | None = None
        while not self.stopped:
            while (asked < total and not starved
                   and len(compiling) + len(ready) + len(running) < lookahead):
                c = strategy.ask()
                if c is None:
                    starved = True
                    break
                asked += 1
                stored = None if retime else store.get(key, c)
                if stored is not None and stored.retry:
                    stored = None  # it crashed or timed out last time: run it once more
                if stored is not None:
                    strategy.tell(c, stored.median_ms if stored.ok else None)
                    self._emit(evals, stored, True, total, t0, best)
                elif pool is not None:
                    hints = self._read_hints()
                    if ahead is None and builds_launcher:
                        ahead = self._ahead = pool.submit(launcher_ahead,
                                                          cloudpickle.dumps((spec, c, hints)))
                        ahead_config = c
                    taken = compile_ahead.take(pool, spec, c)  # sent when the cell ran
                    self._taken += taken is not None  # hints: read by one pool process
                    compiling[taken or pool.submit(precompile, cloudpickle.dumps(
                        (spec, c, ahead is not None, hints)))] = c
                    self.timeline.mark("compile sent", c)
                else:
                    ready.append((c, None))
            building = self._ahead is not None  # its result not read yet
            held = building and not quick_capable and time.perf_counter() - t0 < LAUNCHER_WAIT_S
            inputs = self._prepared if self._prepared and not self._prepared.done() else None
            held = held or inputs is not None
            while ready and len(running) < runner.slots * 2 and not held:
                c, static = ready.popleft()
                race = best[0].median_ms if self.options.race and best[0] is not None else None
                running[runner.submit(spec, c, static, race_ms=race,
                                      quick=building and quick_capable)] = c
                self.timeline.mark("run sent", c)
            if not (compiling or running or ready):
                break  # the budget is spent, or the strategy has nothing left to propose
            waiting = [ahead] if building and (held or quick_capable) else []
            waiting += [inputs] if inputs is not None else []
            done, _ = cf.wait([*compiling, *running, *waiting], timeout=0.25,
                              return_when=cf.FIRST_COMPLETED)
            for f in done:
                if f is inputs:  # the timeline says whose set it is (prepare_inputs)
                    got = f.result() if f.exception() is None else {}
                    self.timeline.mark("inputs ready", {
                        "set": "drawn ahead" if got.get("drawn ahead") else "drawn now"})
                    key = self._inputs_seen(store, key)
                elif f is ahead:
                    self.timeline.mark("launcher built", ahead_config or {})
                    self.launcher = f.result() if f.exception() is None else (False, 0.0)
                    self._ahead = None
                elif f in compiling:
                    c = compiling.pop(f)
                    self.timeline.mark("compile back", c)
                    static, phases = unpack_precompiled(f)
                    self._compiled.append((time.perf_counter() - t0, phases))
                    excess = static_excess(static, limits) if static is not None else None
                    if isinstance(static, CompileFailure) and static.diagnostics:
                        result = RunResult(name=spec.name, backend=spec.backend, config=dict(c),
                                           status=Status.COMPILE_ERROR, reason=str(static),
                                           diagnostics=tuple(static.diagnostics))
                        self._record(strategy, store, key, result, evals, total, t0, best)
                    elif excess is not None:  # known not to launch: no device time spent
                        result = RunResult(name=spec.name, backend=spec.backend, config=dict(c),
                                           status=Status.OUT_OF_RESOURCES,
                                           reason=f"[ktune] {excess}", static=static)
                        self._record(strategy, store, key, result, evals, total, t0, best)
                    else:
                        ready.append((c, None if isinstance(static, Exception) else static))
                else:
                    c = running.pop(f)
                    self.timeline.mark("run back", c)
                    result = f.result() if f.exception() is None else RunResult(
                        name=spec.name, backend=spec.backend, config=dict(c),
                        status=Status.CRASHED, reason=f"[ktune] {f.exception()}")
                    self._record(strategy, store, key, result, evals, total, t0, best)
                starved = False
        for f in [*compiling, *running]:
            f.cancel()
        return evals

    def _inputs_seen(self, store: Store, key: StoreKey) -> StoreKey:
        """``key`` with the worker's first input set's shapes (waits for them): ``settled``."""
        done = self._prepared is None or key.inputs_seen is not None
        return key if done else store.settled(key, self._prepared.result().get("inputs_seen"))

    def _launcher_built(self, wait_s: float) -> None:
        """Before the re-timings: wait (up to ``wait_s``) for a launcher task still building,
        so the top configs are re-timed through Triton's own launcher, as a user launches
        them, and no worker builds a second one."""
        if self._ahead is None:
            return
        cf.wait([self._ahead], timeout=0.0 if self.stopped else max(wait_s, 0.0))
        if self._ahead.done():
            self.timeline.mark("launcher built", {})
            self.launcher = self._ahead.result() if self._ahead.exception() is None \
                else (False, 0.0)
            self._ahead = None

    def _record(self, strategy: Any, store: Store, key: StoreKey, result: RunResult,
                evals: list[Evaluation], total: int, t0: float,
                best: list[StoredResult | None]) -> None:
        result = by_cause(result)  # every row labelled by cause (wrong architecture ...)
        stored = with_phases(store.put(key, result), result)
        strategy.tell(stored.config, stored.median_ms if stored.ok else None)
        self._emit(evals, stored, False, total, t0, best)


def tune(spec: KernelSpec, strategy: str | None = None, budget: int | None = None,
         store: Store | str | Path | None = None,
         workers: int | Sequence[DeviceWorker] | None = None, client: Any = None,
         on_result: Callable[[Progress], None] | None = None, *,
         options: TuneOptions | None = None, shapes: Sequence[Mapping[str, Any]] | None = None,
         **option_fields: Any) -> TuneReport | ShapesReport:
    """Sweep ``spec``'s space, store every result, re-time the best and report honestly.

    Parameters
    ----------
    spec
        The kernel cell, parsed (``parse_cell`` or the panel's ``session.spec``).
    strategy
        ``"exhaustive"``, ``"random"``, ``"greedy"`` or ``"tpe"`` (see ``STRATEGIES``); None
        takes the default chosen by measured efficiency.
    budget
        How many configs to evaluate (stored ones count); None: all valid configs.
    store
        A :class:`Store`, or its path; None: ``.ktune.sqlite`` in the current directory.
    workers
        Device workers: None = one per GPU of this host (``nvidia-smi -L``), an int, or a list
        of :class:`DeviceWorker`.
    client
        A ``dask.distributed.Client`` or scheduler address: time on the cluster's workers.
    on_result
        Called with a :class:`Progress` after every evaluation (from the sweep's thread).
    options, option_fields
        A :class:`TuneOptions`, or its fields as keywords (``retime=True``, ``seed=1``).
    shapes
        Tune each of these problem shapes (``[dict(M=1024, N=1024, K=1024), ...]``, passed to
        the inputs function as keywords) and return a :class:`ShapesReport`: the winners side
        by side and a dispatch table (``.export("triton" | "cpp" | "pallas")``).

    Examples
    --------
    >>> report = tune(spec, "greedy", budget=48, store="runs.sqlite")   # doctest: +SKIP
    >>> print(report.verdict.text())                                    # doctest: +SKIP
    >>> print(report.export("triton"))                                  # doctest: +SKIP
    """
    opts = replace(options or TuneOptions(), **option_fields)
    if shapes is not None:
        return tune_shapes(lambda one, shape: Sweep(
            one, strategy, budget, store, workers, client, on_result,
            replace(opts, shape=shape)).run(), spec, shapes)
    return Sweep(spec, strategy, budget, store, workers, client, on_result, opts).run()
