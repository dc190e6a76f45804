"""Where a fresh notebook's first ``%%kernel`` result went, phase by phase (issue 33, item 5).

A first-cell target that is not met is held by a phase: the worker's imports (torch's own,
"torch import", paid by the anchor's process too), the cell's module, the compile. The first
result carries its phases (``RunResult.extra["phases_ms"]``, every cold cost included); this
takes their median over the fresh processes of one kernel and prints the largest, so a
benchmark's last table says what holds each first cell, not only how long it took.
Used by ``first_minute.py`` and ``corpus_vs_autotune.py``.
"""

from __future__ import annotations

import statistics
from typing import Any

SHOWN = 4  # phases per kernel in the table: the largest


def median_phases(rows: list[dict]) -> dict[str, float]:
    """The median of each phase (ms) over the rows' first results, largest first; a phase a
    row lacks counts 0 there (it cost nothing in that process)."""
    runs = [r["first_phases_ms"] for r in rows if isinstance(r.get("first_phases_ms"), dict)]
    names = dict.fromkeys(name for run in runs for name in run)
    med = {n: statistics.median(float(run.get(n, 0.0)) for run in runs) for n in names}
    return dict(sorted(med.items(), key=lambda kv: -kv[1]))


def print_first_cells(kernels: dict[str, Any]) -> None:
    """Per kernel: the first result's time (median, from the interpreter's start), the worker's
    phases' sum, and the largest phases with their median ms."""
    print(f"\n{'kernel':18} {'1st result s':>12} {'phases s':>8}  largest phases (median ms)")
    for name, got in kernels.items():
        s = (got or {}).get("summary", {})
        phases = s.get("first_phases_ms") or {}
        first, total = s.get("first_result_s"), sum(phases.values()) / 1e3
        top = ", ".join(f"{n} {ms:.0f}" for n, ms in list(phases.items())[:SHOWN])
        print(f"{name:18} {first if first is not None else float('nan'):12.2f} {total:8.2f}"
              f"  {top or '-'}")
