"""How timed runs are enqueued: behind a hold, so that no run's events time the host.

Each timed run is ``flush, event, kernel, event``. The events bracket the kernel only while the
GPU is behind the host: if the host falls behind, the GPU reaches the start event, then waits
for the kernel's launch call, and the "kernel time" holds host time. For a microsecond kernel
the margin is thin: on the H200 a Triton launch call costs 21-27 us of host time, the flush
65 us of GPU time, and a run with its share of the interleaved empty runs enqueues four to six
calls. Sweeps on the H200 read 4-25 us for 1-2 us kernels in their first pass (bench/results/
corpus_vs_autotune/2026-12-02-1420: liger's dyt at 3.9 us in the sweep, 1.9 us timed alone), and
the empty kernel's floor stayed under the HOST-BOUND threshold, because its own launch call is
only a little cheaper than the user's: the difference of two host times is not a GPU time.

So a batch is enqueued behind a *hold*, nvbench's "blocking kernel": a one-thread kernel spins
on a gate word in device memory until the host, having enqueued the whole batch, writes the
batch's number into it from a second stream. The GPU then runs the batch back to back, however
slowly the host enqueued it. The spin gives up after ``HOLD_MAX_NS`` (a host stalled that long,
or a launch queue that filled before the release: the host blocks in a launch call while the
GPU waits for the gate) and counts a timeout, which the protocol reports as HOST-BOUND.

Holds apply to event timing only: CUPTI kernel records time the kernel on the GPU whatever the
host does, and the release's own kernel would add a record to each batch. A timer without
``hold``/``release`` (the host clock, test fakes) enqueues as before.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

#: How long the hold kernel waits for the gate before it lets the batch run anyway.
HOLD_MAX_NS = 100_000_000
#: Runs per held batch. Small, so that batches pipeline: the GPU runs one batch while the host
#: queues the next behind its own hold (a lagging host then makes the GPU wait at a hold, outside
#: any run's events), and the wall time a step adds is one small batch's enqueue (16 runs of a
#: microsecond kernel: about 1 ms on the H200). Small also so that the launch queue holds a whole
#: batch (each run enqueues up to eight commands) while the GPU waits at its gate.
HOLD_RUNS = 16
#: Said in the method text of a held timing.
HOLD_NOTE = (" (each batch enqueued behind a hold: the GPU waited at a gate until the host "
             "had queued the whole batch, so no run waited on the host)")


def can_hold(timer: Any) -> bool:
    """Whether ``timer`` offers a hold (``hold``, ``release`` and ``hold_timeouts``)."""
    return all(callable(getattr(timer, n, None)) for n in ("hold", "release", "hold_timeouts"))


def one_run(fn: Callable[[], None], timer: Any, flush: bool) -> tuple[Any, Any]:
    """Enqueue one timed run of ``fn``: the flush, then ``fn`` between two events."""
    if flush:
        timer.flush_l2()
    start, end = timer.new_event(), timer.new_event()
    timer.record(start)
    fn()
    timer.record(end)
    return start, end


def held_batches(n: int, hold: bool) -> list[int]:
    """Run counts of the batches ``n`` runs are enqueued in (one batch when not held)."""
    if not hold or n <= HOLD_RUNS:
        return [n] if n > 0 else []
    return [HOLD_RUNS] * (n // HOLD_RUNS) + ([n % HOLD_RUNS] if n % HOLD_RUNS else [])


def enqueue(launch: Callable[[], None], timer: Any, n: int, flush: bool,
            hold: bool = True, every: int = 0, start: int = 0) -> tuple[list, list]:
    """Enqueue ``n`` timed runs of ``launch`` (and, when ``every`` > 0, an empty run after every
    ``every``-th, counting from run ``start``), held where the timer can hold, then wait for
    them. Returns the event pairs of the runs and of the empty runs."""
    pairs, empties, _last = enqueue_step(launch, timer, n, flush, hold, every, start)
    timer.synchronize()
    return pairs, empties


def enqueue_step(launch: Callable[[], None], timer: Any, n: int, flush: bool,
                 hold: bool = True, every: int = 0, start: int = 0) -> tuple[list, list, Any]:
    """:func:`enqueue` without the wait: the event pairs of the runs and of the empty runs, and
    the last event recorded (once it has completed, so has every run of the step)."""
    held = hold and can_hold(timer)
    pairs: list = []
    empties: list = []
    last = None
    i = start
    for size in held_batches(n, held):
        if held:
            timer.hold()
        for _ in range(size):
            pairs.append(one_run(launch, timer, flush))
            last = pairs[-1][1]
            if every and i % every == every - 1:
                empties.append(one_run(timer.empty_launch, timer, flush))
                last = empties[-1][1]
            i += 1
        if held:
            timer.release()
    return pairs, empties, last


#: Set to 0 to read each step before the next is enqueued (an A/B of :class:`PipelinedSteps`).
PIPELINED_ENV = "KTUNE_PIPELINED_STEPS"


def can_pipeline(timer: Any) -> bool:
    """Whether ``timer`` can wait for one event (``wait_for``), so that a measurement's next
    step can be enqueued before the last one's times are read (:class:`PipelinedSteps`), and
    ``KTUNE_PIPELINED_STEPS`` is not 0."""
    return callable(getattr(timer, "wait_for", None)) and os.environ.get(PIPELINED_ENV) != "0"


class PipelinedSteps:
    """A measurement's steps of held runs, each enqueued before the one before it is read.

    The adaptive protocol reads its times after each step to decide whether to stop (precise
    enough, raced out, budget spent). Waiting for a step before enqueueing the next leaves the
    GPU idle while the host enqueues, and the host idle while the GPU runs: a raced first-pass
    step of a microsecond kernel is 10 runs, one held batch, whose enqueue (about 60 us a run on
    the H200) and run (about 70 us, the flush included) then add up instead of overlapping.
    With the next step already queued behind its own hold, the GPU goes on while the host reads
    and decides. A run is the same run either way: flush, event, kernel, event, behind a hold.
    A step enqueued before the decision to stop is still read, and its runs are kept.
    """

    def __init__(self, launch: Callable[[], None], timer: Any, flush: bool, every: int = 0):
        self.launch, self.timer, self.flush, self.every = launch, timer, flush, every
        self._queued: list[tuple[list, list, Any]] = []
        self.enqueued = 0  #: runs enqueued so far, read or not

    @property
    def pending(self) -> int:
        """Runs enqueued and not read yet."""
        return sum(len(p) for p, _e, _l in self._queued)

    def enqueue(self, n: int) -> None:
        """Queue a step of ``n`` runs behind the ones queued (does not wait)."""
        if n > 0:
            self._queued.append(enqueue_step(self.launch, self.timer, n, self.flush,
                                             every=self.every, start=self.enqueued))
            self.enqueued += n

    def read(self) -> tuple[list[float], list[float]]:
        """Wait for the oldest queued step; the event times of its runs and its empty runs."""
        pairs, empties, last = self._queued.pop(0)
        if last is not None:
            self.timer.wait_for(last)
        elapsed = self.timer.elapsed_ms
        return [elapsed(b, e) for b, e in pairs], [elapsed(b, e) for b, e in empties]


def hold_timeouts(timer: Any) -> int:
    """How many holds of ``timer`` have timed out so far (0 for a timer that cannot hold)."""
    return int(timer.hold_timeouts()) if can_hold(timer) else 0
