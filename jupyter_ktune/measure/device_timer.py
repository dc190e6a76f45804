"""What the timing protocol needs from a device runtime, and the host clock for runtimes with
no device clock (interpreters, TPU).

Backends differ only in the :class:`DeviceTimer` they hand to ``measure.timing.time_kernel``
(CuPy, torch or JAX events); :class:`HostClock` labels every number it gives as host time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol


class DeviceTimer(Protocol):
    """What the protocol needs from a device runtime."""

    name: str
    l2_flush_bytes: int

    def synchronize(self) -> None:
        """Wait for all queued device work."""

    def new_event(self) -> Any:
        """Return a fresh timing event (not yet recorded)."""

    def record(self, event: Any) -> None:
        """Enqueue ``event`` on the stream the kernel runs on."""

    def elapsed_ms(self, start: Any, end: Any) -> float:
        """Device time between two recorded, completed events."""

    def flush_l2(self) -> None:
        """Enqueue a write over a buffer larger than the L2 cache."""

    def graph_ms(self, launch: Callable[[], None], launches: int) -> float | None:
        """Per-launch time of a captured graph of ``launches`` launches, or None if unsupported."""

    def kernel_clock(self) -> str | None:
        """None when CUPTI kernel records work for this runtime, else the reason they don't."""

    def empty_launch(self) -> None:
        """Enqueue an empty kernel: timed like the user's, it shows what the events add."""

    # Optional, found with getattr: ``hold``/``release``/``hold_timeouts`` (measure.held_runs:
    # runs enqueued behind a gate) and ``wait_for(event)`` (wait for one recorded event, so a
    # measurement's next step is queued before the last is read: held_runs.PipelinedSteps).


class HostClock:
    """DeviceTimer over the host clock, for runtimes with no device clock (interpreters, TPU).

    Its ``name`` must say "host time" so every number it produces is labelled as such; nothing
    is flushed and no floor is subtracted.
    """

    l2_flush_bytes = 0

    def __init__(self, name: str, no_kernel_clock: str = "no device kernel clock here"):
        self.name = name
        self._why = no_kernel_clock

    def synchronize(self) -> None:
        """Nothing is queued: the timed call already waited."""

    def new_event(self) -> list[float]:
        """Return an empty host 'event'."""
        return []

    def record(self, event: list[float]) -> None:
        """Stamp the host clock."""
        event.append(time.perf_counter())

    def elapsed_ms(self, start: list[float], end: list[float]) -> float:
        """Host milliseconds between two stamps."""
        return (end[0] - start[0]) * 1e3

    def flush_l2(self) -> None:
        """No device cache to flush."""

    def graph_ms(self, launch: Callable[[], None], launches: int) -> float | None:
        """No CUDA graphs on the host."""
        return None

    def kernel_clock(self) -> str | None:
        """No kernel clock: say why."""
        return self._why

    def empty_launch(self) -> None:
        """Nothing to launch: the floor is the protocol's own bookkeeping."""
