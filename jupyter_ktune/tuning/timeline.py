"""When each config of a sweep was compiled, queued, run and re-timed: the sweep's timeline.

The per-phase sums (bench/sweep_phases.py) say how much time each phase took in all; they
cannot say what the wall was waiting on. A short sweep of six microsecond kernels took 0.84 s
on the H200 while its compiles, verification and timing summed to about 0.6 s of critical path
(bench/results/corpus_vs_autotune/2026-12-01-1919): the timeline is what shows where the
rest went (a compile that came back late, a run waiting for a free worker, a round trip).
Marks cost a ``perf_counter`` call and a list append; every sweep keeps them in its report.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

#: The events a sweep marks, in the order a config meets them.
KINDS = ("compile sent", "compile back", "inputs ready", "run sent", "run back", "retake sent",
         "retake back", "final sent", "final back", "launcher built")


def config_label(config: Mapping[str, Any]) -> str:
    """A short, stable name for a config: its values in key order (``128,64,3,8``)."""
    return ",".join(str(config[k]) for k in sorted(config))


class SweepTimeline:
    """Seconds since the sweep's start at which each config met each event."""

    def __init__(self, t0: float | None = None):
        self.t0 = time.perf_counter() if t0 is None else t0
        self._marks: list[tuple[float, str, str]] = []
        self._lock = threading.Lock()  # runs come back on the runner's threads

    def mark(self, kind: str, config: Mapping[str, Any]) -> None:
        if kind not in KINDS:
            raise ValueError(f"[ktune] unknown timeline event {kind!r}; known: {KINDS}")
        with self._lock:
            self._marks.append((time.perf_counter() - self.t0, kind, config_label(config)))

    def rows(self) -> list[tuple[float, str, str]]:
        """``(seconds, event, config)`` in time order (a copy)."""
        with self._lock:
            return sorted(self._marks)

    def per_config(self) -> dict[str, dict[str, float]]:
        """``{config: {event: seconds}}``, the first time each event happened to a config."""
        out: dict[str, dict[str, float]] = {}
        for at, kind, label in self.rows():
            out.setdefault(label, {}).setdefault(kind, round(at, 4))
        return out

    def waits(self) -> dict[str, float]:
        """Summed seconds, over configs, between consecutive events of one config: how long
        the configs waited on each step (``compile``: sent to back; ``queued``: compile back to
        run sent; ``run``: sent to back, the worker's round trip; ``retake``: a host-bound
        timing taken again; ``final``: the re-timing)."""
        spans = {"compile": ("compile sent", "compile back"),
                 "queued": ("compile back", "run sent"),
                 "run": ("run sent", "run back"), "retake": ("retake sent", "retake back"),
                 "final": ("final sent", "final back")}
        out = dict.fromkeys(spans, 0.0)
        for events in self.per_config().values():
            for name, (a, b) in spans.items():
                if a in events and b in events:
                    out[name] += events[b] - events[a]
        return {k: round(v, 4) for k, v in out.items()}

    def text(self, limit: int = 40) -> str:
        """The first ``limit`` marks as lines (:func:`timeline_text`)."""
        return timeline_text(self.rows(), limit)


def timeline_text(rows: Sequence[Sequence[Any]], limit: int = 40) -> str:
    """Timeline rows (``report.info["timeline"]``, also after a JSON round trip) as lines
    ``  0.341 s  compile back  3,1``, the first ``limit`` of them."""
    lines = [f"{at:8.3f} s  {kind:<14}  {label}" for at, kind, label in rows[:limit]]
    if len(rows) > limit:
        lines.append(f"... {len(rows) - limit} more")
    return "\n".join(lines)


class SetupLaps:
    """Milliseconds of each step of a sweep's setup, before its timeline starts.

    The press waits for these too: fla's softmax waited 1.87 s from the press to its sweep's
    start while its whole 6-config sweep took 0.35 s (bench/results/corpus_vs_autotune/
    2026-12-05-1506), so each step is named in the report's ``setup_ms`` (issue 33)."""

    def __init__(self) -> None:
        self._last = time.perf_counter()
        self.ms: dict[str, float] = {}

    def lap(self, step: str) -> None:
        """The time since the previous lap (or the start) was spent on ``step``."""
        now = time.perf_counter()
        self.ms[step] = round((now - self._last) * 1e3, 1)
        self._last = now
