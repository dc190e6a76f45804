"""A fresh cell's first build starts as soon as its types are known (issue 33).

On an H100 host fla's first compile started 0.28 s after torch's import ended, behind the
notebook's compile-pool sends and the first set's all-zero check
(bench/results/first_minute_ab/2026-12-07-1459, call 3). The worker now starts the build on
the kept set before checking it, and the notebook claims the set before it sends the pool's
tasks. Each order has a switch to compare the old one on a device; both are checked here.
"""

from __future__ import annotations

import numpy as np
import pytest

from jupyter_ktune.api import parse_cell
from jupyter_ktune.errors import CellError
from jupyter_ktune.runner import input_sets
from jupyter_ktune.runner.inputs_ahead import DrawnSet

LINE = "scale --backend fake --inputs inputs --reference reference --out y --budget-ms 5"
SRC = "# ktune: BLOCK in [1, 2, 4]\ndef scale(x, y, n):\n    y[:] = 2 * x\n"


def inputs():
    x = np.random.rand(64).astype(np.float32)
    return dict(x=x, y=np.empty_like(x), n=64)


def reference(x, y, n):
    return 2 * x


class _Ahead:
    """The helper's side of one set drawn for the cell's start, already back."""

    def __init__(self, args):
        self.args, self.taken = args, False

    def rename(self, old, new, max_age_s):
        return True

    def ready(self, io):
        return not self.taken

    def take_set(self, io):
        self.taken = True
        return DrawnSet(self.args)


def _noted(monkeypatch, owner, name, seen, label):
    """``owner.name`` replaced by itself, noting ``label`` in ``seen`` at each call."""
    real = getattr(owner, name)

    def noted(*args, **kwargs):
        seen.append(label)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, noted)


@pytest.fixture
def order(monkeypatch):
    """What happened, in order: the zero check of the set and the build (``then``)."""
    seen: list[str] = []
    _noted(monkeypatch, input_sets, "zero_inputs", seen, "checked")
    monkeypatch.setattr(input_sets, "draw_next", lambda *a: None)
    monkeypatch.setattr(input_sets, "_last_inputs", {})
    return seen


def _spec():
    return parse_cell(LINE, SRC, {"inputs": inputs, "reference": reference})


def test_the_build_starts_before_the_set_is_checked(monkeypatch, order):
    monkeypatch.setattr(input_sets, "_ahead", _Ahead(inputs()))
    assert input_sets.first_set_is("key", _spec(), lambda: order.append("built"))
    assert order == ["built", "checked"]


def test_the_switch_checks_first(monkeypatch, order):
    monkeypatch.setenv(input_sets.BUILD_BEFORE_CHECKS_ENV, "0")
    monkeypatch.setattr(input_sets, "_ahead", _Ahead(inputs()))
    assert input_sets.first_set_is("key", _spec(), lambda: order.append("built"))
    assert order == ["checked", "built"]


def test_a_set_still_drawn_has_its_build_started_at_once(monkeypatch, order):
    ahead = _Ahead(inputs())
    ahead.taken = True  # not back yet: the run takes it later
    monkeypatch.setattr(input_sets, "_ahead", ahead)
    assert input_sets.first_set_is("key", _spec(), lambda: order.append("built"))
    assert order == ["built"]


def test_a_set_the_checks_refuse_still_fails_its_run_in_one_line(monkeypatch, order):
    """The build started on it is wasted work, never a verdict: the check still refuses."""
    zeros = inputs()
    zeros["x"][:] = 0
    monkeypatch.setattr(input_sets, "_ahead", _Ahead(zeros))
    with pytest.raises(CellError, match="all zeros"):
        input_sets.first_set_is("key", _spec(), lambda: order.append("built"))
    assert order == ["built", "checked"]


@pytest.mark.parametrize("claim_first", [True, False])
def test_the_panel_claims_the_set_before_it_sends_the_pools_tasks(tmp_path, monkeypatch,
                                                                    claim_first):
    from jupyter_ktune.runner import client
    from jupyter_ktune.runner.client import DeviceWorker
    from jupyter_ktune.tuning import pool_warm
    from jupyter_ktune.ui import start

    if not claim_first:
        monkeypatch.setenv(start.CLAIM_FIRST_ENV, "0")
    seen: list[str] = []
    _noted(monkeypatch, pool_warm, "warm_pool", seen, "pool")
    with DeviceWorker() as w:
        monkeypatch.setattr(client, "_default", w)
        real = w.request

        def recording(message, timeout):
            seen.append(message[0])
            return real(message, timeout)

        monkeypatch.setattr(w, "request", recording)
        panel = start.panel_for(_spec(), replaces="first-build-order-test")
        try:
            claim, pool = seen.index("before_first_run"), seen.index("pool")
            assert (claim < pool) is claim_first, seen
            assert seen.index("run") > claim, seen
        finally:
            panel.session.close()


def test_a_build_that_fails_to_start_leaves_the_set_checked_and_kept(monkeypatch, order):
    monkeypatch.setattr(input_sets, "_ahead", _Ahead(inputs()))

    def build():
        order.append("built")
        raise RuntimeError("no build today")

    spec = _spec()
    assert input_sets.first_set_is("key", spec, build)
    assert order == ["built", "checked"]
    assert input_sets.last_set(input_sets.io_key(spec)) is not None, "the run would draw again"
