"""The sweep's last stage: the fastest few configs timed again, with a larger budget.

A sweep's first pass times each config just well enough to rank it (and races the clearly
slower ones out, ``TimingPlan.race_ms``). The top ``top_k`` are then re-timed on one worker
(``pin``: the same GPU for all of them) with ``final_budget_factor`` times the cell's budget, and
the verdict (``report.decide``) compares those re-timings only: a winner is declared from runs
taken under the same conditions, never from a first pass that raced or shared the GPU with a
compile burst. A re-timing already in the store (same source, config and device) is reused
unless ``retime`` is set.
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from typing import Any

from jupyter_ktune.results import RunResult
from jupyter_ktune.tune import search
from jupyter_ktune.tune.report import Evaluation
from jupyter_ktune.tune.store import Store, StoredResult, StoreKey


def with_phases(stored: StoredResult, result: RunResult) -> StoredResult:
    """``stored`` with where the worker's time went (``phases_ms``; for readers, not stored)."""
    if not result.phases_ms:
        return stored
    return dataclasses.replace(stored, extra={**stored.extra, "phases_ms": dict(result.phases_ms)})


def retime_top(sweep: Any, strategy: Any, runner: Any, store: Store, key: StoreKey, total: int,
               t0: float, evals: list[Evaluation]) -> list[StoredResult]:
    """Re-time ``sweep``'s best ``top_k`` configs so far; their stored results, fastest first
    as ranked by the first pass (empty when stopped or ``top_k`` < 1)."""
    k = sweep.options.top_k
    if sweep.stopped or k < 1:
        return []
    top = search.top_k(strategy.told, k)
    opts = sweep.spec.options
    factor = sweep.options.final_budget_factor
    spec = sweep.spec.with_options(budget_ms=opts.budget_ms * factor,
                                   max_runs=int(opts.max_runs * factor))
    out: list[StoredResult] = []
    best: list[StoredResult | None] = [None]
    for c, _ms in top:
        stored = None if sweep.options.retime else store.get(key, c, stage="final")
        if stored is None or stored.retry:
            if sweep.stopped:
                break
            sweep.timeline.mark("final sent", c)
            result = runner.submit(spec, c, pin=True).result()
            sweep.timeline.mark("final back", c)
            stored = with_phases(store.put(key, replace(result, config=dict(c)), stage="final"),
                                 result)
        out.append(stored)
        sweep._emit(evals, stored, False, total, t0, best, stage="final",
                    retimed=(len(out), len(top)))
    return out
