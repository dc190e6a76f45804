"""The sweep's late stages (tuning/retime.py): host-bound first-pass timings are taken again."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import numpy as np

from jupyter_ktune import parse_cell
from jupyter_ktune.results import Measurement, Provenance, RunResult, Status, Timing
from jupyter_ktune.space import Config
from jupyter_ktune.tuning.report import Evaluation
from jupyter_ktune.tuning.retime import retake_host_bound
from jupyter_ktune.tuning.store import Store, StoreKey
from jupyter_ktune.tuning.timeline import SweepTimeline

SPEC = parse_cell("k --backend cuda", '''// ktune: B in [1, 2, 3]
extern "C" __global__ void k() {}''')


def result(b: int, ms: float, method: str) -> RunResult:
    timing = Timing(times_ms=np.full(20, ms), method=method)
    return RunResult(name="k", backend="cuda", config={"B": b}, status=Status.OK,
                     measurement=Measurement(timing, Provenance("H200", method, "h")))


class Runner:
    """Answers every run at once with a quiet host's timing, and remembers what it ran."""

    def __init__(self):
        self.ran = []

    def submit(self, spec, config, *args, **kwargs):
        self.ran.append(dict(config))
        f: Future = Future()
        f.set_result(result(config["B"], 2.0, "CUDA events around each launch"))
        return f


def test_a_host_bound_first_pass_timing_is_taken_again_and_replaces_the_old(tmp_path):
    store, key = Store(tmp_path / "s.sqlite"), StoreKey("h", "H200")
    bound = "CUDA events ...; HOST-BOUND: an empty kernel's events read 81.8 us"
    evals = [Evaluation(store.put(key, result(1, 0.0, bound)), 0.1),       # read 0 us: "best"
             Evaluation(store.put(key, result(2, 3.0, "CUDA events")), 0.2),
             Evaluation(store.put(key, result(3, 9.0, bound)), 0.3, cached=True)]  # not fresh
    strategy = SimpleNamespace(told={Config({"B": 1}): 0.0, Config({"B": 2}): 3.0,
                                     Config({"B": 3}): 9.0})
    sweep = SimpleNamespace(stopped=False, timeline=SweepTimeline(), spec=SPEC)
    runner = Runner()
    assert retake_host_bound(sweep, strategy, runner, store, key, evals) == 1
    assert runner.ran == [{"B": 1}]
    assert evals[0].result.median_ms == 2.0 and "HOST-BOUND" not in evals[0].result.method
    assert strategy.told[Config({"B": 1})] == 2.0 and strategy.told[Config({"B": 2})] == 3.0
    assert store.get(key, Config({"B": 1})).median_ms == 2.0  # the store holds the retake
    assert sweep.timeline.waits()["retake"] >= 0
    assert [k for _, k, _ in sweep.timeline.rows()] == ["retake sent", "retake back"]
