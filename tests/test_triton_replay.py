"""Timed runs of a Triton kernel replay the launcher call of its first launch (backends/triton/
replay.py), with fakes shaped like Triton's CompiledKernel and JIT dispatch: the GPU path itself
is checked on the H200 (bench/replay_check.py)."""

from __future__ import annotations

import numpy as np

from jupyter_ktune.backends.triton.replay import Replay
from jupyter_ktune.measure.timing import time_kernel


class FakeCompiled:
    """Triton's CompiledKernel as the dispatch sees it: ``run`` loads it on first use."""

    def __init__(self) -> None:
        self._run = None
        self.function, self.packed_metadata = 77, (4, 1, 0)
        self.launched: list[tuple] = []

    @property
    def run(self):
        if self._run is None:
            self._run = lambda *a: self.launched.append(a)
        return self._run


class FakeJit:
    """``jit[grid](**kwargs)``: the Python dispatch (counted), ending in one ``kernel.run`` call
    (or ``calls`` of them) with the current stream."""

    def __init__(self, calls: int = 1) -> None:
        self.kernel, self.stream, self.dispatches, self.calls = FakeCompiled(), 5, 0, calls

    def launch(self) -> None:
        self.dispatches += 1
        for _ in range(self.calls):
            self.kernel.run(8, 1, 1, self.stream, self.kernel.function, self.kernel.packed_metadata,
                            None, None, None, "x_ptr", 1024)


def replay_of(jit: FakeJit, hooks: list[bool] | None = None, compiled=None) -> Replay:
    hooks = hooks if hooks is not None else [False]
    return Replay(jit.launch, compiled or (lambda: jit.kernel), lambda: jit.stream,
                  lambda: hooks[0])


def test_the_first_launch_dispatches_and_the_next_replay_its_launcher_call():
    jit = FakeJit()
    r = replay_of(jit)
    for _ in range(5):
        r()
    assert jit.dispatches == 1 and r.replaying and r.why_not == ""
    assert len(jit.kernel.launched) == 5
    assert len(set(jit.kernel.launched)) == 1  # the same grid, function, metadata, arguments
    assert jit.kernel.launched[0] == (8, 1, 1, 5, 77, (4, 1, 0), None, None, None, "x_ptr", 1024)


def test_the_stream_is_read_at_every_replay():
    """A CUDA graph is captured on a stream of its own: a replay must launch on it."""
    jit = FakeJit()
    r = replay_of(jit)
    r()
    jit.stream = 9
    r()
    assert [a[3] for a in jit.kernel.launched] == [5, 9]


def test_a_launch_hook_sends_every_launch_through_the_dispatch():
    jit, hooks = FakeJit(), [False]
    r = replay_of(jit, hooks)
    r()
    hooks[0] = True  # a profiler (Proton) set knobs.runtime.launch_enter_hook
    r()
    r()
    assert jit.dispatches == 3 and not r.replaying and r.why_not == "launch hooks set"
    assert len(jit.kernel.launched) == 3


def test_a_dispatch_with_two_launcher_calls_is_not_replayed():
    jit = FakeJit(calls=2)
    r = replay_of(jit)
    r()
    r()
    assert jit.dispatches == 2 and not r.replaying
    assert r.why_not == "the dispatch made 2 launcher calls"
    assert len(jit.kernel.launched) == 4


def test_no_compiled_kernel_leaves_the_dispatch_alone():
    jit = FakeJit()

    def broken():
        raise RuntimeError("warmup failed")

    r = replay_of(jit, compiled=broken)
    r()
    r()
    assert jit.dispatches == 2 and not r.replaying and len(jit.kernel.launched) == 2
    assert jit.kernel._run is not None and not hasattr(jit.kernel._run, "__wrapped__")


def test_the_launcher_is_given_back_after_the_recording():
    jit = FakeJit()
    r = replay_of(jit)
    r()
    real = jit.kernel._run
    r()
    assert jit.kernel._run is real  # no shim left on Triton's kernel


class CountingTimer:
    """Just enough of a DeviceTimer for time_kernel: events time nothing, no hold."""

    name, l2_flush_bytes = "counting", 0

    def __init__(self) -> None:
        self.t = 0.0

    def synchronize(self) -> None:
        pass

    def new_event(self) -> list:
        return []

    def record(self, event: list) -> None:
        self.t += 0.001
        event.append(self.t)

    def elapsed_ms(self, start: list, end: list) -> float:
        return end[0] - start[0]

    def flush_l2(self) -> None:
        pass

    def graph_ms(self, launch, launches: int) -> None:
        return None

    def kernel_clock(self) -> str:
        return "no CUPTI"

    def empty_launch(self) -> None:
        pass


def test_time_kernel_measures_the_host_launch_cost_on_the_users_launch():
    """The timed runs use the cheap enqueue; the host cost per launch stated beside the GPU
    time is what the user's own launch call costs."""
    import time

    counts = {"timed": 0, "user": 0}

    def timed() -> None:
        counts["timed"] += 1

    def user() -> None:
        counts["user"] += 1
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 2e-4:
            pass

    t = time_kernel(timed, CountingTimer(), user_launch=user)
    assert counts["user"] == 20 and counts["timed"] > 20
    assert t.host_launch_us >= 150
    t2 = time_kernel(timed, CountingTimer())
    assert t2.host_launch_us < 100 and np.isfinite(t2.median_ms)
