"""Result types: one per thing, each carrying how it was obtained.

* :class:`Timing` - raw per-run device times and their statistics.
* :class:`Provenance` - device, clocks, method, toolchain versions and source hash.
* :class:`Measurement` - a Timing plus its Provenance: a number that says where it came from.
* :class:`Verification` - the comparison against the reference.
* :class:`RunResult` - one variant's outcome: status, static report, verification, measurement.

These are plain, picklable dataclasses: they cross the worker boundary and go into the store.
Rendering lives in :mod:`jupyter_ktune.render`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from jupyter_ktune.render import run_result_html, run_result_text
from jupyter_ktune.status import Status as Status


@dataclass(frozen=True)
class Timing:
    """Per-run kernel times in milliseconds and how they were taken.

    ``times_ms`` keeps every run (like cupyx's ``gpu_times``) so any statistic can be recomputed.
    ``graph_ms`` is the per-launch time from replaying a CUDA graph of back-to-back launches: warm
    cache and no launch gaps, shown beside the median for tiny kernels.
    """

    times_ms: np.ndarray
    method: str
    warm_cache: bool = False
    l2_flush_bytes: int = 0
    warmup_runs: int = 0
    graph_ms: float | None = None
    graph_launches: int = 0
    host_launch_us: float | None = None
    # the same runs by raw CUDA events, when times_ms is CUPTI or floor-corrected
    event_times_ms: np.ndarray | None = None
    event_floor_ms: float | None = None  # an empty kernel timed the same way
    device_ms_total: float = 0.0  # all event-timed device work of this measurement (budgeting)

    @property
    def event_median_ms(self) -> float | None:
        """Median of the event-bracketed times (includes front-end gaps), if recorded."""
        return None if self.event_times_ms is None else float(np.median(self.event_times_ms))

    @property
    def n(self) -> int:
        """Number of timed runs."""
        return int(self.times_ms.size)

    @property
    def median_ms(self) -> float:
        """Median run time, the headline number."""
        return float(np.median(self.times_ms))

    @property
    def q1_ms(self) -> float:
        """25th percentile."""
        return float(np.percentile(self.times_ms, 25))

    @property
    def q3_ms(self) -> float:
        """75th percentile."""
        return float(np.percentile(self.times_ms, 75))

    @property
    def iqr_ms(self) -> float:
        """Interquartile range: the spread we report next to the median."""
        return self.q3_ms - self.q1_ms

    @property
    def min_ms(self) -> float:
        """Fastest run."""
        return float(np.min(self.times_ms))

    def median_ci_ms(self, confidence: float = 0.95) -> tuple[float, float]:
        """Distribution-free confidence interval of the median from order statistics."""
        from jupyter_ktune.measure.stats import median_ci

        return median_ci(self.times_ms, confidence)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (times as a list)."""
        d = asdict(self)
        d["times_ms"] = self.times_ms.tolist()
        if self.event_times_ms is not None:
            d["event_times_ms"] = self.event_times_ms.tolist()
        return d


@dataclass(frozen=True)
class Provenance:
    """Where a number came from: enough to judge it, and to refuse to compare apples to pears."""

    device: str
    method: str
    source_hash: str
    compute_capability: str | None = None
    sm_clock_mhz: tuple[int, int] | None = None  # before, after the timed runs (NVML)
    sm_clock_max_mhz: int | None = None
    mem_clock_mhz: int | None = None
    driver: str | None = None
    toolchain: Mapping[str, str] = field(default_factory=dict)
    host: str | None = None
    timestamp: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        d = asdict(self)
        d["toolchain"] = dict(self.toolchain)
        return d


@dataclass(frozen=True)
class Measurement:
    """A timing and its provenance, plus the work done so rates can be derived."""

    timing: Timing
    provenance: Provenance
    flops: float | None = None
    bytes: float | None = None

    @property
    def tflops(self) -> float | None:
        """Achieved TFLOP/s at the median time, when the user gave the flop count."""
        if self.flops is None:
            return None
        return self.flops / (self.timing.median_ms * 1e-3) / 1e12

    @property
    def gbps(self) -> float | None:
        """Achieved GB/s (1e9 bytes per second) at the median time, when bytes were given."""
        if self.bytes is None:
            return None
        return self.bytes / (self.timing.median_ms * 1e-3) / 1e9

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"timing": self.timing.to_dict(), "provenance": self.provenance.to_dict(),
                "flops": self.flops, "bytes": self.bytes}


@dataclass(frozen=True)
class OutputCheck:
    """Comparison of one output array against the reference."""

    name: str
    passed: bool
    max_abs_err: float
    max_rel_err: float
    rel_l2_err: float
    rtol: float
    atol: float
    mismatched: int
    unwritten: int
    size: int
    first_bad_index: tuple[int, ...] | None = None
    note: str = ""


@dataclass(frozen=True)
class Verification:
    """All outputs checked on fresh random inputs with poisoned outputs."""

    checks: tuple[OutputCheck, ...]
    trials: int = 1

    @property
    def passed(self) -> bool:
        """True when every output of every trial passed."""
        return all(c.passed for c in self.checks)

    @property
    def max_abs_err(self) -> float:
        """Largest absolute error over all outputs."""
        return max((c.max_abs_err for c in self.checks), default=0.0)

    def summary(self) -> str:
        """One line: 'correct (max abs err 3e-07)' or what went wrong first."""
        bad = [c for c in self.checks if not c.passed]
        if not bad:
            return f"correct (max abs err {self.max_abs_err:.3g}, {self.trials} fresh input set(s))"
        c = bad[0]
        if c.unwritten:
            return (f"{c.name}: {c.unwritten} of {c.size} elements never written "
                    f"(first at {c.first_bad_index})")
        if c.note:
            return f"{c.name}: {c.note}"
        return (f"{c.name}: {c.mismatched} of {c.size} elements off (max abs err "
                f"{c.max_abs_err:.3g}, rtol {c.rtol:g}, atol {c.atol:g}, "
                f"first at {c.first_bad_index})")


@dataclass(frozen=True)
class RunResult:
    """One variant's outcome; the ``%%kernel`` magic returns one, so ``_`` holds it."""

    name: str
    backend: str
    config: Mapping[str, Any]
    status: Status
    reason: str = ""
    static: Any = None  # StaticReport (measure.static); Any keeps this module import-light
    verification: Verification | None = None
    measurement: Measurement | None = None
    device: str = ""
    diagnostics: tuple[Any, ...] = ()
    launch: Mapping[str, Any] = field(default_factory=dict)
    phases_ms: Mapping[str, float] = field(default_factory=dict)  # worker host time per phase

    @property
    def median_ms(self) -> float | None:
        """Median time, or None when the variant was not timed."""
        return self.measurement.timing.median_ms if self.measurement else None

    def _repr_html_(self) -> str:
        return run_result_html(self)

    def __repr__(self) -> str:
        return run_result_text(self)
