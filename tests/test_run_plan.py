"""The parallel run's plan (tests/run_plan.py): its lists name real modules, and an ``alone`` test
never runs beside another."""

from __future__ import annotations

import threading
from pathlib import Path

import run_plan

TESTS = Path(__file__).parent


def test_every_module_the_plan_names_exists():
    """A renamed module would silently leave its group, its order or its tier."""
    named = run_plan.ALONE_MODULES | set(run_plan.FIRST) | run_plan.SLOW_MODULES
    assert not [m for m in sorted(named) if not (TESTS / m).is_file()]
    assert not run_plan.ALONE_MODULES & set(run_plan.FIRST)  # the alone group goes last


def test_alone_modules_share_one_group_and_others_keep_their_module():
    alone = sorted(run_plan.ALONE_MODULES)
    assert {run_plan.group_of(f"tests/{m}::test_x[a::b]") for m in alone} == {run_plan.ALONE}
    assert run_plan.group_of("tests/test_spec.py::test_parse_values[1-2]") == "test_spec.py"


def _enters(lock: run_plan.RunLock, alone: bool, entered: threading.Event,
            leave: threading.Event) -> threading.Thread:
    def hold():
        with lock.hold(alone):
            entered.set()
            leave.wait(10)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    return thread


def test_an_alone_test_waits_for_the_running_ones_and_holds_off_the_next(tmp_path):
    # one RunLock per xdist worker: separate open files, so their flocks exclude each other
    first, second, third = (run_plan.RunLock(tmp_path) for _ in range(3))
    events = {name: (threading.Event(), threading.Event()) for name in ("a", "b", "alone", "c")}
    threads = [_enters(first, False, *events["a"]), _enters(second, False, *events["b"])]
    assert events["a"][0].wait(5) and events["b"][0].wait(5)  # two shared holders at once
    threads.append(_enters(third, True, *events["alone"]))
    assert not events["alone"][0].wait(0.3)  # waits for both running tests
    events["a"][1].set()
    assert not events["alone"][0].wait(0.3)
    events["b"][1].set()
    assert events["alone"][0].wait(5)
    threads.append(_enters(first, False, *events["c"]))
    assert not events["c"][0].wait(0.3)  # nothing starts beside it
    events["alone"][1].set()
    assert events["c"][0].wait(5)
    events["c"][1].set()
    for thread in threads:
        thread.join(5)
