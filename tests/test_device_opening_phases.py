"""The first result names what opening the device cost, part by part: a fresh worker's Triton
device was one "imports and device" phase of 3.1-4.4 s on the GPU host, mostly torch's import;
the worker now times each import and the device context (``DeviceInfo.opening_ms``) and
``cold_phases`` reports those parts, with the rest of the request as a phase of its own."""

from __future__ import annotations

import sys
import time
from types import SimpleNamespace

import pytest

from jupyter_ktune.backends.base import DeviceInfo
from jupyter_ktune.backends.opening import Opening
from jupyter_ktune.runner.client import DeviceWorker
from jupyter_ktune.runner.describe import cold_phases
from jupyter_ktune.runner.worker import _device

PARTS = {"torch import": 3000.0, "triton import": 400.0, "device context": 300.0}


def test_a_fresh_worker_names_the_imports_its_triton_device_paid_then_none():
    """A fresh worker (a fresh interpreter: torch and triton not yet imported) times both
    imports; its next answer, the device already open, carries no parts (paid once)."""
    with DeviceWorker() as w:
        assert not w.call(lambda: [m for m in ("torch", "triton") if m in sys.modules])
        waits, t0 = len(w.ready_waits_s), time.perf_counter()
        device = w.device("triton")
        spent = time.perf_counter() - t0
        assert {"torch import", "triton import", "device context"} <= set(device.opening_ms), \
            device.opening_ms
        assert device.opening_ms["torch import"] > 10, device.opening_ms  # not a cached import
        phases = cold_phases(w, waits, spent, "triton", device)
        assert {"torch import", "triton import"} <= set(phases), phases
        assert "triton imports and device" not in phases, phases
        # the same time as before, split: under 1 ms per dropped phase of difference
        assert abs(sum(phases.values()) - spent * 1e3) < 3.0, (phases, spent)
        again = w.device("triton")
        assert again.opening_ms == {}, again.opening_ms
        assert again == device  # the timings are not part of the device's identity


def test_cold_phases_split_the_opening_into_its_parts_and_the_rest():
    worker = SimpleNamespace(ready_waits_s=[9.0, 0.25])  # a start before, and this request's
    device = DeviceInfo(True, "GPU", opening_ms=PARTS)
    phases = cold_phases(worker, 1, 4.0, "triton", device)
    assert phases == {"worker start": 250.0, **PARTS, "triton device request": 50.0}, phases
    assert sum(phases.values()) == 4000.0
    # parts that add up to more than the request took (never so: they are times inside it):
    # no negative rest (0, so left out with the worker's start, which waited for nothing)
    assert cold_phases(worker, 2, 1.0, "triton", device) == PARTS
    # parts under 1 ms are left out, as every phase
    tiny = DeviceInfo(True, "GPU", opening_ms={"torch import": 0.2, "device context": 5.0})
    assert cold_phases(worker, 2, 0.01, "triton", tiny) == {
        "device context": 5.0, "triton device request": pytest.approx(4.8)}


def test_a_device_without_parts_keeps_the_one_phase():
    worker = SimpleNamespace(ready_waits_s=[0.5])
    lumped = {"worker start": 500.0, "triton imports and device": 3500.0}
    assert cold_phases(worker, 0, 4.0, "triton", DeviceInfo(True, "GPU")) == lumped
    old = DeviceInfo(True, "GPU")
    del old.__dict__["opening_ms"]  # unpickled from before the field: no attribute
    assert cold_phases(worker, 0, 4.0, "triton", old) == lumped


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
