"""Kernel durations from CUPTI activity records: the GPU's own start and end timestamps.

CUDA events bracket a kernel from the stream's point of view, so each event pair also counts the
front end's work between the events and the kernel (about 2.3 us per run on the H200: a 2.2 us
kernel read 4.5 us, bench/results/foundation-timing.md). That constant is noise for a 1 ms
kernel and a 5-10% error for a 20-50 us one. CUPTI's concurrent-kernel records carry the kernel's
own start and end, the quantity ncu reports as ``gpu__time_duration``.

But tracing is not free: on the H200, with concurrent-kernel tracing enabled, a memory-bound
kernel ran 9-11% slower by its own CUPTI timestamps *and* by events (777 -> 846 us, 50.4 -> 54.9
us; bench/results/probe_kernel_clock.txt, interleaved three times). A clock that changes what it
measures cannot be the default, so the protocol uses events and CUPTI is opt-in
(``TimingPlan(kernel_clock=True)``), labelled in the method text when used.

Only one CUPTI subscriber may exist per process; the worker is the only user (ncu, when it runs
a variant, runs it in a separate process).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

_lock = threading.Lock()
_state: dict[str, Any] = {"registered": False, "error": None, "sink": None}


@dataclass
class KernelRecord:
    """One kernel execution as CUPTI saw it (nanoseconds, GPU clock)."""

    name: str
    start_ns: int
    end_ns: int

    @property
    def duration_ms(self) -> float:
        """End minus start, in milliseconds."""
        return (self.end_ns - self.start_ns) / 1e6


@dataclass
class KernelActivity:
    """Collects concurrent-kernel records between ``__enter__`` and ``__exit__``.

    Examples
    --------
    >>> with KernelActivity() as act:      # doctest: +SKIP
    ...     launch(); synchronize()
    >>> act.records[0].duration_ms          # doctest: +SKIP
    """

    records: list[KernelRecord] = field(default_factory=list)

    def __enter__(self) -> KernelActivity:
        from cupti import cupti

        _register()
        _state["sink"] = self.records
        cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
        return self

    def __exit__(self, *exc: object) -> None:
        from cupti import cupti

        cupti.activity_flush_all(1)
        cupti.activity_disable(cupti.ActivityKind.CONCURRENT_KERNEL)
        _state["sink"] = None


def _register() -> None:
    from cupti import cupti

    with _lock:
        if _state["registered"]:
            return

        def requested() -> tuple[int, int]:
            return 8 << 20, 0

        def completed(activities: list) -> None:
            sink = _state["sink"]
            if sink is None:
                return
            for a in activities:
                if a.kind == cupti.ActivityKind.CONCURRENT_KERNEL:
                    sink.append(KernelRecord(str(a.name), int(a.start), int(a.end)))

        cupti.activity_register_callbacks(requested, completed)
        _state["registered"] = True


def cupti_status() -> str | None:
    """None when CUPTI activity tracing works in this process, else why not (checked once)."""
    if _state["error"] is not None or _state["registered"]:
        return _state["error"] or None
    try:
        from cupti import cupti  # noqa: F401

        _register()
    except Exception as exc:  # noqa: BLE001 - any failure means: use events, and say why
        _state["error"] = f"CUPTI unavailable ({type(exc).__name__}: {exc})"
        return _state["error"]
    return None


def per_run_durations(records: list[KernelRecord], runs: int, skip: str) -> list[float] | None:
    """Kernel time per run (ms): records not named ``skip``, summed per run.

    Returns None when the count does not divide into ``runs`` (records dropped or a kernel
    launched something unexpected): the caller then keeps event timings.
    """
    mine = [r for r in sorted(records, key=lambda r: r.start_ns) if skip not in r.name]
    if runs <= 0 or not mine or len(mine) % runs:
        return None
    k = len(mine) // runs
    return [sum(r.duration_ms for r in mine[i * k:(i + 1) * k]) for i in range(runs)]
