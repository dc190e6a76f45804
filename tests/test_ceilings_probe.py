"""The roofline's ceilings are measured the way the device's backend says (``DeviceInfo.
measure_ceilings``), and ``measure/ceilings.py`` only caches them: no CUDA library in measure/."""

from __future__ import annotations

from jupyter_ktune.backends.base import DeviceInfo
from jupyter_ktune.measure import ceilings


class Worker:
    """Runs ``call`` here and notes what it was asked to run."""

    def __init__(self) -> None:
        self.called: list = []

    def call(self, fn, timeout=60.0):
        self.called.append(fn)
        return fn()


def probe() -> dict:
    return {"bandwidth_gbps": 1.0, "tflops": 2.0, "source": "test probe"}


def test_the_devices_own_probe_is_run_in_the_worker_and_cached(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(ceilings, "CACHE", tmp_path / "ceilings.json")
    gpu = DeviceInfo(True, "test GPU", compute_capability="9.0", driver="1",
                     measure_ceilings=probe)
    worker = Worker()
    assert ceilings.device_ceilings(worker, gpu)["source"] == "test probe"
    assert worker.called == [probe]
    assert ceilings.cached_ceilings(gpu)["tflops"] == 2.0
    assert ceilings.device_ceilings(worker, gpu)["tflops"] == 2.0 and len(worker.called) == 1


def test_a_device_without_a_probe_has_no_ceilings(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(ceilings, "CACHE", tmp_path / "ceilings.json")
    worker = Worker()
    bare = DeviceInfo(True, "test GPU", compute_capability="9.0", driver="1")
    assert ceilings.device_ceilings(worker, bare) is None and worker.called == []
    cpu = DeviceInfo(True, "CPU", measure_ceilings=probe)  # no compute capability: no key
    assert ceilings.device_ceilings(worker, cpu) is None and worker.called == []
