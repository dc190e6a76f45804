"""Worker side of a comparison: two variants timed in alternating rounds, A B A B ...

Both variants are bound to one fresh input set (the inputs function called anew, checked as
for any run), then timed round by round with the project's protocol
(:func:`~jupyter_ktune.measure.timing.time_kernel`, or the runtime's own timer where it has one,
as :func:`~jupyter_ktune.runner.execute.run_variant` does): round i of A, round i of B, round
i+1 of A ... A round is a whole small measurement (flushes, warm-up, the interleaved empty-kernel
floor), so whatever drifts between rounds (the SM clock, a neighbour on the machine) reaches A
and B alike, and the ratio's interval (:mod:`jupyter_ktune.measure.compare`) is drawn over
paired rounds.

Called through the worker's ``call`` request: ``worker.call(interleaved_runs, spec, a, b)``.
Each round announces a phase, so the cell's ``--timeout`` bounds one round, not the whole.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from jupyter_ktune.backends import get_backend
from jupyter_ktune.backends.uploads import Uploads, for_input_set
from jupyter_ktune.measure.clocks import read_clocks
from jupyter_ktune.measure.compare import InterleavedRuns
from jupyter_ktune.measure.device_timer import HostClock
from jupyter_ktune.measure.timing import HOST_BOUND_MARK, TimingPlan, time_kernel
from jupyter_ktune.runner import phases
from jupyter_ktune.runner.execute import loaded_variant
from jupyter_ktune.runner.input_sets import checked_inputs
from jupyter_ktune.runner.timed import timing_plan
from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec

#: rounds of each config, unless asked otherwise
ROUNDS = 10
#: timed runs per round, at least (the protocol's adaptive stop may take more, to max_runs)
ROUND_MIN_RUNS = 5


def is_host_time(timer: Any) -> bool:
    """Whether ``timer`` reads the host clock (an interpreter, a CPU backend), not a GPU's."""
    name = str(getattr(timer, "name", ""))
    return isinstance(timer, HostClock) or "host" in name.lower()


def round_plan(spec: KernelSpec, rounds: int, clocks: Any) -> TimingPlan:
    """One round's plan: the cell's protocol with a quarter of its budget (so a comparison
    costs about ``rounds / 2`` times a slider step), no graph replay."""
    base = timing_plan(spec, None, clocks)
    most = max(ROUND_MIN_RUNS, spec.options.max_runs // max(rounds, 1))
    return dataclasses.replace(base, budget_ms=max(base.budget_ms / 4, 1e-3),
                               min_runs=ROUND_MIN_RUNS, max_runs=most, graph_below_ms=0.0)


def interleaved_runs(spec: KernelSpec, a: Config, b: Config,
                     rounds: int = ROUNDS) -> InterleavedRuns:
    """Time ``a`` and ``b`` in ``rounds`` alternating rounds on one fresh input set (worker side).

    Raises what compiling or binding raises (the caller has already run both configs alone,
    so a failure here is unexpected and reported as such).
    """
    if rounds < 2:
        raise ValueError("[ktune] a comparison needs at least 2 rounds (the CI is over rounds)")
    backend = get_backend(spec.backend)
    backend.device()
    variants = [loaded_variant(spec, Config(c)) for c in (a, b)]
    phases.enter(phases.inputs(spec.inputs))
    args = checked_inputs(spec, Config(a))  # one fresh set for both: the same data
    phases.enter(phases.bind(args))
    with for_input_set(Uploads()):
        bound = [v.bind(args) for v in variants]
    timer = backend.timer()
    own = getattr(timer, "time", None)  # a runtime that times the bound variant itself (JAX)
    times: list[list[np.ndarray]] = [[], []]
    protocol = ""
    notes: list[str] = []
    for i in range(rounds):
        plan = round_plan(spec, rounds, read_clocks())
        for side, which in enumerate("AB"):
            phases.enter(phases.run(f"round {i + 1} of {rounds} of {which}, interleaved"))
            t = own(bound[side], plan) if own else time_kernel(bound[side].launch, timer, plan)
            times[side].append(np.asarray(t.times_ms, dtype=np.float64))
            protocol = protocol or t.method
            if HOST_BOUND_MARK in t.method and not any(HOST_BOUND_MARK in n for n in notes):
                notes.append(f"{HOST_BOUND_MARK}: a round of {which} waited on the host "
                             "(its times may hold host time)")
    return InterleavedRuns(tuple(times[0]), tuple(times[1]), timer=str(getattr(timer, "name", "")),
                           host_time=is_host_time(timer), protocol=protocol, notes=tuple(notes))
