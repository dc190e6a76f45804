"""The timing step of a run in the worker: the plan, the timer, and a host-bound first timing
taken again once the worker's background start-up is done, each part of the wait named.

A result's "time" phase is the timing protocol's stages (``time: warm-up``, ``time: runs`` ...)
and the parts around them named here: ``timer ready`` (the backend's timer is built ahead in a
fresh worker, and the first timing may wait for it), and where a first timing was host-bound
and taken again, ``host-bound timing`` and ``start-up wait``. A first result's "time: other"
read 0.17-0.27 s on an H100 with none of them named
(19e7434:bench/results/first_minute_ab/2026-12-06-2058).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from jupyter_ktune.measure.clocks import Clocks, clock_is_up, read_clocks
from jupyter_ktune.measure.timing import TimingPlan, time_kernel
from jupyter_ktune.results import Timing
from jupyter_ktune.runner import phases
from jupyter_ktune.spec import KernelSpec


def take(spec: KernelSpec, bound: Any, timer_of: Callable[[], Any], static_future: Future,
         race_ms: float | None) -> tuple[Timing, Clocks | None, dict[str, float]]:
    """Time ``bound`` with the protocol (``race_ms``: a sweep's incumbent to race against);
    the timing, the clocks read before it, and the named parts of the wait (milliseconds)."""
    t0 = time.perf_counter()
    clocks = read_clocks()
    plan = timing_plan(spec, race_ms, clocks)
    timer = timer_of()  # built ahead in a fresh worker: this may wait for it
    t1 = time.perf_counter()
    parts = {"timer ready": (t1 - t0) * 1e3}
    phases.enter(phases.run(f"the timed runs, --budget-ms {plan.budget_ms:g}"))
    # A runtime without stream events in Python (JAX) times the bound variant itself.
    own = getattr(timer, "time", None)
    timing = own(bound, plan) if own else time_kernel(bound.launch, timer, plan)
    if getattr(bound, "launch_note", ""):
        timing = dataclasses.replace(timing, method=timing.method + bound.launch_note)
    if timing.host_bound:
        t2 = time.perf_counter()
        if quiet_host(static_future, spec.options.timeout_s):  # taken again: name the first
            parts["host-bound timing"] = (t2 - t1) * 1e3
            parts["start-up wait"] = (time.perf_counter() - t2) * 1e3
            timing = own(bound, plan) if own else time_kernel(bound.launch, timer, plan)
            timing = dataclasses.replace(timing, method=f"{timing.method}; timed again once"
                                         " the worker's background start-up was done (the"
                                         " first timing was host-bound)")
    return timing, clocks, parts


def quiet_host(static_future: Future, timeout_s: float) -> bool:
    """Wait for this worker's background work (torch's warm-up thread, the static report):
    whether there was any, so a host-bound timing taken beside it is worth taking again. The
    first timing in a fresh worker ran while torch imported in a thread and read 0 us for a
    1.5 us kernel (bench/results/timing_vs_ncu/2026-12-02-0344)."""
    from jupyter_ktune.backends.torch_interop import wait_for_warming

    busy = wait_for_warming(timeout_s)
    if not static_future.done():
        busy = True
        with contextlib.suppress(Exception):  # its failure is reported with the result
            static_future.result(timeout=timeout_s)
    return busy


def timing_plan(spec: KernelSpec, race_ms: float | None, clocks: Any) -> TimingPlan:
    """The protocol's knobs for one variant: the cell's budget and cache policy; a short
    warm-up when ``clocks`` (read just before) show the SM clock up; and for a config raced in
    a sweep's first pass (``race_ms``, the incumbent's median) no graph-replay figure, 5 ms of
    a microsecond kernel's 26 (issue 21): the re-timing of the top few takes it."""
    return TimingPlan(budget_ms=spec.options.budget_ms, warm_cache=spec.options.warm_cache,
                      max_runs=spec.options.max_runs, clock_ready=clock_is_up(clocks),
                      race_ms=race_ms,
                      graph_below_ms=0.0 if race_ms is not None else TimingPlan.graph_below_ms)
