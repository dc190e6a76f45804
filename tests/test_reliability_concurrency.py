"""A burst of control changes (issue 9): 50 in one second end showing the last one.

The panel calls ``TuningSession.request`` on every slider step. Here a "display" subscriber keeps
what the panel would show (current deliveries only). After 50 requests in one second it shows the
last requested config, no stale result was ever shown as current, and the session served far fewer
than 50 requests (newest wins; nothing queues up).
"""

from __future__ import annotations

import threading
import time

import numpy as np

from jupyter_ktune.api import parse_cell
from jupyter_ktune.session import TuningSession


def inputs():
    x = np.random.rand(64)
    return dict(x=x, y=np.empty_like(x), n=64)


def reference(x, y, n):
    return 2 * x


SRC = """# ktune: BLOCK in range(0, 50)
import time
def scale(x, y, n):
    time.sleep(0.002 + 0.0002 * BLOCK)
    y[:] = 2 * x
"""
LINE = "scale --backend fake --inputs inputs --reference reference --out y --budget-ms 20"


def test_50_changes_in_one_second_end_on_the_last_and_never_show_a_stale_one(worker):
    spec = parse_cell(LINE, SRC, {"inputs": inputs, "reference": reference})
    session = TuningSession(spec, worker, {}, prefetch=False)
    shown, lock, tickets = [], threading.Lock(), {}

    def display(d):  # what the panel does with a delivery
        if d.current:
            with lock:
                shown.append(d)

    session.subscribe(display)
    try:
        rng = np.random.default_rng(0)
        order = [int(b) for b in rng.permutation(50)]
        calls = []  # how long each request() kept the caller (the panel's UI thread)
        t0 = time.perf_counter()
        for i, b in enumerate(order):
            c0 = time.perf_counter()
            tickets[session.request({"BLOCK": b})] = b
            calls.append(time.perf_counter() - c0)
            time.sleep(max(0.0, t0 + (i + 1) / 50 - time.perf_counter()))
        burst_s = time.perf_counter() - t0
        assert session.wait_idle(60)
    finally:
        session.close()
    last_ticket = max(tickets)
    served = session.history
    # request() only hands the config over: one run takes >= 20 ms (--budget-ms), so a request
    # that waited for a run, or for a lock the running one holds, would show here
    calls.sort()
    assert calls[len(calls) // 2] < 0.002 and calls[-3] < 0.015, calls
    # ends showing the last one
    assert shown and shown[-1].ticket == last_ticket
    assert shown[-1].result.config == {"BLOCK": order[-1]}
    assert session.current == shown[-1].result.config
    # no stale overwrite: what is shown only moves forward, and each shown result is its ticket's
    assert [d.ticket for d in shown] == sorted({d.ticket for d in shown})
    assert all(d.result.config == {"BLOCK": tickets[d.ticket]} for d in served)
    # bounded: newest wins, the rest are dropped, not queued
    assert len(served) < 25, len(served)
    print(f"\n50 requests in {burst_s:.2f} s (slowest call {calls[-1] * 1e3:.1f} ms): "
          f"{len(served)} served, {len(shown)} shown as current, "
          f"last latency {shown[-1].latency_s * 1e3:.0f} ms")
