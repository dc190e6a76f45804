"""The compile pool's hints task is keyed like every other cache of the inputs function: by its
one key (``problem_key.inputs_key``), not by the function object (issue 37)."""

from __future__ import annotations

from concurrent.futures import Future

from jupyter_ktune.api import parse_cell
from jupyter_ktune.tuning import pool_warm

CELL = "# ktune: B in [1, 2]\ndef k(x, y):\n    y[:] = x\n"


class Pool:
    """Counts the tasks sent; each is done at once."""

    def __init__(self) -> None:
        self.sent = 0

    def submit(self, fn, *args):
        self.sent += 1
        done: Future = Future()
        done.set_result(b"")
        return done


def _settled(check, timeout_s: float = 10.0) -> bool:
    """``check()`` once the submits asked for are made (``pool.submit_soon``: on a thread)."""
    import time

    deadline = time.monotonic() + timeout_s
    while not check() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)  # and nothing more arrives
    return check()


def _spec(n: int):
    namespace: dict = {}
    exec(f"def inputs():\n    return dict(n={n})\n", namespace)  # a cell run (again)
    return parse_cell("k --backend fake --inputs inputs", CELL, namespace)


def test_an_unchanged_inputs_run_again_shares_the_task_a_changed_one_does_not() -> None:
    pool = Pool()
    first, again = _spec(4099), _spec(4099)  # n of its own: the hints are kept per process
    assert first.inputs is not again.inputs
    pool_warm.hints_for(pool, first)
    pool_warm.hints_for(pool, again)
    assert _settled(lambda: pool.sent == 1)
    pool_warm.hints_for(pool, _spec(8197))
    assert _settled(lambda: pool.sent == 2)
