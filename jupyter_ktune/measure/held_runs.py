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
    held = hold and can_hold(timer)
    pairs: list = []
    empties: list = []
    i = start
    for size in held_batches(n, held):
        if held:
            timer.hold()
        for _ in range(size):
            pairs.append(one_run(launch, timer, flush))
            if every and i % every == every - 1:
                empties.append(one_run(timer.empty_launch, timer, flush))
            i += 1
        if held:
            timer.release()
    timer.synchronize()
    return pairs, empties


def hold_timeouts(timer: Any) -> int:
    """How many holds of ``timer`` have timed out so far (0 for a timer that cannot hold)."""
    return int(timer.hold_timeouts()) if can_hold(timer) else 0
