"""The sweep's last stages: host-bound timings taken again, then the fastest few configs timed
again with a larger budget.

A first-pass timing whose events timed the host (``measure.timing``: HOST-BOUND; the compile
pool's processes share the host with the device worker, and a microsecond kernel's timed run
leaves the host about 10 us of slack) ranks nothing: its config is timed once more when the
first pass is over and the compiles are done (:func:`retake_host_bound`), before the top few
are chosen.

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

from jupyter_ktune.measure.timing import HOST_BOUND_MARK
from jupyter_ktune.results import RunResult
from jupyter_ktune.space import Config
from jupyter_ktune.tuning import search
from jupyter_ktune.tuning.report import Evaluation
from jupyter_ktune.tuning.store import Store, StoredResult, StoreKey


def with_phases(stored: StoredResult, result: RunResult) -> StoredResult:
    """``stored`` with where the worker's time went (``phases_ms``; for readers, not stored)."""
    if not result.phases_ms:
        return stored
    return dataclasses.replace(stored, extra={**stored.extra, "phases_ms": dict(result.phases_ms)})


def retake_host_bound(sweep: Any, strategy: Any, runner: Any, store: Store, key: StoreKey,
                      evals: list[Evaluation]) -> int:
    """Time again, once each, the first-pass configs whose timing was host-bound; their new
    results replace the old in ``evals``, the store and the ranking. Returns how many."""
    retaken = 0
    for i, e in enumerate(evals):
        if sweep.stopped:
            break
        if e.cached or not e.result.ok or HOST_BOUND_MARK not in (e.result.method or ""):
            continue
        c = Config(e.result.config)
        sweep.timeline.mark("retake sent", c)
        result = runner.submit(sweep.spec, c).result()
        sweep.timeline.mark("retake back", c)
        stored = with_phases(store.put(key, result), result)
        # the search is over: only the ranking the top few come from is updated (a strategy's
        # own model, e.g. Optuna's, takes one tell per config)
        strategy.told[c] = stored.median_ms if stored.ok else None
        evals[i] = replace(e, result=stored)
        retaken += 1
    return retaken


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
