"""Timed runs enqueued behind a hold (measure/held_runs.py), against a simulated device queue.

The fake models what went wrong on the H200: a host whose launch calls are slower than the GPU
work they enqueue. Without a hold the GPU drains its queue, reaches each start event early and
the events time the host's launch call; the floor's empty kernel has a cheaper launch call, so
the difference of the two host times passes for a kernel time several times the real one.
"""

from __future__ import annotations

import numpy as np
import pytest

from jupyter_ktune.measure.held_runs import HOLD_RUNS, held_batches
from jupyter_ktune.measure.timing import HOST_BOUND_MARK, TimingPlan, time_kernel


class QueueTimer:
    """A GPU that runs queued work in order, never before the host has enqueued it, and never
    past a hold before its release. Host cost per call and GPU cost per op are in ms."""

    name = "queue"
    l2_flush_bytes = 1 << 20

    def __init__(self, kernel_ms: float = 0.001, host: dict | None = None, can_hold: bool = True,
                 hold_fails: bool = False) -> None:
        self.kernel_ms = kernel_ms
        self.host_ms = {"flush": 0.004, "record": 0.002, "kernel": 0.022, "empty": 0.015,
                        **(host or {})}
        self.gpu_ms = {"flush": 0.005, "record": 0.0, "kernel": kernel_ms, "empty": 0.0003}
        self.h = 0.0  # host clock
        self.g = 0.0  # when the GPU is done with everything queued so far
        self.pending: list | None = None  # ops queued behind a hold not yet released
        self.holds = self.releases = self.timeouts = 0
        self.hold_fails = hold_fails
        if not can_hold:
            self.hold = self.release = self.hold_timeouts = None  # type: ignore[assignment]

    def _op(self, kind: str, event: list | None = None) -> None:
        self.h += self.host_ms[kind]
        if self.pending is not None:
            self.pending.append((kind, event))
            return
        self._run(kind, event, self.h)

    def _run(self, kind: str, event: list | None, ready: float) -> None:
        self.g = max(self.g, ready) + self.gpu_ms[kind]
        if event is not None:
            event.append(self.g)

    def hold(self) -> None:
        self.holds += 1
        self.h += 0.02
        self.pending = []

    def release(self) -> None:
        self.releases += 1
        self.h += 0.005
        ops, self.pending = self.pending or [], None
        if self.hold_fails:  # the gate timed out: the ops run as the host enqueued them
            self.timeouts += 1
            return self._replay_unheld(ops)
        start = max(self.g, self.h)
        for kind, event in ops:
            self._run(kind, event, start)

    def _replay_unheld(self, ops: list) -> None:
        # the gate gave up: the GPU ran the batch as the host released it (the simulation does
        # not model what it read); what the protocol must do is count the timeout
        for kind, event in ops:
            self._run(kind, event, self.h)

    def hold_timeouts(self) -> int:
        return self.timeouts

    def synchronize(self) -> None:
        self.h = max(self.h, self.g)

    def new_event(self) -> list:
        return []

    def record(self, event: list) -> None:
        self._op("record", event)

    def elapsed_ms(self, start: list, end: list) -> float:
        return end[0] - start[0]

    def flush_l2(self) -> None:
        self._op("flush")

    def launch(self) -> None:
        self._op("kernel")

    def empty_launch(self) -> None:
        self._op("empty")

    def graph_ms(self, launch, launches):  # noqa: ANN001
        return self.gpu_ms["empty"]

    def kernel_clock(self) -> str | None:
        return "no CUPTI in tests"


PLAN = TimingPlan(budget_ms=20, min_runs=40, max_runs=200)


def test_a_slow_host_inflates_a_microsecond_kernel_unless_the_runs_are_held():
    unheld = time_kernel(lambda: t0.launch(), t0 := QueueTimer(can_hold=False), PLAN)
    held = time_kernel(lambda: t1.launch(), t1 := QueueTimer(), PLAN)
    # unheld: the events time host launch calls, and the floor's cheaper call does not cancel
    # them; the floor itself stays under the HOST-BOUND threshold, so nothing flags it
    assert unheld.median_ms > 0.005, unheld.median_ms
    assert HOST_BOUND_MARK not in unheld.method
    assert held.median_ms == pytest.approx(0.001, abs=1e-6), held.median_ms
    assert "behind a hold" in held.method and HOST_BOUND_MARK not in held.method
    assert t1.holds == t1.releases > 0


def test_a_hold_that_times_out_marks_the_timing_host_bound_and_says_which_rule():
    t = QueueTimer(hold_fails=True)
    timing = time_kernel(t.launch, t, PLAN)
    assert timing.host_bound
    assert f"{HOST_BOUND_MARK}: " in timing.method and "hold(s) timed out" in timing.method


def test_a_quick_host_reads_the_same_held_or_not():
    fast = {"flush": 0.0005, "record": 0.0002, "kernel": 0.001, "empty": 0.001}
    unheld = time_kernel(lambda: a.launch(), a := QueueTimer(host=fast, can_hold=False), PLAN)
    held = time_kernel(lambda: b.launch(), b := QueueTimer(host=fast), PLAN)
    assert unheld.median_ms == pytest.approx(held.median_ms, abs=1e-6) == pytest.approx(0.001)
    assert "behind a hold" not in unheld.method


def test_batches_are_cut_so_the_launch_queue_holds_a_whole_one():
    assert held_batches(0, True) == []
    assert held_batches(10, True) == [10]
    assert held_batches(HOLD_RUNS * 2 + 3, True) == [HOLD_RUNS, HOLD_RUNS, 3]
    assert held_batches(HOLD_RUNS * 2 + 3, False) == [HOLD_RUNS * 2 + 3]


class JitterTimer(QueueTimer):
    """A :class:`QueueTimer` whose kernel takes 1-1.3x its time (seeded), so a measurement
    stops on its budget, not on a median already exact; the flush keeps the GPU about as busy
    as the host's launch calls keep the host (the H200's 65 us flush against about 60 us of
    launch calls a run)."""

    def __init__(self, **kw) -> None:
        super().__init__(kernel_ms=0.001, **kw)
        self.gpu_ms["flush"] = 0.05
        self._rng = np.random.default_rng(7)

    def _run(self, kind: str, event: list | None, ready: float) -> None:
        if kind == "kernel":
            self.gpu_ms["kernel"] = self.kernel_ms * (1 + 0.3 * self._rng.random())
        super()._run(kind, event, ready)


class PipeTimer(JitterTimer):
    """A :class:`JitterTimer` that can wait for one event (``wait_for``), as CuPy's and torch's
    events can; it notes how many events were recorded beyond the one waited for."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.recorded: list[list] = []
        self.ahead: list[int] = []  # per wait: events recorded after the one waited for

    def record(self, event: list) -> None:
        super().record(event)
        self.recorded.append(event)

    def wait_for(self, event: list) -> None:
        self.h = max(self.h, event[0])
        self.ahead.append(len(self.recorded) - 1 - self.recorded.index(event))


SMALL_STEPS = TimingPlan(budget_ms=5, min_runs=10, max_runs=2000, warmup_ms=0.2)


def test_the_next_step_is_queued_before_the_last_one_is_read():
    """Pipelined steps (held_runs.PipelinedSteps): the GPU runs step k+1 while the host reads
    step k, so the host's and the GPU's shares overlap instead of adding up. The same
    protocol: as many runs within a step (none queued past the budget), the same median within
    the jitter, a shorter host wall."""
    serial_t = JitterTimer()
    serial = time_kernel(serial_t.launch, serial_t, SMALL_STEPS)
    piped_t = PipeTimer()
    piped = time_kernel(piped_t.launch, piped_t, SMALL_STEPS)
    assert piped.median_ms == pytest.approx(serial.median_ms, rel=0.05)
    assert 0.001 <= piped.median_ms <= 0.0013
    assert max(piped_t.ahead) > 0  # some step was waited for with runs queued behind it
    assert piped.n == serial.n, (serial.n, piped.n)  # none queued past the budget
    assert piped_t.h < 0.8 * serial_t.h, (piped_t.h, serial_t.h)  # host wall of the timing
    assert "behind a hold" in piped.method and HOST_BOUND_MARK not in piped.method


def test_pipelined_steps_can_be_turned_off_for_an_a_b(monkeypatch):
    """``KTUNE_PIPELINED_STEPS=0``: each step is read before the next is queued, as before."""
    monkeypatch.setenv("KTUNE_PIPELINED_STEPS", "0")
    t = PipeTimer()
    time_kernel(t.launch, t, SMALL_STEPS)
    assert t.ahead == []  # never waited for one event: whole-stream waits only
