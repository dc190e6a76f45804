"""The timing protocol against a fake device whose kernel times are known exactly."""

from __future__ import annotations

import time

import numpy as np
import pytest

from jupyter_ktune.measure.cupti import KernelRecord, per_run_durations
from jupyter_ktune.measure.timing import TimingPlan, time_kernel
from jupyter_ktune.stats import median_ci, relative_ci_halfwidth


class FakeTimer:
    """Events whose elapsed time is drawn from a known distribution; counts flushes."""

    name = "fake"
    l2_flush_bytes = 1 << 20

    def __init__(self, kernel_ms: float, jitter: float = 0.0, graph: float | None = None,
                 kernel_clock: str | None = "no CUPTI in tests"):
        self.kernel_ms, self.jitter, self._graph = kernel_ms, jitter, graph
        self.rng = np.random.default_rng(0)
        self.flushes = self.launches = 0
        self._clock = 0.0
        self._kernel_clock = kernel_clock

    def synchronize(self) -> None:
        pass

    def new_event(self) -> list:
        return []

    def record(self, event: list) -> None:
        event.append(self._clock)

    def elapsed_ms(self, start: list, end: list) -> float:
        return end[0] - start[0]

    def flush_l2(self) -> None:
        self.flushes += 1

    def launch(self) -> None:
        self.launches += 1
        self._clock += self.kernel_ms * (1 + self.jitter * self.rng.standard_normal())

    def graph_ms(self, launch, launches):  # noqa: ANN001
        return self._graph

    def kernel_clock(self) -> str | None:
        return self._kernel_clock

    def empty_launch(self) -> None:
        self._clock += self.empty_ms

    empty_ms = 0.0


def test_median_and_spread_come_from_the_device_clock():
    t = FakeTimer(kernel_ms=0.5, jitter=0.01)
    timing = time_kernel(t.launch, t, TimingPlan(budget_ms=50))
    assert timing.median_ms == pytest.approx(0.5, rel=0.01)
    assert 0 < timing.iqr_ms < 0.02
    assert timing.n >= 10
    assert timing.method.startswith("fake events around each launch minus the event overhead")
    assert timing.event_floor_ms == 0.0  # the fake's empty kernel takes no time


def test_kernel_clock_falls_back_to_events_and_says_why():
    t = FakeTimer(kernel_ms=0.5)
    timing = time_kernel(t.launch, t, TimingPlan(budget_ms=10, kernel_clock=True))
    assert "no CUPTI in tests" in timing.method and timing.event_times_ms is not None


def test_l2_is_flushed_before_every_timed_run_unless_warm_cache():
    t = FakeTimer(kernel_ms=1.0)
    timing = time_kernel(t.launch, t, TimingPlan(budget_ms=20))
    # every estimate, warm-up, timed and empty-floor run is flushed (one empty run after every
    # second timed run, topped up to 11); the module-load launch and the 20 host-cost launches
    # are not timed on the device and are not flushed
    # (+5: the flush's own cost, measured once per timer so the budget can count it)
    assert t.flushes == 5 + 5 + timing.warmup_runs + timing.n + max(timing.n // 2, 11)
    assert t.launches == 1 + 5 + timing.warmup_runs + timing.n + 20
    assert "flushed" in timing.method and timing.l2_flush_bytes == 1 << 20
    warm = FakeTimer(kernel_ms=1.0)
    timing = time_kernel(warm.launch, warm, TimingPlan(budget_ms=20, warm_cache=True))
    assert warm.flushes == 0 and timing.warm_cache and "warm L2" in timing.method


def test_adaptive_stop_needs_more_runs_when_noisy():
    quiet, noisy = FakeTimer(0.1, jitter=0.001), FakeTimer(0.1, jitter=0.3)
    n_quiet = time_kernel(quiet.launch, quiet, TimingPlan(budget_ms=200)).n
    n_noisy = time_kernel(noisy.launch, noisy, TimingPlan(budget_ms=200)).n
    assert n_noisy > n_quiet


def test_run_cap_and_min_runs_are_respected():
    t = FakeTimer(kernel_ms=0.001, jitter=0.5)
    assert time_kernel(t.launch, t, TimingPlan(budget_ms=1000, max_runs=40, min_runs=10)).n == 40
    with pytest.raises(ValueError, match=r"\[ktune\]"):
        TimingPlan(min_runs=5, max_runs=2)


def test_graph_figure_only_for_tiny_kernels():
    tiny = FakeTimer(kernel_ms=0.002, graph=0.0009)
    assert time_kernel(tiny.launch, tiny, TimingPlan(budget_ms=5)).graph_ms == 0.0009
    big = FakeTimer(kernel_ms=1.0, graph=0.9)
    assert time_kernel(big.launch, big, TimingPlan(budget_ms=5)).graph_ms is None


def test_host_launch_cost_is_the_host_time_of_the_call_not_the_kernel_time():
    t = FakeTimer(kernel_ms=0.2)

    def slow_enqueue():  # the launch call itself takes 3 ms of host time
        time.sleep(0.003)
        t.launch()

    slow = time_kernel(slow_enqueue, t, TimingPlan(budget_ms=5, max_runs=10)).host_launch_us
    assert slow is not None and 3000 <= slow < 30000, slow
    fast = time_kernel(t.launch, t, TimingPlan(budget_ms=5)).host_launch_us
    assert fast is not None and fast < 1000 < slow, (fast, slow)  # not the 200 us kernel time


def test_cupti_records_are_grouped_per_run_and_exclude_the_flush():
    recs = []
    for i in range(4):
        recs.append(KernelRecord("ktune_l2_flush", i * 100, i * 100 + 50))
        recs.append(KernelRecord("scale<256>", i * 100 + 60, i * 100 + 60 + 1000 * (i + 1)))
    assert per_run_durations(recs, 4, "ktune_l2_flush") == [0.001, 0.002, 0.003, 0.004]
    assert per_run_durations(recs, 3, "ktune_l2_flush") is None  # a lost record is detected


def test_median_ci_contains_the_median_and_shrinks_with_n():
    rng = np.random.default_rng(1)
    small, big = rng.normal(1, 0.1, 20), rng.normal(1, 0.1, 2000)
    lo, hi = median_ci(small)
    assert lo <= np.median(small) <= hi
    assert relative_ci_halfwidth(big) < relative_ci_halfwidth(small)
    with pytest.raises(ValueError):
        median_ci(np.array([]))


def test_the_empty_kernel_floor_is_subtracted_and_the_raw_times_kept():
    t = FakeTimer(kernel_ms=0.050)
    t.empty_ms = 0.003  # what events add around any kernel on this fake device
    timing = time_kernel(t.launch, t, TimingPlan(budget_ms=20))
    assert timing.event_floor_ms == pytest.approx(0.003)
    assert timing.median_ms == pytest.approx(0.047)
    assert timing.event_median_ms == pytest.approx(0.050)
    assert "minus the event overhead 3.00 us (empty-kernel floor 3.00 us" in timing.method
    raw = time_kernel(t.launch, t, TimingPlan(budget_ms=20, subtract_floor=False))
    assert raw.median_ms == pytest.approx(0.050) and raw.event_times_ms is None


def test_the_empty_kernels_own_run_is_added_back_from_graph_replay():
    t = FakeTimer(kernel_ms=0.050, graph=0.001)   # graph replay: 1 us per empty launch
    t.empty_ms = 0.003
    timing = time_kernel(t.launch, t, TimingPlan(budget_ms=20))
    assert timing.median_ms == pytest.approx(0.048)   # 50 - (3 - 1)
    assert "less its own run, 1.00 us by graph replay" in timing.method


def test_host_time_is_described_without_device_vocabulary():
    """An interpreter's run is timed by the host clock: its method names that clock and never
    speaks of events, an event overhead or an L2 flush (issue 17: GPU words on a CPU run)."""
    import time as _time

    from jupyter_ktune.measure.timing import HostClock

    timing = time_kernel(lambda: _time.sleep(0.001), HostClock("Triton interpreter, host time"),
                         TimingPlan(budget_ms=30))
    assert timing.method.startswith("Triton interpreter, host time: the host clock around each")
    assert "event" not in timing.method and "L2 flushed" not in timing.method


def test_a_warm_clock_shortens_the_warm_up_and_the_method_says_so():
    """Issue 21: 25 ms of flushed warm-up runs per config was most of a microsecond kernel's
    timing in a sweep. A clock read at its maximum just before needs no ramp: about 1 ms."""
    cold, warm = FakeTimer(kernel_ms=0.01), FakeTimer(kernel_ms=0.01)
    t_cold = time_kernel(cold.launch, cold, TimingPlan(budget_ms=200))
    t_warm = time_kernel(warm.launch, warm, TimingPlan(budget_ms=200, clock_ready=True))
    assert t_cold.warmup_runs == 1000  # 25 ms / 10 us, capped
    assert t_warm.warmup_runs == 100 and "read at its maximum" in t_warm.method
    assert "read at its maximum" not in t_cold.method
    slow = FakeTimer(kernel_ms=5.0)  # at least 3 runs whatever the kernel's length
    assert time_kernel(slow.launch, slow, TimingPlan(budget_ms=50, clock_ready=True)
                       ).warmup_runs == 3
    interpreted = FakeTimer(kernel_ms=400.0)  # one run outlasts the whole warm-up: one run
    assert time_kernel(interpreted.launch, interpreted, TimingPlan(budget_ms=50)
                       ).warmup_runs == 1


def test_the_stages_account_for_the_measurement():
    t = FakeTimer(kernel_ms=0.002, graph=0.001)
    timing = time_kernel(t.launch, t, TimingPlan(budget_ms=5))
    assert list(timing.stages_ms) == ["estimate", "warm-up", "runs", "floor", "graph",
                                      "host launch"]
    assert all(v >= 0 for v in timing.stages_ms.values())


def test_the_clock_counts_as_up_only_near_its_maximum():
    from jupyter_ktune.measure.clocks import Clocks, clock_is_up
    from jupyter_ktune.runner.phases import split_phase

    assert clock_is_up(Clocks(sm_mhz=1980, mem_mhz=3201, sm_max_mhz=1980))
    assert clock_is_up(Clocks(sm_mhz=1785, mem_mhz=3201, sm_max_mhz=1980))
    assert not clock_is_up(Clocks(sm_mhz=345, mem_mhz=3201, sm_max_mhz=1980))
    assert not clock_is_up(None) and not clock_is_up(Clocks(1500, 3201, 0))
    parts = split_phase(10.0, {"warm-up": 4.0, "runs": 5.0})
    assert parts == {"time: warm-up": 4.0, "time: runs": 5.0, "time: other": 1.0}


def test_a_raced_config_skips_the_graph_figure_and_a_warm_clock_shortens_its_warm_up():
    from jupyter_ktune import parse_cell
    from jupyter_ktune.measure.clocks import Clocks
    from jupyter_ktune.runner.timed import timing_plan

    spec = parse_cell("k --backend cuda --budget-ms 7", '''extern "C" __global__ void k() {}''')
    plain, raced = timing_plan(spec, None, None), timing_plan(spec, 0.5, None)
    assert plain.graph_below_ms > 0 and raced.graph_below_ms == 0 and raced.race_ms == 0.5
    assert plain.budget_ms == 7 and not plain.clock_ready
    assert timing_plan(spec, None, Clocks(1980, 3201, 1980)).clock_ready


class DriftingTimer(FakeTimer):
    """Events whose overhead (what brackets every launch, the kernel's and the empty one's)
    steps between two levels every ``period`` recorded pairs: the front-end drift seen on the
    H200 for microsecond kernels."""

    def __init__(self, kernel_ms: float, period: int = 60):
        super().__init__(kernel_ms)
        self.period, self.pairs = period, 0

    def elapsed_ms(self, start: list, end: list) -> float:
        self.pairs += 1
        level = 0.003 if (self.pairs // self.period) % 2 else 0.0005
        return end[0] - start[0] + level


def test_an_interleaved_floor_cancels_drift_that_a_floor_measured_after_does_not():
    """A 1 us kernel under a 3 us / 0.5 us event overhead that steps every 60 runs: the floor
    measured after the runs sees one level, the runs a mix; interleaved, both see the mix."""
    def median(every):
        t = DriftingTimer(kernel_ms=0.001)
        return time_kernel(t.launch, t, TimingPlan(budget_ms=50, max_runs=240, min_runs=240,
                                                   floor_every=every)).median_ms
    interleaved, after = median(2), median(0)
    assert interleaved == pytest.approx(0.001, abs=0.0002), interleaved
    assert abs(after - 0.001) > 0.0003, after  # off by 30 % or more of the kernel


def test_a_quantised_clock_stops_timing_once_the_median_is_located_to_a_tick():
    """Times in 32 ns steps: the median's CI cannot get narrower than one step, so asking for
    0.5 % of a 1.3 us kernel (6.5 ns) used to run to the budget."""

    class Quantised(FakeTimer):
        def elapsed_ms(self, start, end):
            return np.round((end[0] - start[0]) / 32e-6) * 32e-6

    def n(tick_rule):
        t = Quantised(kernel_ms=0.0013, jitter=0.05)
        plan = TimingPlan(budget_ms=1e4, max_runs=4000, min_runs=10, floor_every=0)
        if not tick_rule:
            import jupyter_ktune.measure.timing as timing

            real = timing.event_tick_ms
            timing.event_tick_ms = lambda times: 0.0
            try:
                return time_kernel(t.launch, t, plan).n
            finally:
                timing.event_tick_ms = real
        return time_kernel(t.launch, t, plan).n
    assert n(True) < 300 < n(False), (n(True), n(False))


def test_events_that_timed_the_host_are_called_host_bound():
    """When the host cannot keep the GPU ahead, every event pair brackets host time: the empty
    kernel's events read tens of us instead of a few. The timing says so."""

    class Starved(FakeTimer):
        empty_ms = 0.08  # what the empty kernel's events read with the GPU waiting

    t = Starved(kernel_ms=0.0815)
    timing = time_kernel(t.launch, t, TimingPlan(budget_ms=5))
    assert timing.host_bound and "HOST-BOUND" in timing.method
    fine = FakeTimer(kernel_ms=0.002)
    fine.empty_ms = 0.003
    ok = time_kernel(fine.launch, fine, TimingPlan(budget_ms=5))
    assert not ok.host_bound and "HOST-BOUND" not in ok.method


def test_a_host_bound_timing_waits_for_the_workers_background_work_only_when_there_is_some():
    import threading
    from concurrent.futures import Future

    from jupyter_ktune.backends import torch_interop
    from jupyter_ktune.runner.timed import quiet_host as _quiet_host

    done: Future = Future()
    done.set_result((None, None))
    assert not _quiet_host(done, 1.0)  # nothing in the background: no second timing
    pending: Future = Future()
    threading.Timer(0.2, lambda: pending.set_result((None, None))).start()
    t0 = time.perf_counter()
    assert _quiet_host(pending, 5.0) and pending.done() and time.perf_counter() - t0 >= 0.15
    import_like = threading.Thread(target=time.sleep, args=(0.2,))
    import_like.start()
    saved = list(torch_interop._warm_thread)
    torch_interop._warm_thread[:] = [import_like]
    try:
        assert _quiet_host(done, 5.0) and not import_like.is_alive()
    finally:
        torch_interop._warm_thread[:] = saved


def test_racing_reads_the_floor_of_its_own_interleaved_runs_not_a_stale_one():
    """A 1 us kernel raced against an incumbent of the same 1 us, under a 3 us event overhead,
    with the timer's cached racing floor left at 0.5 us from another state: against the stale
    floor the tie looks 3.5x slower and is raced out; against its own empties it is not."""

    class Overhead(FakeTimer):
        def elapsed_ms(self, start, end):
            return end[0] - start[0] + 0.003

    t = Overhead(kernel_ms=0.001, jitter=0.01)
    t._ktune_race_floor_ms = 0.0005  # stale
    timing = time_kernel(t.launch, t, TimingPlan(budget_ms=50, race_ms=0.001, min_runs=10))
    assert "raced" not in timing.method, timing.method
    assert timing.median_ms == pytest.approx(0.001, rel=0.05)


def test_a_host_clock_takes_the_launch_cost_from_its_own_timed_calls():
    """Under an interpreter each launch is the whole run: 20 extra calls for the host launch
    cost took seconds of the CPU quickstart's Triton cell (issue 33). The timed calls are host
    calls already, so their median is that cost."""
    import time as _time

    from jupyter_ktune.measure.timing import HostClock

    calls = []

    def launch() -> None:
        calls.append(1)
        _time.sleep(0.002)

    timing = time_kernel(launch, HostClock("Triton interpreter, host time"),
                         TimingPlan(budget_ms=30))
    timed = timing.warmup_runs + len(timing.times_ms)
    assert len(calls) <= timed + 12  # the empty calls are not launches; no 20 more runs
    assert timing.host_launch_us >= 1500  # about the 2 ms call itself
