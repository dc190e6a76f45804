"""The worker never hands back another request's answer (issue 15, item 1).

Every request carries an id that its reply carries; a reply to an earlier request is dropped, and
an exception between send and receive (Jupyter's Interrupt is a KeyboardInterrupt) restarts the
worker, so the next request reads its own answer. Timeouts are range-checked.
"""

from __future__ import annotations

import math
import signal
import threading
import time

import pytest
from test_worker import inputs, reference  # x -> y = 2x, 1000 elements

from jupyter_ktune.api import parse_cell
from jupyter_ktune.errors import CellError, KtuneError
from jupyter_ktune.results import Status
from jupyter_ktune.runner.client import DeviceWorker
from jupyter_ktune.runner.wire import pack_message
from jupyter_ktune.tuning import tune

# A=1 is slow (the request we interrupt); A=2 is right; A=3 is wrong: each answer is its own.
SRC = """# ktune: A in [1, 2, 3]
import time
def scale(x, y, n):
    if A == 1:
        time.sleep(3)
    y[:] = A * x
"""
NS = {"inputs": inputs, "reference": reference}
LINE = "scale --backend fake --inputs inputs --reference reference --out y --budget-ms 2"


def _interrupt_main_thread_after(seconds: float) -> threading.Timer:
    main = threading.main_thread().ident
    timer = threading.Timer(seconds, signal.pthread_kill, (main, signal.SIGINT))
    timer.start()
    return timer


def test_an_interrupted_request_does_not_hand_its_reply_to_the_next(tmp_path):
    spec = parse_cell(LINE, SRC, NS)
    with DeviceWorker() as w:
        assert w.run(spec, spec.space.config(A=2)).status is Status.OK  # worker warm
        _interrupt_main_thread_after(0.5)
        with pytest.raises(KeyboardInterrupt):
            w.run(spec, spec.space.config(A=1), timeout=30)
        two = w.run(spec, spec.space.config(A=2))
        three = w.run(spec, spec.space.config(A=3))
        assert (two.config, two.status) == ({"A": 2}, Status.OK), two.reason
        assert (three.config, three.status) == ({"A": 3}, Status.WRONG), three.reason
        assert w.restarts == 1
        fast = parse_cell(LINE, SRC.replace("# ktune: A in [1, 2, 3]", "# ktune: A in [2, 3]"), NS)
        report = tune(fast, "exhaustive", store=tmp_path, workers=[w], top_k=0)
        assert {e.result.config["A"]: e.result.status for e in report.evaluations} == {
            2: Status.OK, 3: Status.WRONG}


def _answer(value):
    return value


def test_a_late_reply_to_an_earlier_request_is_dropped():
    with DeviceWorker() as w:
        assert w.call(_answer, "warm") == "warm"
        # a request whose reply nobody waits for, as an interrupted one leaves behind
        w._conn.send_bytes(pack_message(10_000, ("call", _answer, ("stale",), {})))  # noqa: SLF001
        time.sleep(0.3)
        assert w.call(_answer, "mine") == "mine"
        assert w.call(_answer, "next") == "next"
        assert w.stale_replies == 1 and w.restarts == 0


@pytest.mark.parametrize("text", ["nan", "inf", "-1", "0", "1e9"])
def test_a_timeout_out_of_range_on_the_magic_line_is_one_line_naming_the_fix(text):
    with pytest.raises(CellError) as err:
        parse_cell(f"{LINE} --timeout {text}", SRC, NS)
    message = str(err.value)
    assert "--timeout" in message and "Write --timeout 60" in message
    assert "\n" not in message


@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0, 0, 1e12])
def test_a_timeout_out_of_range_in_the_api_is_refused_before_sending(worker, value):
    with pytest.raises(KtuneError, match="timeout"):
        worker.call(_answer, 1, timeout=value)
    spec = parse_cell(LINE, SRC, NS)
    with pytest.raises(CellError, match="--timeout"):
        worker.run(spec, spec.space.config(A=2), timeout=value)
    assert worker.call(_answer, 7) == 7
