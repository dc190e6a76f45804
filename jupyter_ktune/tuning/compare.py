"""Compare two configs of one kernel: run each alone (verified, static report), then both in
interleaved rounds in the device worker, and summarize (:mod:`jupyter_ktune.measure.compare`).

What ``panel.compare(a, b)``, the panel's Compare tab and ``ktune compare`` share; no widgets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jupyter_ktune.errors import KtuneError
from jupyter_ktune.measure.compare import Comparison, summarize
from jupyter_ktune.results import RunResult, Status
from jupyter_ktune.runner.interleave import ROUNDS, interleaved_runs
from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec


def compare_configs(spec: KernelSpec, worker: Any, a: Mapping[str, Any], b: Mapping[str, Any],
                    *, results: Mapping[Config, RunResult] | None = None,
                    breakdowns: Mapping[Config, Any] | None = None, rounds: int = ROUNDS,
                    seed: int = 0) -> Comparison:
    """Config ``b`` against config ``a`` of ``spec``: the ratio median(B)/median(A) with its 95 %
    CI from ``rounds`` interleaved rounds of each, and the static and per-line differences.

    Parameters
    ----------
    spec, worker
        The kernel and the device worker that runs it.
    a, b
        The two configs (tunables left out take their first value).
    results
        Results already at hand (a panel's), keyed by config: a config without one is run
        alone first (compiled, verified, timed, static report).
    breakdowns
        Cycle breakdowns at hand, keyed by config, for the per-line stall difference.
    rounds
        Rounds of each config, A B A B ...

    Returns
    -------
    Comparison
        ``ratio`` and ``ci`` are None, with ``reason``, when either config does not run
        correctly: a wrong result is not worth timing.
    """
    ca, cb = spec.space.config(a), spec.space.config(b)
    worker.device(spec.backend)  # the backend picks its mode before any spec is unpickled there
    got: dict[Config, RunResult] = {}
    for c in (ca, cb):
        r = (results or {}).get(c) or got.get(c)
        got[c] = r if r is not None else worker.run(spec, c)
    ra, rb = got[ca], got[cb]
    bad = [f"{n} ({c.label()}) is {r.status.value}" + (f": {r.reason.splitlines()[0]}"
                                                        if r.reason.strip() else "")
           for n, c, r in (("A", ca, ra), ("B", cb, rb))
           if r.status is not Status.OK or r.measurement is None]
    runs, reason = None, ""
    if bad:
        reason = "not timed: " + "; ".join(bad)
    else:
        try:
            runs = worker.call(interleaved_runs, spec, ca, cb, rounds,
                               timeout=spec.options.timeout_s)
        except KtuneError as exc:
            reason = f"the interleaved runs failed: {str(exc).strip().splitlines()[0]}"
    bd = breakdowns or {}
    return summarize(ca, cb, runs, ra.static, rb.static, bd.get(ca), bd.get(cb), reason, seed)
