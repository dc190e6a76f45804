"""The CUDA worker builds its timer (the NVRTC compile of the flush, empty and hold kernels,
CuPy's fill kernel) on a thread as the device opens, so the first config's timing does not pay
for it; a compile-only pool process never builds one (``backends/timer_slot.py``)."""

from __future__ import annotations

import threading
import time

import pytest
from test_torch_warm import _fake_cupy

from jupyter_ktune.backends import context_ahead
from jupyter_ktune.backends.cuda.backend import CudaBackend
from jupyter_ktune.backends.opening import Opening
from jupyter_ktune.measure import clocks


@pytest.fixture()
def builds(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int | None]]:
    """A GPU seen through a fake CuPy; each timer build records its thread and device."""
    seen: list[tuple[str, int | None]] = []

    def make_timer(limits, device_id=None):  # noqa: ANN001, ANN202 - the backend's builder
        seen.append((threading.current_thread().name, device_id))
        time.sleep(0.2)  # the kernels' compiles
        return object()

    monkeypatch.setattr(Opening, "imports", lambda self, *names: [_fake_cupy()])
    monkeypatch.setattr(context_ahead, "start_in_worker", lambda: None)
    monkeypatch.setattr(clocks, "driver_version", lambda: "580")
    monkeypatch.setattr(CudaBackend, "_make_timer", staticmethod(make_timer))
    monkeypatch.delenv("KTUNE_COMPILE_ONLY", raising=False)
    return seen


def test_the_device_opening_starts_the_timer_and_a_timing_gets_that_one(builds) -> None:
    backend = CudaBackend()
    assert backend.device().available
    t0 = time.perf_counter()
    timer = backend.timer()  # asked while the build runs: waits for it, builds no second one
    assert time.perf_counter() - t0 > 0.05
    assert builds == [("ktune-timer-ahead", 0)]
    assert backend.timer() is timer and len(builds) == 1


def test_a_compile_only_process_builds_no_timer_ahead(builds, monkeypatch) -> None:
    monkeypatch.setenv("KTUNE_COMPILE_ONLY", "1")
    assert CudaBackend().device().available
    time.sleep(0.1)
    assert builds == []
