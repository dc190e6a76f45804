"""The one timing protocol, shared by every backend.

Protocol (see ../shared/DESIGN.md, "How to measure"):

1. One untimed launch (module load, JIT), then a synchronize.
2. An estimate from a few flushed runs, then warm-up runs worth ``warmup_ms`` of GPU time, so the
   SM clock has ramped up (345 -> 1980 MHz on the H200) before anything counts. When the clock
   was read at its maximum just before (``clock_ready``: the previous config of a sweep kept
   it up), the warm-up is ``ready_warmup_ms``: 25 ms of flushed runs per config was most of a
   microsecond kernel's timing in a sweep (issue 21).
3. Timed runs in batches. Before each run the L2 is flushed by writing a buffer several times
   its size (unless warm-cache numbers were asked for); device events bracket the kernel alone.
   There is no host synchronize between runs, and each batch is enqueued behind a hold
   (``measure.held_runs``): the GPU waits at a gate until the host has queued the whole batch,
   so no run's events wait on a launch call and the events measure the kernel, not the host.
4. Stop when the 95% confidence interval of the median is within ``rel_precision`` of it, or
   spans no more than one tick of the event clock (32 ns on the H200: a median is not located
   finer than the clock's quantum, and a microsecond kernel asked for 0.5 % ran to its budget),
   or the time budget or run cap is spent; at least ``min_runs`` runs always. In a sweep
   (``race_ms``:
   the incumbent's median) also stop once the interval's lower end, less the event floor, is
   above the incumbent by ``race_margin``: that config is clearly slower, more runs would only
   make its losing time more precise (racing, issue 21).
5. For kernels shorter than ``graph_below_ms`` also replay a CUDA graph of back-to-back launches
   and report the per-launch time (warm cache, no launch gaps): the floor a fused pipeline sees.
6. The host cost of one launch call is measured apart and labelled host time, never GPU time.
7. An empty kernel is timed the same way, interleaved with the timed runs (one empty run after
   every ``floor_every`` of the kernel's), and its median, less the empty kernel's own run
   time (graph replay), is subtracted from every run. Interleaved, because the event overhead
   drifts: measured in 51 runs after the kernel's, it moved by up to 0.7 us between
   measurements of a 1 us kernel while the kernel-minus-empty difference of alternating runs
   stayed within 0.25 us (bench/results/warmup_rule/2026-12-02-0327). Events
   bracket the stream's front-end work too (event write, launch of a queued kernel), a constant
   of about 3 us on the H200 that is 6% of a 50 us kernel. With the subtraction the medians
   agreed with ncu's gpu__time_duration to within 1% at 48 us and 775 us (bench/results/
   foundation-timing.md). The raw event times are kept beside the corrected ones. CUPTI records
   would avoid the constant, but tracing slowed the traced kernel by ~10% there, so they are
   opt-in (see measure/cupti.py).

Backends differ only in the :class:`DeviceTimer` they hand in (CuPy, torch or JAX events).
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from jupyter_ktune.measure.device_timer import DeviceTimer, HostClock  # noqa: F401 - API
from jupyter_ktune.measure.held_runs import (
    HOLD_MAX_NS,
    HOLD_NOTE,
    PipelinedSteps,
    can_hold,
    can_pipeline,
    enqueue,
    hold_timeouts,
)
from jupyter_ktune.measure.stopping import event_tick_ms, precise, raced_out, step_sizes
from jupyter_ktune.results import Timing

FLUSH_KERNEL_NAME = "ktune_l2_flush"  # the L2 flush kernel every DeviceTimer must launch
#: An event floor above this means the events timed the host: on the H200 it reads 3-4 us while
#: the flushes keep the GPU ahead, and 82 us in a run whose host was busy (bench/results/
#: timing_vs_ncu/2026-12-02-0334, where do_bench read 112 us for the same 1.5 us kernel).
HOST_BOUND_FLOOR_MS = 0.025
HOST_BOUND_MARK = "HOST-BOUND"  # in the method text of such a timing (kept in the store)


@dataclass(frozen=True)
class TimingPlan:
    """Knobs of the protocol; the defaults are what the panel uses for one slider step."""

    budget_ms: float = 200.0
    warmup_ms: float = 25.0
    min_runs: int = 10
    max_runs: int = 2000
    rel_precision: float = 0.005
    warm_cache: bool = False
    graph_below_ms: float = 0.05
    graph_launches: int = 100
    kernel_clock: bool = False  # CUPTI slowed a 777 us kernel to 846 us on the H200: opt-in only
    subtract_floor: bool = True
    race_ms: float | None = None  # the incumbent's median in a sweep: stop when clearly slower
    race_margin: float = 0.05
    clock_ready: bool = False  # the SM clock read at its maximum just before: a short warm-up
    ready_warmup_ms: float = 1.0
    floor_every: int = 2  # one empty run after every this many timed runs; 0: 51 runs after

    def __post_init__(self) -> None:
        if self.budget_ms <= 0 or self.min_runs < 1 or self.max_runs < self.min_runs:
            raise ValueError("[ktune] TimingPlan needs budget_ms > 0 and 1 <= min_runs <= max_runs")


def warmup_runs(plan: TimingPlan, per_run_ms: float) -> int:
    """How many warm-up runs: ``warmup_ms`` of device time (``ready_warmup_ms`` when the clock is
    already up), at least 3 (the first flushed runs after a new module still pay its first
    touches) unless three would outlast the full warm-up (an interpreted kernel of a second:
    one), at most 1000."""
    per_run_ms = max(per_run_ms, 1e-4)
    want = plan.ready_warmup_ms if plan.clock_ready else plan.warmup_ms
    want = min(want, plan.warmup_ms, plan.budget_ms)
    least = 3 if 3 * per_run_ms <= plan.warmup_ms else 1
    return int(min(max(math.ceil(want / per_run_ms), least), 1000))


class Stages:
    """Host milliseconds per stage of one measurement (``Timing.stages_ms``): where a timing's
    wall time went, for the sweep's per-phase breakdown."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}
        self._t = time.perf_counter()

    def tick(self, name: str) -> None:
        now = time.perf_counter()
        self.ms[name] = self.ms.get(name, 0.0) + (now - self._t) * 1e3
        self._t = now


def _interleaved(launch: Callable[[], None], timer: DeviceTimer, n: int, flush: bool,
                 every: int, start: int) -> tuple[list[float], list[float]]:
    """Event times of ``n`` runs of the kernel and of the empty kernel run after every
    ``every``-th of them (counting from run ``start`` of the measurement), both flushed and
    held (``measure.held_runs``)."""
    pairs, empties = enqueue(launch, timer, n, flush, every=every, start=start)
    times = [timer.elapsed_ms(b, e) for b, e in pairs]
    empty = [timer.elapsed_ms(b, e) for b, e in empties]
    _spent.append(sum(times) + sum(empty))
    return times, empty


def timed_runs(launch: Callable[[], None], timer: DeviceTimer, n: int, flush: bool,
                kernel_clock: bool = False) -> tuple[list[float], list[float] | None]:
    """Event times for ``n`` runs and, when asked and possible, CUPTI kernel times."""
    if not kernel_clock:
        pairs = enqueue(launch, timer, n, flush)[0]
        times = [timer.elapsed_ms(s, e) for s, e in pairs]
        _spent.append(sum(times))
        return times, None
    from jupyter_ktune.measure.cupti import KernelActivity, per_run_durations

    with KernelActivity() as act:  # not held: the records time the GPU whatever the host does
        pairs = enqueue(launch, timer, n, flush, hold=False)[0]
    events = [timer.elapsed_ms(s, e) for s, e in pairs]
    _spent.append(sum(events))
    return events, per_run_durations(act.records, n, skip=FLUSH_KERNEL_NAME)


_spent: list[float] = []  # device ms of every event-timed run of the measurement in progress


def _flush_ms(timer: DeviceTimer) -> float:
    """Device time of one L2 flush (median of 5), measured once per timer and kept on it."""
    cached = getattr(timer, "_ktune_flush_ms", None)
    if cached is None:
        times = []
        for _ in range(5):
            start, end = timer.new_event(), timer.new_event()
            timer.record(start)
            timer.flush_l2()
            timer.record(end)
            times.append((start, end))
        timer.synchronize()
        cached = float(np.median([timer.elapsed_ms(s, e) for s, e in times]))
        try:
            timer._ktune_flush_ms = cached  # type: ignore[attr-defined]
        except AttributeError:
            pass
    return cached


def _host_launch_us(launch: Callable[[], None], timer: DeviceTimer, n: int = 20) -> float:
    """Median host time of one launch *call* (enqueue cost), a host-side number by design."""
    costs = []
    for _ in range(n):
        t0 = time.perf_counter()
        launch()
        costs.append(time.perf_counter() - t0)
    timer.synchronize()
    return float(np.median(costs) * 1e6)


_EMPTY_GRAPH_MS: weakref.WeakKeyDictionary[Any, float | None] = weakref.WeakKeyDictionary()


def _empty_graph_ms(timer: Any) -> float | None:
    """The empty kernel's own per-launch time by graph replay, once per timer.

    It is a property of the device and runtime, not of the variant: capturing and replaying a
    100-launch graph for every variant of a sweep cost host time and told nothing new. (The
    floor it is subtracted from is still measured per variant, under the variant's conditions.)
    """
    try:
        if timer not in _EMPTY_GRAPH_MS:
            _EMPTY_GRAPH_MS[timer] = timer.graph_ms(timer.empty_launch, 100)
        return _EMPTY_GRAPH_MS[timer]
    except TypeError:  # a timer that cannot be weakly referenced: measure every time
        return timer.graph_ms(timer.empty_launch, 100)


def _race_floor(timer: DeviceTimer, flush: bool) -> float:
    """The event floor for racing decisions (median of 11 empty runs), measured once per timer:
    raw event times hold it and the incumbent's median does not."""
    cached = getattr(timer, "_ktune_race_floor_ms", None)
    if cached is None:
        cached = float(np.median(timed_runs(timer.empty_launch, timer, 11, flush)[0]))
        try:
            timer._ktune_race_floor_ms = cached  # type: ignore[attr-defined]
        except AttributeError:
            pass
    return cached


def time_kernel(launch: Callable[[], None], timer: DeviceTimer,
                plan: TimingPlan | None = None) -> Timing:
    """Time ``launch`` with the project's protocol and return every run's device time.

    Parameters
    ----------
    launch
        Enqueues the kernel once on the timer's stream; must not synchronize.
    timer
        The device runtime's events, L2 flush and graph capture.
    plan
        Budget, precision and cache policy.

    Examples
    --------
    >>> t = time_kernel(lambda: fn(grid, block, args), CupyTimer())  # doctest: +SKIP
    >>> t.median_ms, t.iqr_ms, t.n                                     # doctest: +SKIP
    """
    plan = plan or TimingPlan()
    flush = not plan.warm_cache
    _spent.clear()
    stages = Stages()
    timeouts0 = hold_timeouts(timer)
    launch()
    timer.synchronize()
    estimate = float(np.median(timed_runs(launch, timer, 5, flush)[0]))
    # Each run also pays for its flush (about 65 us for 256 MiB on the H200): count it, or a
    # 20 us kernel would spend 4x its budget on flushes.
    per_run = max(estimate, 1e-4) + (_flush_ms(timer) if flush else 0.0)
    stages.tick("estimate")
    warmup = warmup_runs(plan, per_run)
    timed_runs(launch, timer, warmup, flush)
    stages.tick("warm-up")
    no_cupti = timer.kernel_clock() if plan.kernel_clock else "not requested"
    use_cupti = no_cupti is None

    times: list[float] = []
    events: list[float] = []
    raced = ""
    race_floor = _race_floor(timer, flush) if plan.race_ms is not None else 0.0
    batch = int(min(max(plan.budget_ms / per_run / 8, plan.min_runs), 250))
    # racing looks after smaller batches first (a quarter, doubling): a loser stops sooner
    step = max(plan.min_runs, batch // 4) if plan.race_ms is not None else batch
    deadline = time.perf_counter() + plan.budget_ms * 1e-3 * 3  # host guard if flushes dominate
    spent_ms = 0.0
    # the floor's empty runs go between the kernel's (CUPTI times need no floor, and their
    # records must be the kernel's alone)
    every = plan.floor_every if plan.subtract_floor and not use_cupti else 0
    empties: list[float] = []
    # event-timed steps pipeline: the next is queued before this one is read (held_runs)
    piped = PipelinedSteps(launch, timer, flush, every) \
        if not use_cupti and can_pipeline(timer) else None
    sizes = step_sizes(step, batch)
    if piped is not None:
        piped.enqueue(min(next(sizes), plan.max_runs))
    while True:
        if piped is not None:
            # the next step goes behind the queued one, unless the budget ends with that one
            if not piped.pending or spent_ms + piped.pending * per_run < plan.budget_ms:
                piped.enqueue(min(next(sizes), plan.max_runs - piped.enqueued))
            ev, em = piped.read()
            kt = None
            empties.extend(em)
            _spent.append(sum(ev) + sum(em))
        elif every:
            ev, em = _interleaved(launch, timer, min(next(sizes), plan.max_runs - len(times)),
                                  flush, every, len(times))
            kt = None
            empties.extend(em)
        else:
            (ev, kt), em = timed_runs(launch, timer, min(next(sizes), plan.max_runs - len(times)),
                                      flush, use_cupti), []
        if use_cupti and kt is None:  # records lost: fall back for the whole measurement
            use_cupti, no_cupti, times = False, "CUPTI records did not match the launches", []
        events.extend(ev)
        times.extend(kt if use_cupti and kt is not None else ev)
        spent_ms += sum(ev) + sum(em) + (per_run - max(estimate, 1e-4)) * (len(ev) + len(em))
        arr = np.asarray(times)
        if len(times) >= plan.max_runs:
            break
        if plan.race_ms is not None and len(times) >= plan.min_runs:
            # the floor of this measurement's own interleaved runs once there are a few: the
            # cached one can be 0.7 us off for a microsecond kernel (the overhead drifts)
            floor_now = float(np.median(empties)) if len(empties) >= 5 else race_floor
            raced = raced_out(arr, floor_now, plan)
            if raced:
                break
        if len(times) >= plan.min_runs and (
                precise(arr, plan, event_tick_ms(arr))
                or spent_ms >= plan.budget_ms or time.perf_counter() > deadline):
            break
    while piped is not None and piped.pending:  # a step queued before the stop: its runs count
        ev, em = piped.read()
        events.extend(ev)
        times.extend(ev)
        empties.extend(em)
        _spent.append(sum(ev) + sum(em))
    stages.tick("runs")

    if len(empties) < 11:  # too few interleaved (a short or raced measurement), or none asked
        empties += timed_runs(timer.empty_launch, timer, 51 if not every else 11 - len(empties),
                              flush)[0]
    floor_ms = float(np.median(empties))
    # The floor holds the empty kernel's own run too, which the user's kernel also has: add
    # back its per-launch time from graph replay (back-to-back, no front-end gaps).
    empty_ms = _empty_graph_ms(timer) if plan.subtract_floor else None
    overhead_ms = max(floor_ms - (empty_ms or 0.0), 0.0)
    if not use_cupti and plan.subtract_floor:
        times = [max(t - overhead_ms, 0.0) for t in events]
    median = float(np.median(times))
    stages.tick("floor")
    graph_ms = None
    if median < plan.graph_below_ms:
        graph_ms = timer.graph_ms(launch, plan.graph_launches)
        stages.tick("graph")
    if not timer.l2_flush_bytes:
        flush_txt = "no L2 flush (no device cache here)"
    elif not flush:
        flush_txt = "warm L2 (no flush)"
    else:
        flush_txt = f"L2 flushed before each run ({timer.l2_flush_bytes >> 20} MiB read)"
    if use_cupti:
        clock = "CUPTI kernel records (the kernel's own GPU start/end)"
    elif isinstance(timer, HostClock):  # no device events: say what the clock is, in its words
        clock = (f"{timer.name}: the host clock around each launch"
                 + ("" if not plan.kernel_clock else f" ({no_cupti})"))
        if plan.subtract_floor:
            clock += (f" minus the cost of an empty call {overhead_ms * 1e3:.2f} us (median of "
                      f"{len(empties)} empty calls timed the same way)")
    else:
        clock = (f"{timer.name} events around each launch"
                 + ("" if not plan.kernel_clock else f" ({no_cupti})"))
        if plan.subtract_floor:
            own = (f" less its own run, {empty_ms * 1e3:.2f} us by graph replay"
                   if empty_ms else "")
            how = (f"{len(empties)} runs interleaved with the kernel's" if every and
                   len(empties) > 11 else f"{len(empties)} runs of the same protocol")
            clock += (f" minus the event overhead {overhead_ms * 1e3:.2f} us (empty-kernel floor "
                      f"{floor_ms * 1e3:.2f} us, median of {how}{own})")
    ready = " (the SM clock read at its maximum before them)" if plan.clock_ready else ""
    timed_out = hold_timeouts(timer) - timeouts0
    host_bound = (not isinstance(timer, HostClock) and not use_cupti
                  and (floor_ms > HOST_BOUND_FLOOR_MS or timed_out > 0))
    if timed_out > 0:
        starved = (f"; {HOST_BOUND_MARK}: {timed_out} hold(s) timed out after "
                   f"{HOLD_MAX_NS / 1e6:g} ms before the host had queued the batch, so runs may "
                   "have waited on the host and these times may hold host time: time again "
                   "with the host idle")
    elif host_bound:
        starved = (f"; {HOST_BOUND_MARK}: an empty kernel's events read {floor_ms * 1e3:.1f} us "
                   "(a few us when the GPU is kept busy), so the GPU waited for the host between "
                   "runs and these times hold host time: time again with the host idle")
    else:
        starved = ""
    held = HOLD_NOTE if can_hold(timer) and not use_cupti else ""
    method = (f"{clock}, {flush_txt}, {warmup} warm-up runs{ready}, median of "
              f"{len(times)}{held}{raced}{starved}")
    # under a host clock (an interpreter) the timed calls are host calls already: 20 more of
    # them cost seconds of a CPU machine's first cell and said the same thing (issue 33)
    host_us = (float(np.median(times)) + (overhead_ms if plan.subtract_floor else 0.0)) * 1e3 \
        if isinstance(timer, HostClock) \
        else _host_launch_us(launch, timer)
    stages.tick("host launch")
    return Timing(times_ms=np.asarray(times, dtype=np.float64), method=method,
                  event_times_ms=(np.asarray(events, dtype=np.float64)
                                  if use_cupti or plan.subtract_floor else None),
                  warm_cache=not flush, l2_flush_bytes=timer.l2_flush_bytes if flush else 0,
                  warmup_runs=warmup, graph_ms=graph_ms,
                  graph_launches=plan.graph_launches if graph_ms is not None else 0,
                  host_launch_us=host_us, event_floor_ms=floor_ms,
                  subtracted_ms=overhead_ms if plan.subtract_floor and not use_cupti else None,
                  device_ms_total=float(sum(_spent)), stages_ms=dict(stages.ms),
                  host_bound=host_bound)
