"""The GPU's primary context is made on a thread beside a fresh worker's backend imports
(:mod:`jupyter_ktune.backends.context_ahead`): the driver calls, in order, through a stand-in
for libcuda (this machine has none), and the places where it must not happen."""

from __future__ import annotations

import ctypes
import sys
import threading

import pytest

from jupyter_ktune.backends import context_ahead


class FakeDriver:
    """libcuda's three calls, logged; ``fail`` names one that returns an error."""

    def __init__(self, fail: str = "") -> None:
        self.calls: list[tuple] = []
        self.fail = fail

    def _call(self, name: str, *args: object) -> int:
        self.calls.append((name, threading.current_thread().name, *args))
        return 100 if name == self.fail else 0

    def cuInit(self, flags):  # noqa: N802 - the driver's names
        return self._call("cuInit", flags)

    def cuDeviceGet(self, device, ordinal):  # noqa: N802
        return self._call("cuDeviceGet", ordinal)

    def cuDevicePrimaryCtxRetain(self, context, device):  # noqa: N802
        return self._call("cuDevicePrimaryCtxRetain")


@pytest.fixture
def fresh(monkeypatch):
    """The module as a fresh process has it: nothing started, nothing reported."""
    monkeypatch.setattr(context_ahead, "_started", [])
    monkeypatch.setattr(context_ahead, "RESULT", {})
    return monkeypatch


def test_the_driver_is_initialised_and_the_context_retained_on_a_thread(fresh):
    driver = FakeDriver()
    fresh.setattr(ctypes, "CDLL", lambda name: driver)
    context_ahead.start(0).join(5)
    assert [c[0] for c in driver.calls] == ["cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain"]
    assert {c[1] for c in driver.calls} == {"ktune-context-ahead"}
    assert driver.calls[0][2] == 0 and driver.calls[1][2] == 0
    assert context_ahead.RESULT == {"context": True}
    assert context_ahead.start(0) is context_ahead._started[0]  # once per process
    assert len(driver.calls) == 3


def test_a_failing_call_stops_there_and_says_which(fresh):
    driver = FakeDriver(fail="cuDeviceGet")
    fresh.setattr(ctypes, "CDLL", lambda name: driver)
    context_ahead.start(0).join(5)
    assert [c[0] for c in driver.calls] == ["cuInit", "cuDeviceGet"]
    assert context_ahead.RESULT == {"error": "cuDeviceGet returned 100"}


def test_no_libcuda_is_no_error_for_the_cell(fresh):
    def missing(name):
        raise OSError(f"{name}: cannot open shared object file")

    fresh.setattr(ctypes, "CDLL", missing)
    context_ahead.start(0).join(5)
    assert context_ahead.RESULT["error"].startswith("libcuda")


@pytest.mark.parametrize("gpu, compile_only, started, switch", [
    (True, "", True, "1"), (False, "", False, "1"), (True, "1", False, "1"),
    (True, "", False, "0")])  # KTUNE_CONTEXT_AHEAD=0: off, to compare on a device
def test_only_a_device_worker_on_a_gpu_machine_starts_it(fresh, gpu, compile_only, started,
                                                         switch):
    driver = FakeDriver()
    fresh.setattr(ctypes, "CDLL", lambda name: driver)
    fresh.setattr(context_ahead, "nvidia_gpu_visible", lambda: gpu)
    fresh.setenv(context_ahead.COMPILE_ONLY_ENV, compile_only)
    fresh.setenv(context_ahead.SWITCH_ENV, switch)
    context_ahead.start_in_worker()
    if context_ahead._started:
        context_ahead._started[0].join(5)
    assert bool(driver.calls) is started


@pytest.mark.parametrize("interpreting, seen", [(False, [True, True]), (True, [False])])
def test_a_triton_worker_starts_it_before_torchs_import_on_a_gpu_only(fresh, interpreting, seen):
    """On a GPU the context thread is started first, then the imports run (the Opening's first
    import finds it started); the interpreter's opening (a CPU machine) never starts it."""
    calls: list[bool] = []
    fresh.setattr(context_ahead, "start_in_worker", lambda: calls.append(True))
    import jupyter_ktune.backends.triton.backend as tb

    def first_import(self, *names):
        calls.append(bool(calls))  # started before the imports?
        raise ImportError("stop here", name="triton")

    fresh.setattr(tb, "choose_mode", lambda: interpreting)
    fresh.setattr(tb.Opening, "imports", first_import)
    tb.TritonBackend()._device  # noqa: B018 - the opening itself
    assert calls == seen


def test_a_cuda_worker_starts_it_before_cupys_import(fresh):
    """The CUDA backend's opening starts the context thread, then imports CuPy."""
    calls: list[bool] = []
    fresh.setattr(context_ahead, "start_in_worker", lambda: calls.append(True))
    import jupyter_ktune.backends.cuda.backend as cb

    def first_import(self, *names):
        calls.append(bool(calls))  # started before the import?
        raise ImportError("stop here", name="cupy")

    fresh.setattr(cb.Opening, "imports", first_import)
    cb.CudaBackend()._device  # noqa: B018 - the opening itself
    assert calls == [True, True]


@pytest.mark.parametrize("gpu, compile_only, started, switch", [
    (True, "", True, "1"), (False, "", False, "1"), (True, "1", False, "1"),
    (True, "", False, "0")])  # KTUNE_UTILS_AHEAD=0: off, to compare on a device
def test_triton_driver_utilities_are_built_in_a_subprocess_in_a_gpu_worker_only(
        fresh, gpu, compile_only, started, switch):
    """Triton's ``cuda_utils`` build (a C compile on a cold cache) runs in an interpreter of its
    own, once per worker, in the worker of a GPU machine only."""
    import subprocess

    from jupyter_ktune.backends.triton import utils_ahead

    spawned: list[list[str]] = []

    class Proc:
        def __init__(self, args, **_):  # noqa: ANN001, ANN003
            spawned.append(list(args))

        def wait(self) -> int:
            return 0

    fresh.setattr(subprocess, "Popen", Proc)
    fresh.setattr(utils_ahead, "_started", [])
    fresh.setattr(utils_ahead, "nvidia_gpu_visible", lambda: gpu)
    fresh.setenv(utils_ahead.COMPILE_ONLY_ENV, compile_only)
    fresh.setenv(utils_ahead.SWITCH_ENV, switch)
    first, again = utils_ahead.start_in_worker(), utils_ahead.start_in_worker()
    assert (first is not None) is started and again is first
    assert spawned == ([[sys.executable, "-c", utils_ahead.BUILD]] if started else [])


@pytest.mark.parametrize("interpreting, seen", [(False, [True, True]), (True, [False])])
def test_a_triton_worker_starts_the_utilities_build_before_torchs_import(fresh, interpreting,
                                                                         seen):
    calls: list[bool] = []
    import jupyter_ktune.backends.triton.backend as tb

    fresh.setattr(context_ahead, "start_in_worker", lambda: None)
    fresh.setattr(tb.utils_ahead, "start_in_worker", lambda: calls.append(True))

    def first_import(self, *names):
        calls.append(bool(calls))
        raise ImportError("stop here", name="triton")

    fresh.setattr(tb, "choose_mode", lambda: interpreting)
    fresh.setattr(tb.Opening, "imports", first_import)
    tb.TritonBackend()._device  # noqa: B018 - the opening itself
    assert calls == seen


@pytest.mark.parametrize("interpreting", [False, True])
def test_a_triton_worker_hashes_tritons_cache_key_beside_torchs_import(fresh, interpreting):
    """On a GPU the cache key's thread starts before the imports (here they fail at once, so
    only a thread started before them runs): after torch's import, it held the first config's
    compile 0.5-0.8 s (bench/results/first_minute_ab/2026-12-07-0900). The interpreter never
    compiles through Triton's cache, so it never starts it."""
    import jupyter_ktune.backends.triton.backend as tb

    hashed = threading.Event()
    fresh.setattr(context_ahead, "start_in_worker", lambda: None)
    fresh.setattr(tb.utils_ahead, "start_in_worker", lambda: None)
    fresh.setattr(tb, "warm_cache_key", hashed.set)
    fresh.setattr(tb, "choose_mode", lambda: interpreting)

    def first_import(self, *names):
        raise ImportError("stop here", name="triton")

    fresh.setattr(tb.Opening, "imports", first_import)
    assert not tb.TritonBackend()._device.available  # noqa: SLF001 - the opening itself
    assert hashed.wait(5.0) is not interpreting


def test_one_thread_hashes_tritons_installation_at_a_time(fresh):
    """Triton's ``lru_cache`` does not lock: threads that asked at once each hashed the whole
    installation. ``warm_cache_key`` lets one hash while the others wait."""
    import time
    import types

    from jupyter_ktune.backends.triton import jit_warm

    inside, most = [0], [0]

    def triton_key():
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.05)
        inside[0] -= 1
        return "key"

    fresh.setitem(sys.modules, "triton.runtime.cache", types.SimpleNamespace(triton_key=triton_key))
    threads = [threading.Thread(target=jit_warm.warm_cache_key) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1


def test_a_failing_cache_key_is_no_error_on_its_thread(fresh):
    """A Triton that fails to hash (or to import) makes ``warm_cache_key`` say False: on the key
    thread an exception would only print a traceback into the worker's log; the compile that
    needs the key raises it again, where it is reported."""
    import types

    from jupyter_ktune.backends.triton import jit_warm

    def broken():
        raise OSError("libtriton.so: cannot open shared object file")

    fresh.setitem(sys.modules, "triton.runtime.cache", types.SimpleNamespace(triton_key=broken))
    fresh.setitem(sys.modules, "triton.compiler.compiler", types.SimpleNamespace())
    assert jit_warm.warm_cache_key() is False
