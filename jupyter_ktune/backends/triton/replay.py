"""Timed runs of a Triton kernel enqueued by replaying its launcher call, not the JIT's dispatch.

``kernel[grid](**kwargs)`` binds the arguments, computes the specialization key and looks the
compiled kernel up in Python before the launcher runs. On the H200 that was about 75 us of host
time per launch for fla's softmax in a sweep (20 launch calls took 1.5 ms), against 70 us of GPU
per flushed run of the 1.5 us kernel (bench/results/corpus_vs_autotune/2026-12-03-0638): with
the L2 flush and the two events, about 125 us of host per timed run, so a microsecond kernel's
measurement took as long as the host needed to queue it. The GPU times do not depend on it (the
runs are queued behind a hold, ``measure.held_runs``), only the wall time does.

Every dispatch ends in one call of the compiled kernel's launcher with the grid, the stream, the
CUDA function, the packed metadata, the launch hooks and the bound arguments. :class:`Replay`
records that call on the first launch (which goes the whole way, as the user's does) and makes
the same call for the next ones, with the stream read again each time (a graph capture runs on a
stream of its own). The GPU gets the same kernel, grid, block, shared memory and arguments (the
same tensors: their pointers are read by the launcher at each call). It falls back to the full
dispatch whenever the recording does not hold: a launch hook set (Proton, profilers), a dispatch
that made no launcher call or more than one, a compiled kernel without Triton's ``run``/``_run``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

#: Set to 0 to time every run through Triton's full dispatch (an A/B against the replay).
REPLAY_ENV = "KTUNE_REPLAY"


def enabled() -> bool:
    """Whether timed runs replay the launcher call (``KTUNE_REPLAY=0`` turns it off)."""
    return os.environ.get(REPLAY_ENV, "1") != "0"


class Replay:
    """``launch`` (the user's dispatch), replayed at the compiled kernel's launcher.

    ``compiled`` returns the CompiledKernel the dispatch launches (``JITFunction.warmup``), or
    None; ``stream`` returns the current stream as Triton reads it. Both are looked up lazily so
    nothing here runs before the first launch.
    """

    def __init__(self, launch: Callable[[], None], compiled: Callable[[], Any],
                 stream: Callable[[], int], hooks_set: Callable[[], bool]):
        self._launch, self._compiled, self._stream, self._hooks_set = (launch, compiled, stream,
                                                                       hooks_set)
        self._run: Callable[..., Any] | None = None
        self._args: tuple[Any, ...] = ()
        self.why_not = ""  # why the last launch was not replayed ("" once it is)

    @property
    def replaying(self) -> bool:
        return self._run is not None

    def __call__(self) -> None:
        if self._run is None or self._hooks_set():
            self._record()
            return
        a = self._args
        self._run(a[0], a[1], a[2], self._stream(), *a[4:])

    def _record(self) -> None:
        """The full dispatch, with the launcher call it makes captured for the next launches."""
        self._run = None
        kernel = None
        try:
            kernel = self._compiled()
        except Exception:  # noqa: BLE001 - the dispatch below raises it where it belongs
            kernel = None
        if kernel is None or not hasattr(kernel, "_run") or self._hooks_set():
            self.why_not = "no compiled kernel to replay" if kernel is None else "launch hooks set"
            self._launch()
            return
        real = kernel.run  # Triton's property: loads the module and builds the launcher
        calls: list[tuple[Any, ...]] = []

        def shim(*args: Any) -> Any:
            calls.append(args)
            return real(*args)

        kernel._run = shim
        try:
            self._launch()
        finally:
            kernel._run = real
        if len(calls) != 1 or len(calls[0]) < 9:
            self.why_not = f"the dispatch made {len(calls)} launcher calls"
            return
        self._run, self._args, self.why_not = real, calls[0], ""


def for_jit(jit: Any, grid: tuple[int, ...], kwargs: dict[str, Any],
            launch: Callable[[], None]) -> Replay:
    """A :class:`Replay` of ``launch`` for ``jit[grid](**kwargs)`` under this process's Triton."""
    from triton import knobs
    from triton.runtime import driver

    def compiled() -> Any:
        return jit.warmup(grid=grid, **kwargs)

    def stream() -> int:
        active = driver.active
        return active.get_current_stream(active.get_current_device())

    def hooks_set() -> bool:
        return knobs.runtime.launch_enter_hook is not None or \
            knobs.runtime.launch_exit_hook is not None

    return Replay(launch, compiled, stream, hooks_set)
