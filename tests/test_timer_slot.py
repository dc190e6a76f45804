"""The worker's timer is built ahead, beside the device's opening (TimerSlot): a config asks
for it and gets the one built, waiting while the build runs; a failed early build is retried
where the config can report its error."""

from __future__ import annotations

import threading
import time

import pytest

from jupyter_ktune.backends.timer_slot import TimerSlot


def test_the_timer_built_ahead_is_the_one_a_config_gets_and_get_waits_for_it():
    slot, builds, started = TimerSlot(), [], threading.Event()

    def build():
        started.set()
        time.sleep(0.3)  # the timer kernels' compiles
        builds.append(object())
        return builds[-1]

    thread = slot.start_ahead(build)
    assert started.wait(5)
    t0 = time.perf_counter()
    got = slot.get(build)  # arrives while the early build runs: waits, does not build again
    assert time.perf_counter() - t0 > 0.1
    thread.join(5)
    assert len(builds) == 1 and got is builds[0] and slot.get(build) is got


def test_a_failed_early_build_is_retried_and_its_error_raised_by_get():
    slot, calls = TimerSlot(), []

    def broken():
        calls.append(1)
        raise RuntimeError("no CUDA device")

    slot.start_ahead(broken).join(5)
    with pytest.raises(RuntimeError, match="no CUDA device"):
        slot.get(broken)
    assert len(calls) == 2
    assert slot.get(lambda: "built") == "built"
