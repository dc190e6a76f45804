"""GPU work beside the device worker gives way to it (``runner.gpu_guest``).

The roofline's ceilings ran as a worker request after a fresh notebook's first result, and an
Autotune pressed then waited 2.1-3.1 s before its sweep began (``setup_ms`` "device" in
``0d9de0a:bench/results/corpus_vs_autotune/2026-12-05-1519``, on an H100). Now they run in a
process of their own while the worker is idle, and the worker's next request stops them first.
"""

from __future__ import annotations

import os
import threading
import time

import ktune_guest_probes as probes
import pytest
from test_reliability_faults import _alive  # a zombie counts as dead

from jupyter_ktune.runner import gpu_guest


def _wait_for(path, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_worker_request_stops_the_guest_and_it_runs_again_later(worker, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setenv("KTUNE_TEST_GUEST_DIR", str(tmp_path))
    worker.device("fake")  # the worker is up and idle
    before = dict(gpu_guest.STATS)
    got: list = []
    guest = threading.Thread(target=lambda: got.append(
        gpu_guest.run_beside(worker, probes.slow_then_fast, timeout=60, env=worker.env)),
        daemon=True)
    guest.start()
    assert _wait_for(tmp_path / "start-0")
    time.sleep(0.3)  # the job has its pid written: it sleeps now
    pid = int((tmp_path / "start-0").read_text())
    t0 = time.perf_counter()
    worker.device("fake")  # a sweep's first question, say
    assert time.perf_counter() - t0 < 5
    assert not _alive(pid)  # stopped before the request was sent
    guest.join(30)
    assert got == [{"tflops": 1.5, "starts": 2}]  # run again once the worker was idle
    assert {k: gpu_guest.STATS[k] - before[k] for k in before} == {
        "started": 2, "stopped": 1, "finished": 1, "failed": 0}


class Busy:
    """A stand-in worker busy for ``seconds`` from now, then idle."""

    def __init__(self, seconds: float) -> None:
        self.until = time.perf_counter() + seconds
        self.until_wall = time.time() + seconds

    def idle_s(self) -> float:
        return max(0.0, time.perf_counter() - self.until)


def test_a_guest_waits_until_the_worker_has_been_idle(tmp_path, monkeypatch):
    monkeypatch.setenv("KTUNE_TEST_GUEST_DIR", str(tmp_path))
    (tmp_path / "start-0").write_text("")  # so the job returns at once
    busy = Busy(1.0)
    got = gpu_guest.run_beside(busy, probes.slow_then_fast, timeout=60)
    assert got == {"tflops": 1.5, "starts": 2}
    started = (tmp_path / "start-1").stat().st_mtime  # written by the job as it began
    assert started >= busy.until_wall + gpu_guest.IDLE_S - 0.05


def test_a_job_that_fails_on_its_own_is_not_run_again(tmp_path, monkeypatch):
    monkeypatch.setenv("KTUNE_TEST_GUEST_DIR", str(tmp_path))
    before = gpu_guest.STATS["failed"]
    assert gpu_guest.run_beside(Busy(0.0), probes.fails, timeout=60) is None
    assert gpu_guest.STATS["failed"] == before + 1
    assert sorted(p.name for p in tmp_path.glob("start-*")) == ["start-0"]


def test_a_job_past_its_time_is_stopped_and_gives_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("KTUNE_TEST_GUEST_DIR", str(tmp_path))
    assert gpu_guest.run_beside(Busy(0.0), probes.slow_then_fast, timeout=2) is None
    assert not _alive(int((tmp_path / "start-0").read_text()))
    assert sorted(p.name for p in tmp_path.glob("start-*")) == ["start-0"]  # not run again


def test_a_guest_dies_with_a_notebook_killed_with_kill_9(tmp_path):
    """No process outlives its notebook (issue 34): a guest would hold the GPU for nobody."""
    import signal
    import subprocess
    import sys

    script = ("import ktune_guest_probes as p, time\n"
              "from jupyter_ktune.runner import gpu_guest\n"
              "class Idle:\n    def idle_s(self): return 10.0\n"
              "gpu_guest.run_beside(Idle(), p.slow_then_fast)\n")
    notebook = subprocess.Popen([sys.executable, "-c", script],
                                env={**os.environ, "KTUNE_TEST_GUEST_DIR": str(tmp_path)})
    try:
        assert _wait_for(tmp_path / "start-0")
        time.sleep(0.3)
        pid = int((tmp_path / "start-0").read_text())
        notebook.send_signal(signal.SIGKILL)
        notebook.wait()
        deadline = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid)
    finally:
        notebook.kill()


def test_two_guest_jobs_never_share_the_gpu(tmp_path, monkeypatch):
    """Two panels' ceilings at once would each measure half the bandwidth."""
    monkeypatch.setenv("KTUNE_TEST_GUEST_DIR", str(tmp_path))
    jobs = [threading.Thread(target=gpu_guest.run_beside, args=(Busy(0.0), probes.takes_a_while),
                             daemon=True) for _ in range(2)]
    for job in jobs:
        job.start()
    for job in jobs:
        job.join(30)
    spans = sorted(tuple(map(float, p.read_text().split())) for p in tmp_path.glob("job-*"))
    assert len(spans) == 2 and spans[0][1] <= spans[1][0]


def test_the_ceilings_cache_keeps_what_a_guest_measured(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from jupyter_ktune.measure import ceilings

    monkeypatch.setattr(ceilings, "CACHE", tmp_path / "ceilings.json")
    gpu = SimpleNamespace(available=True, compute_capability=(9, 0), name="H200", driver="580",
                          measure_ceilings=lambda: pytest.fail("not in the worker"))
    asked: list = []

    def beside(probe):
        asked.append(probe)
        return {"tflops": 700.0, "source": "guest"}

    assert ceilings.device_ceilings(None, gpu, beside)["source"] == "guest"
    assert ceilings.cached_ceilings(gpu)["tflops"] == 700.0 and len(asked) == 1
    assert ceilings.device_ceilings(None, gpu, beside)["tflops"] == 700.0 and len(asked) == 1
