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

from jupyter_ktune.render import counted, run_result_html, run_result_text
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
    stages_ms: Mapping[str, float] = field(default_factory=dict)  # host ms per protocol stage
    host_bound: bool = False  # the GPU waited for the host between runs: the times hold host time
    # what was subtracted from every run's events: the floor less the empty kernel's own run
    subtracted_ms: float | None = None

    @property
    def event_overhead_ms(self) -> float | None:
        """The event overhead subtracted from every run, or None when nothing was subtracted.

        Results saved before ``subtracted_ms`` was kept give it by their own runs: every run is
        its event time less the same overhead (issue 35: the card called the 2.82 µs floor
        "subtracted" where 2.28 µs was).
        """
        if self.subtracted_ms is not None:
            return self.subtracted_ms
        if self.event_times_ms is None or "minus" not in self.method:
            return None
        return float(np.median(np.asarray(self.event_times_ms) - np.asarray(self.times_ms)))

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
        from jupyter_ktune.stats import median_ci

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
        if self.flops is None or self.timing.median_ms <= 0:
            return None
        return self.flops / (self.timing.median_ms * 1e-3) / 1e12

    @property
    def gbps(self) -> float | None:
        """Achieved GB/s (1e9 bytes per second) at the median time, when bytes were given."""
        if self.bytes is None or self.timing.median_ms <= 0:
            return None
        return self.bytes / (self.timing.median_ms * 1e-3) / 1e9

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"timing": self.timing.to_dict(), "provenance": self.provenance.to_dict(),
                "flops": self.flops, "bytes": self.bytes}


def _g(x: float) -> str:
    return f"{x:.2g}"


@dataclass(frozen=True)
class OutputCheck:
    """Comparison of one output array against the reference.

    ``rule`` is the rule that decided (``normwise``, ``per-element (user rtol/atol)``, ``exact``
    or ``comparator``); for the normwise rule ``bound`` is the relative-L2 bound, ``elem_bound``
    the per-element bound relative to ``max(|ref|, rms(ref))`` and ``why`` what they were built
    from. ``mismatched`` counts elements beyond the per-element bound of the rule;
    ``unwritten`` those still holding the poison, ``nonfinite`` NaN/Inf the kernel wrote where
    the reference is finite.
    """

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
    rule: str = "per-element (user rtol/atol)"
    bound: float = 0.0
    elem_bound: float = 0.0
    why: str = ""
    nonfinite: int = 0
    first_unwritten_index: tuple[int, ...] | None = None
    first_nonfinite_index: tuple[int, ...] | None = None

    def verdict(self) -> str:
        """Which rule decided, with its figures: 'normwise rel-L2 3.1e-07 <= 0.0015 (...)'."""
        if self.rule == "normwise":
            op = "<=" if self.rel_l2_err <= self.bound else ">"
            return (f"normwise rel-L2 {_g(self.rel_l2_err)} {op} {_g(self.bound)} "
                    f"({self.why}; rule: normwise)")
        if self.rule == "exact":
            return "exact match (rule: exact, integer output)"
        if self.rule == "comparator":
            return f"rel-L2 {_g(self.rel_l2_err)} (rule: {self.why})"
        return (f"rel-L2 {_g(self.rel_l2_err)}, |out - ref| <= {self.atol:g} + {self.rtol:g}"
                "·|ref| (rule: per-element, user rtol/atol)")

    def problems(self) -> list[str]:
        """What is wrong with this output, most telling first (empty when it passed)."""
        if self.passed:
            return []
        out = []
        if self.unwritten and not self.note:
            out.append(f"{self.name}: {self.unwritten} of {counted(self.size, 'element')} "
                       f"never written (first at {self.first_unwritten_index})")
        if self.nonfinite:
            out.append(f"{self.name}: kernel wrote NaN/Inf at "
                       f"{counted(self.nonfinite, 'element')} (first at "
                       f"{self.first_nonfinite_index})")
        if self.note:
            out.append(f"{self.name}: {self.note}")
        off = self.mismatched - self.unwritten - self.nonfinite
        if off > 0 or not out:
            beyond = (f"beyond {_g(self.elem_bound)}·max(|ref|, rms(ref))" if
                      self.rule == "normwise" else "off")
            what = (f"{off} of {counted(self.size, 'element')} {beyond}, max abs err "
                    f"{self.max_abs_err:.3g}, first at {self.first_bad_index}; " if off > 0
                    else "")
            out.append(f"{self.name}: {what}{self.verdict()}")
        return out


@dataclass(frozen=True)
class GuardBreach:
    """Writes the kernel made into the guard regions around one buffer (issue 15 item 5).

    ``before``/``after``: guard elements changed before the start / past the end; ``reach_*``:
    how far out the farthest changed element lies, in elements.
    """

    name: str
    before: int = 0
    after: int = 0
    reach_before: int = 0
    reach_after: int = 0

    @property
    def message(self) -> str:
        """'wrote 24 elements past the end of `y` (up to 24 past it)', and/or before its start."""
        parts = []
        if self.after:
            parts.append(f"wrote {counted(self.after, 'element')} past the end of "
                         f"`{self.name}` (up to {self.reach_after} past it)")
        if self.before:
            parts.append(f"wrote {counted(self.before, 'element')} before the start of "
                         f"`{self.name}` (up to {self.reach_before} before it)")
        return "; ".join(parts)


@dataclass(frozen=True)
class InputChange:
    """An input the verification run changed (issue 15 item 6)."""

    name: str
    changed: int
    size: int

    @property
    def message(self) -> str:
        """The one line naming the input and the fix."""
        return (f"the kernel changed input `{self.name}` ({self.changed} of {self.size} "
                "elements): a kernel that writes its inputs makes timings and later runs wrong; "
                f"write to an output or list it in --out")


@dataclass(frozen=True)
class Verification:
    """All outputs checked on fresh random inputs with poisoned outputs.

    ``guard_breaches`` and ``changed_inputs`` are memory the kernel should not have written;
    ``notes`` say what could not be checked (a backend without guard regions, say).
    """

    checks: tuple[OutputCheck, ...]
    trials: int = 1
    guard_breaches: tuple[GuardBreach, ...] = ()
    changed_inputs: tuple[InputChange, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """True when every output of every trial passed and no other memory was written."""
        return (all(c.passed for c in self.checks) and not self.guard_breaches
                and not self.changed_inputs)

    @property
    def max_abs_err(self) -> float:
        """Largest absolute error over all outputs."""
        return max((c.max_abs_err for c in self.checks), default=0.0)

    def problems(self) -> list[str]:
        """Everything wrong, out-of-bounds writes first (they can explain the rest)."""
        out = [b.message for b in self.guard_breaches]
        out += [c.message for c in self.changed_inputs]
        for c in self.checks:
            out += c.problems()
        return out

    def summary(self) -> str:
        """One line: 'correct (max abs err 3e-07, y: normwise ...)' or what went wrong."""
        problems = self.problems()
        if not problems:
            rules = "; ".join(f"{c.name}: {c.verdict()}" for c in self.checks)
            return (f"correct (max abs err {self.max_abs_err:.3g}, {rules}, {self.trials} fresh "
                    "input set(s))")
        return "; ".join(problems)


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
    static_pending: bool = False  # its static report comes later (RunOptions.static_later)

    @property
    def median_ms(self) -> float | None:
        """Median time, or None when the variant was not timed."""
        return self.measurement.timing.median_ms if self.measurement else None

    @property
    def extra(self) -> Mapping[str, Any]:
        """What a stored result keeps beside its numbers (``StoredResult.extra``), read the
        same way here: ``extra["phases_ms"]``, host wall time per phase of the request, the
        first result's cold costs (worker start, the backend's imports) included."""
        return {"phases_ms": dict(self.phases_ms)}

    def _repr_html_(self) -> str:
        return run_result_html(self)

    def __repr__(self) -> str:
        return run_result_text(self)
