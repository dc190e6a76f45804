"""Nothing outlives a crash (issue 15, item 12): processes, shared memory, log size.

The worker's process group is killed and its /dev/shm segments unlinked even when the worker has
already exited; an input helper stuck in ``inputs()`` dies with its worker; a worker whose
notebook was killed removes what it drew ahead; the worker log is trimmed, and read back from
its end only.
"""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from test_reliability_faults import _alive  # a zombie counts as dead
from test_worker import GOOD, LINE, reference

from jupyter_ktune.api import parse_cell
from jupyter_ktune.results import Status
from jupyter_ktune.runner.client import DeviceWorker
from jupyter_ktune.runner.set_segments import segment_prefix
from jupyter_ktune.runner.worker import LOG_MAX_BYTES

TESTS = Path(__file__).parent


def _wait_for(cond, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.05)
    return cond()


@pytest.fixture(autouse=True)
def own_segment_prefix(monkeypatch):
    """Segments of these tests only: other test runs on this host clean up dead workers' too."""
    monkeypatch.setenv("KTUNE_SHM_PREFIX", f"ktune_test_{os.getpid()}_")


def _segments(pid: int) -> list[str]:
    return glob.glob(f"/dev/shm/{segment_prefix()}{pid}_*")


def _stuck_inputs(folder: Path):
    """Make an inputs function that returns in the worker and hangs when drawn ahead."""

    def inputs():
        first = folder / "first"
        if first.exists():
            (folder / "helper").write_text(str(os.getpid()))
            time.sleep(1000)
        first.write_text(str(os.getpid()))
        x = np.random.rand(100)
        return dict(x=x, y=np.empty_like(x), n=100)

    return inputs


def test_an_input_helper_stuck_in_inputs_dies_with_its_worker(tmp_path):
    s = parse_cell(LINE, GOOD, {"inputs": _stuck_inputs(tmp_path), "reference": reference})
    with DeviceWorker() as w:
        assert w.run(s, s.space.default()).status is Status.OK
        assert _wait_for((tmp_path / "helper").exists)
        helper = int((tmp_path / "helper").read_text())
        assert _alive(helper)
        os.kill(w.pid, signal.SIGKILL)  # the worker alone, not its group
        assert _wait_for(lambda: not _alive(helper), 5), "the stuck helper outlived its worker"


def _spawn_sleeper() -> int:
    return subprocess.Popen(["sleep", "1000"]).pid  # in the worker's process group


def test_closing_after_the_worker_died_still_kills_its_group():
    w = DeviceWorker()
    try:
        sleeper = w.call(_spawn_sleeper)
        pid = w.pid
        os.kill(pid, signal.SIGKILL)
        assert _wait_for(lambda: not _alive(pid), 5)
        assert _alive(sleeper)
    finally:
        w.close()
    assert _wait_for(lambda: not _alive(sleeper), 5), "a child of the dead worker survived close"


def _fast_inputs():
    x = np.random.rand(4096)
    return dict(x=x, y=np.empty_like(x), n=4096)


def test_a_set_drawn_ahead_is_unlinked_when_the_worker_died_first():
    s = parse_cell(LINE, GOOD, {"inputs": _fast_inputs, "reference": reference})
    w = DeviceWorker()
    try:
        assert w.run(s, s.space.default()).status is Status.OK
        pid = w.pid
        assert _wait_for(lambda: bool(_segments(pid))), "no set was drawn ahead"
        os.kill(pid, signal.SIGKILL)
        assert _wait_for(lambda: not _alive(pid), 5)
    finally:
        w.close()
    assert not _segments(pid)


NOTEBOOK = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {tests!r})
    from test_runner_leaks import GOOD, LINE, _fast_inputs, reference
    from jupyter_ktune.runner.client import DeviceWorker
    from jupyter_ktune.api import parse_cell
    s = parse_cell(LINE, GOOD, {{"inputs": _fast_inputs, "reference": reference}})
    w = DeviceWorker()
    print(w.run(s, s.space.default()).status.value, w.pid, flush=True)
    w.call(time.sleep, 1000, timeout=3600)  # the worker is busy when its notebook is killed
""")


def test_a_killed_notebook_leaves_no_shared_memory():
    nb = subprocess.Popen([sys.executable, "-c", NOTEBOOK.format(tests=str(TESTS))],
                          stdout=subprocess.PIPE, text=True)
    try:
        status, pid = nb.stdout.readline().split()
        pid = int(pid)
        assert status == "ok"
        assert _wait_for(lambda: bool(_segments(pid))), "no set was drawn ahead"
        time.sleep(0.5)  # in the sleep: not at its loop, where a closed socket ends it cleanly
    finally:
        nb.kill()
        nb.wait()
    assert _wait_for(lambda: not _alive(pid), 5), "the worker outlived its notebook"
    assert _wait_for(lambda: not _segments(pid), 2), _segments(pid)


PRINTS = """import sys
printed = []
def scale(x, y, n):
    if not printed:   # 100 MB, once (the timing loop calls it again and again)
        for _ in range(100):
            sys.stdout.write("x" * 999_999 + "\\n")
        printed.append(1)
    y[:] = 2 * x
"""


def test_the_worker_log_stays_bounded_when_a_kernel_prints_100_mb():
    s = parse_cell(LINE, PRINTS, {"inputs": _fast_inputs, "reference": reference})
    with DeviceWorker() as w:
        assert w.run(s, s.space.default()).status is Status.OK
        size = w.log_path.stat().st_size
        assert 0 < size <= LOG_MAX_BYTES, size
        assert "worker log trimmed" in w.log_path.read_text()


def test_the_log_tail_is_read_from_the_end_only():
    w = DeviceWorker()  # not started: only its log file exists
    try:
        with open(w.log_path, "w") as f:
            for i in range(500_000):
                f.write(f"line {i} " + "y" * 90 + "\n")  # about 50 MB
        tracemalloc.start()
        tail = w.log_tail(3)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert tail.splitlines()[-1].startswith("line 499999 ")
        assert len(tail.splitlines()) == 3
        assert peak < 2 << 20, f"{peak} bytes held to read a 3-line tail"
    finally:
        w.close()


def test_a_client_start_unlinks_the_segments_of_dead_workers():
    from multiprocessing import resource_tracker, shared_memory

    dead = subprocess.Popen(["true"])
    dead.wait()
    seg = shared_memory.SharedMemory(name=f"{segment_prefix()}{dead.pid}_x", create=True, size=8)
    resource_tracker.unregister(seg._name, "shared_memory")  # noqa: SLF001 - as the helper does
    seg.close()
    assert _segments(dead.pid)
    w = DeviceWorker()
    try:
        w.start()
        assert not _segments(dead.pid)
    finally:
        w.close()
