"""A slider move checks the ``require`` lines once (issue 37, item 2).

The panel's controls check a move (``Space.violations``, under the limits the worker gave), so
a refused position is explained at once; the request carries that outcome to the worker, which
takes it instead of checking again. Before, one allowed move evaluated every line three times
(the controls, the worker, the banner's refresh when the result came) and the banner's numbers
were a second evaluation of its own (``refusal_reasons`` called ``Constraint.holds``).

Both processes are counted: ``Space.violations`` and ``Constraint.holds`` are wrapped here and,
through ``DeviceWorker.call``, in the worker (the probe's functions are made inside a function,
so cloudpickle sends them by value: the worker never imports this module).
"""

from __future__ import annotations

import html
import re

import numpy as np
import pytest

from jupyter_ktune.api import parse_cell
from jupyter_ktune.results import Status
from jupyter_ktune.session import TuningSession
from jupyter_ktune.space import Constraint, Space
from jupyter_ktune.ui.app import KernelPanel

SRC = """# ktune: BLOCK in [1, 2, 4, 8]; SWIZZLE in [none, 32B]
# ktune: require BLOCK * 300 <= SMEM_PER_BLOCK
# ktune: require BLOCK >= 1
def scale(x, y, n):
    y[:] = 2 * x
"""
NS = {"inputs": lambda: dict(x=np.random.rand(64), y=np.empty(64), n=64),
      "reference": lambda x, y, n: 2 * x}
LINE = "scale --backend fake --inputs inputs --reference reference --out y --budget-ms 2"
LIMITS = {"SMEM_PER_BLOCK": 1000}  # the fake device's, as worker.limits(spec) says
LINES = 2  # require lines: one check evaluates each once
REFUSED = "breaks 'require BLOCK * 300 <= SMEM_PER_BLOCK'"


def _probe():
    """``install`` wraps ``Space.violations`` and ``Constraint.holds`` with a counter
    (``Space.checks``) in the process that runs it; ``read`` returns and clears the counts."""

    def install() -> None:
        from collections import Counter

        from jupyter_ktune.space import Constraint, Space

        def counting(f, name):
            def counted(self, *args, **kwargs):
                Space.checks[name] += 1
                return f(self, *args, **kwargs)

            counted.counted = True
            return counted

        if getattr(Space.violations, "counted", False):
            return
        Space.checks = Counter()
        for cls, name in ((Space, "violations"), (Constraint, "holds")):
            setattr(cls, name, counting(getattr(cls, name), name))

    def read() -> dict[str, int]:
        from jupyter_ktune.space import Space

        out = dict(Space.checks)
        Space.checks.clear()
        return out

    return install, read


@pytest.fixture
def checks(worker, monkeypatch):
    """The checks made since the last call: here, in the worker (this process's wrappers are
    undone after the test; the module's worker keeps its own)."""
    install, read = _probe()
    for cls, name in ((Space, "violations"), (Constraint, "holds")):
        monkeypatch.setattr(cls, name, getattr(cls, name))  # undone at teardown
    monkeypatch.setattr(Space, "checks", None, raising=False)
    install()
    worker.call(install)

    def counts() -> tuple[dict[str, int], dict[str, int]]:
        return read(), worker.call(read)

    return counts


ONCE = {"violations": 1, "holds": LINES}  # one check, every line evaluated once


def total(here: dict[str, int], there: dict[str, int]) -> dict[str, int]:
    """Both processes' checks together."""
    return {k: here.get(k, 0) + there.get(k, 0) for k in ("violations", "holds")}


@pytest.fixture
def panel(worker, checks):
    spec = parse_cell(LINE, SRC, NS)
    session = TuningSession(spec, worker, LIMITS, prefetch=False)
    p = KernelPanel(session, spec.space.default(LIMITS), ceilings=None)
    assert p.result.status is Status.OK, p.result.reason
    checks()  # the panel's making is not a move
    yield p
    session.close()


def test_an_allowed_move_is_checked_once(panel, checks):
    panel.controls.widgets["BLOCK"].value = 2
    assert panel.result.config == {"BLOCK": 2, "SWIZZLE": "none"}
    assert panel.result.status is Status.OK, panel.result.reason
    assert panel.session.wait_idle()
    here, there = checks()
    assert total(here, there) == ONCE
    assert not there  # the worker took the panel's outcome


def test_a_refused_move_is_checked_once_and_explained_as_before(panel, checks):
    before = len(panel.session.history)
    panel.controls.widgets["BLOCK"].value = 4  # 4 * 300 > 1000
    assert panel.session.wait_idle()
    assert total(*checks()) == ONCE
    assert len(panel.session.history) == before  # nothing asked of the worker
    status = html.unescape(re.sub("<[^>]+>", "", panel.controls.status.value))
    assert status == ("not run — not allowed on this device: require BLOCK * 300 <= "
                      "SMEM_PER_BLOCK: 1,200 > 1,000. The badge and plots show BLOCK=1 "
                      "SWIZZLE=none, the last config run.")
    panel.controls.widgets["SWIZZLE"].value = "32B"  # still refused: one check more
    assert total(*checks()) == ONCE


def test_a_refused_start_comes_back_not_allowed_unchecked_by_the_worker(worker, checks):
    """The panel asks for its start even when refused: the worker answers "not allowed" with
    the outcome the controls found, in the words it used when it checked itself. (Making a
    panel counts the valid configs too, so only the worker's side is counted here.)"""
    spec = parse_cell(LINE, SRC, NS)
    session = TuningSession(spec, worker, LIMITS, prefetch=False)
    try:
        p = KernelPanel(session, spec.space.config({"BLOCK": 8}), ceilings=None)
        r = p.result
        assert r.status is Status.NOT_ALLOWED and r.reason == REFUSED
        assert r.measurement is None and r.verification is None  # never run
        assert session.wait_idle()
        assert checks()[1] == {}  # the worker took the controls' outcome
    finally:
        session.close()


def test_a_request_nobody_checked_is_checked_by_the_worker_once(worker, checks):
    spec = parse_cell(LINE, SRC, NS)
    session = TuningSession(spec, worker, LIMITS, prefetch=False)
    try:
        session.request({"BLOCK": 8})
        assert session.wait_idle()
        r = session.history[-1].result
        assert r.status is Status.NOT_ALLOWED and r.reason == REFUSED
        here, there = checks()
        assert total(here, there) == ONCE
        assert not here  # checked in the worker, where the inputs' values are
    finally:
        session.close()


def test_a_sweep_checks_each_candidate_in_its_strategy_only(worker, checks, tmp_path):
    """The strategy lists the allowed configs under the limits the worker gave, so the worker
    takes that outcome for each run the sweep sends rather than checking again."""
    from jupyter_ktune.tuning import tune

    spec = parse_cell(LINE, SRC, NS)
    report = tune(spec, "exhaustive", store=tmp_path / "s.sqlite", workers=[worker])
    assert {dict(e.result.config)["BLOCK"] for e in report.evaluations} == {1, 2}
    assert all(e.result.ok for e in report.evaluations)
    here, there = checks()
    assert here and not there  # the strategy's checks only
