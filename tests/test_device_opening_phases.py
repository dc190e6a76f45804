"""The first result names what opening the device cost, part by part: a fresh worker's Triton
device was one "imports and device" phase of 3.1-4.4 s on the GPU host, mostly torch's import;
the worker now times each import and the device context (``DeviceInfo.opening_ms``) and
``cold_phases`` reports those parts once, with the rest of the wait as a phase of its own."""

from __future__ import annotations

import sys
import threading
import time
from types import SimpleNamespace

import pytest

from jupyter_ktune.backends.base import DeviceInfo
from jupyter_ktune.backends.opening import Opening
from jupyter_ktune.runner.client import DeviceWorker
from jupyter_ktune.runner.describe import cold_phases, open_device
from jupyter_ktune.runner.worker import _device

PARTS = {"torch import": 3000.0, "triton import": 400.0, "device context": 300.0}


def test_a_fresh_worker_names_the_imports_its_triton_device_paid_then_none():
    """A fresh worker (a fresh interpreter: torch and triton not yet imported) times both
    imports; its next answer, the device already open, carries no parts (paid once)."""
    with DeviceWorker() as w:
        assert not w.call(lambda: [m for m in ("torch", "triton") if m in sys.modules])
        waits, t0 = len(w.ready_waits_s), time.perf_counter()
        device = open_device(w, "triton")
        t1 = time.perf_counter()
        assert {"torch import", "triton import", "device context"} <= set(device.opening_ms), \
            device.opening_ms
        assert device.opening_ms["torch import"] > 10, device.opening_ms  # not a cached import
        phases = cold_phases(w, waits, t0, t1, "triton")
        assert {"torch import", "triton import"} <= set(phases), phases
        assert "triton imports and device" not in phases, phases
        # the same time as before, split: under 1 ms per dropped phase of difference
        assert abs(sum(phases.values()) - (t1 - t0) * 1e3) < 3.0, (phases, t1 - t0)
        again = w.device("triton")
        assert again.opening_ms == {}, again.opening_ms
        assert again == device  # the timings are not part of the device's identity


def _worker(waits: list[float], device: DeviceInfo | None = None) -> SimpleNamespace:
    return SimpleNamespace(ready_waits_s=waits, device=lambda backend: device)


def test_cold_phases_split_the_opening_into_its_parts_and_the_rest():
    worker = _worker([9.0, 0.25], DeviceInfo(True, "GPU", opening_ms=PARTS))  # a start before
    t0 = time.perf_counter()
    open_device(worker, "triton")
    phases = cold_phases(worker, 1, t0, t0 + 4.0, "triton")
    assert phases == {"worker start": 250.0, **PARTS, "triton device request": 50.0}, phases
    assert sum(phases.values()) == 4000.0
    assert cold_phases(worker, 2, t0, t0 + 4.0, "triton") == {
        "triton imports and device": 4000.0}, "the parts are reported once"
    # parts that add up to more than the wait (the opening began on the cell's start thread,
    # a moment before it): no negative rest (0, left out with the start, which waited for none)
    open_device(worker, "triton")
    assert cold_phases(worker, 2, t0, t0 + 1.0, "triton") == PARTS
    # parts under 1 ms are left out, as every phase
    worker.device = lambda backend: DeviceInfo(True, "GPU", opening_ms={"torch import": 0.2,
                                                                        "device context": 5.0})
    open_device(worker, "triton")
    assert cold_phases(worker, 2, t0, t0 + 0.01, "triton") == {
        "device context": 5.0, "triton device request": pytest.approx(4.8)}


def test_an_opening_on_the_cells_start_thread_is_the_phase_of_the_wait_behind_it():
    """``%%kernel`` opens the device on a thread at the cell's start (``magics.warm_worker``)
    and nobody reads that reply; the parse's own request waits behind it and reports its parts.
    Parts of an opening that ended before a wait began are not that wait's."""
    worker = _worker([], DeviceInfo(True, "GPU", opening_ms=PARTS))
    t0 = time.perf_counter()
    thread = threading.Thread(target=open_device, args=(worker, "triton"))
    thread.start()
    thread.join()
    assert cold_phases(worker, 0, t0, t0 + 3.8, "triton") == {
        **PARTS, "triton device request": pytest.approx(100.0)}
    open_device(worker, "triton")  # opened, and nobody waited for it...
    later = time.perf_counter()  # ...before a later cell's wait began
    assert cold_phases(worker, 0, later, later + 0.5, "triton") == {
        "triton imports and device": pytest.approx(500.0)}


def test_a_device_without_parts_keeps_the_one_phase():
    worker = _worker([0.5], DeviceInfo(True, "GPU"))
    lumped = {"worker start": 500.0, "triton imports and device": 3500.0}
    t0 = time.perf_counter()
    open_device(worker, "triton")
    assert cold_phases(worker, 0, t0, t0 + 4.0, "triton") == lumped
    old = DeviceInfo(True, "GPU")
    del old.__dict__["opening_ms"]  # unpickled from before the field: no attribute
    worker.device = lambda backend: old
    open_device(worker, "triton")
    assert cold_phases(worker, 0, t0, t0 + 4.0, "triton") == lumped


def test_the_worker_sends_the_parts_only_to_the_request_that_opened_the_device():
    opened = DeviceInfo(True, "GPU", opening_ms=PARTS)  # what an earlier request paid
    assert _device("triton", lambda _: opened).opening_ms == {}

    def opening(_: str) -> DeviceInfo:  # this request opens it: 20 ms, 10 ms of it timed
        time.sleep(0.02)
        return DeviceInfo(True, "GPU", opening_ms={"device context": 10.0})

    assert _device("triton", opening).opening_ms == {"device context": 10.0}


def test_an_import_is_a_part_only_where_it_was_not_imported_before(tmp_path, monkeypatch):
    (tmp_path / "ktune_slow_probe.py").write_text("import time\ntime.sleep(0.05)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "ktune_slow_probe", raising=False)
    opened = Opening()
    json_mod, probe = opened.imports("json", "ktune_slow_probe")  # json: this process has it
    assert json_mod is sys.modules["json"] and probe is sys.modules["ktune_slow_probe"]
    parts = opened.done()
    assert set(parts) == {"ktune_slow_probe import", "device context"}, parts
    assert parts["ktune_slow_probe import"] >= 50.0, parts
    # the rest is the time since the imports, not with them
    assert parts["device context"] < parts["ktune_slow_probe import"], parts
    again = Opening()  # a second opening in this process: the module is imported already
    again.imports("ktune_slow_probe")
    assert set(again.done()) == {"device context"}


def test_a_second_device_question_keeps_the_first_openings_parts():
    """A ``%%kernel`` cell asks for the device twice (its start's thread, then its parse or
    panel): the second answer must not replace the parts the first paid. A Pallas device made
    its description again on every question, with a fresh "device context" part and no "jax
    import" (the quickstart's Pallas cell showed no import at all)."""
    with DeviceWorker() as w:
        t0 = time.perf_counter()
        open_device(w, "pallas")
        open_device(w, "pallas")
        phases = cold_phases(w, 0, t0, time.perf_counter(), "pallas")
    assert "jax import" in phases, phases
