"""The "time" phase of a result names its parts outside the timing protocol's stages: the
timer's readiness, and where a first timing was host-bound and taken again, that timing and the
wait for the worker's start-up (``runner.timed``, through ``execute.run_variant``; a first
result's "time: other" read 0.17-0.27 s on an H100 with none of them named, first_minute_ab
2058)."""

from __future__ import annotations

import dataclasses
import time

import ktune_fake_backend as fake
import numpy as np
import pytest

from jupyter_ktune.api import parse_cell
from jupyter_ktune.runner import execute, input_sets, timed


@pytest.fixture(autouse=True)
def backend(monkeypatch: pytest.MonkeyPatch):
    own = fake.FakeBackend()
    monkeypatch.setattr(execute, "get_backend", lambda name: own)
    input_sets.forget_sets()
    yield own
    input_sets.forget_sets()


def run_once():  # noqa: ANN201 - a RunResult
    ns = {"inputs": lambda: dict(x=np.random.rand(64), y=np.empty(64)),
          "reference": lambda x, y: 2 * x}
    source = f"# {time.monotonic_ns()}\ndef scale(x, y):\n    y[:] = 2 * x\n"  # a fresh variant
    spec = parse_cell("scale --backend fake --inputs inputs --reference reference --out y "
                      "--budget-ms 5", source, ns)
    result = execute.run_variant(spec, spec.space.config({}))
    assert result.status.value == "ok", result.reason
    return result


def time_parts(result) -> dict[str, float]:  # noqa: ANN001
    return {k: v for k, v in result.phases_ms.items() if k.startswith("time: ")}


def test_a_first_result_names_the_wait_for_its_timer() -> None:
    parts = time_parts(run_once())
    assert "time: timer ready" in parts and "time: runs" in parts
    assert "time: host-bound timing" not in parts


def test_a_timing_taken_again_names_the_first_one_and_the_wait(monkeypatch) -> None:
    time_kernel = timed.time_kernel
    calls: list[int] = []

    def host_bound_first(launch, timer, plan=None):  # noqa: ANN001, ANN202
        timing = time_kernel(launch, timer, plan)
        calls.append(1)
        if len(calls) == 1:
            time.sleep(0.06)
            return dataclasses.replace(timing, host_bound=True)
        return timing

    monkeypatch.setattr(timed, "time_kernel", host_bound_first)
    monkeypatch.setattr(timed, "quiet_host", lambda *_: time.sleep(0.09) or True)
    result = run_once()
    parts = time_parts(result)
    assert len(calls) == 2 and "timed again" in result.measurement.provenance.method
    assert parts["time: host-bound timing"] >= 60
    assert parts["time: start-up wait"] >= 90
    assert parts["time: other"] < 40, parts  # the two are no longer "other"


def test_a_host_bound_timing_not_taken_again_is_counted_once(monkeypatch) -> None:
    """No background work to wait for: the host-bound timing is the result's, its stages
    already count it."""
    time_kernel = timed.time_kernel
    monkeypatch.setattr(timed, "time_kernel", lambda *a: dataclasses.replace(
        time_kernel(*a), host_bound=True))
    monkeypatch.setattr(timed, "quiet_host", lambda *_: False)
    parts = time_parts(run_once())
    assert "time: host-bound timing" not in parts and "time: start-up wait" not in parts
