"""The Triton timer's kernels, compiled in a subprocess from a fresh worker's start
(:mod:`jupyter_ktune.backends.triton.timer_ahead`), are the cache entries the timer's launches
look up, built without torch; the worker's timer waits for them only so long.

On this CPU machine the subprocess compiles for sm_90 as it does on a GPU host (there it also
builds Triton 3.6's launchers); a second process then makes the timer's own arrays (torch, on the
CPU here) and asks the JIT for each kernel as its launch would: it must find every entry and
write nothing new. With the hold's counter a view 4 bytes into the gate's allocation, as it was,
the lookup misses: ``test_a_misaligned_counter_is_a_miss`` keeps the check able to fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from jupyter_ktune.backends.triton import timer_ahead

L2 = 50 << 20  # an H100's

AHEAD = textwrap.dedent(f"""
    import json, sys
    from jupyter_ktune.backends.triton import timer_ahead
    timer_ahead.main(["sm_90", "{L2}"])
    out = {{"torch loaded": "torch" in sys.modules}}
    try:
        import torch
    except ModuleNotFoundError as exc:
        out["torch import"] = str(exc)
    print(json.dumps(out))
""")

LOOKUP = textwrap.dedent(f"""
    import os, sys
    from pathlib import Path
    import torch
    from jupyter_ktune.backends.triton.jit_warm import compiling_for
    from jupyter_ktune.backends.triton.module import compile_settings, load_module
    from jupyter_ktune.backends.triton.timer import (
        TIMER_SOURCE, flush_bytes, launch_arguments, timer_arrays)
    compile_settings()
    module = load_module(TIMER_SOURCE, "timer")
    buf, sink, gate, timeouts = timer_arrays(torch, flush_bytes({L2}), "cpu")  # as TorchTimer's
    if sys.argv[1] == "view":  # the old layout: the counter 4 bytes into the gate's allocation
        pair = torch.zeros(2, dtype=torch.int32)
        gate, timeouts = pair[:1], pair[1:]
    cache = Path(os.environ["TRITON_CACHE_DIR"])
    before = {{p for p in cache.rglob("*") if p.is_file()}}
    for name, kwargs in launch_arguments(buf, sink, gate, timeouts, buf.numel()).items():
        with compiling_for("sm_90"):  # the launch's lookup, short of the launch
            getattr(module, name).run(grid=(1,), warmup=True, **kwargs)
    print(len({{p for p in cache.rglob("*") if p.is_file()}} - before))
""")


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRITON_INTERPRET", "KTUNE_FORCE_INTERPRET", "KTUNE_COMPILE_ONLY",
                        "TRITON_DEFAULT_FP_FUSION")}  # the processes set it themselves
    env["TRITON_CACHE_DIR"] = str(tmp / "triton-cache")
    env["KTUNE_CACHE_DIR"] = str(tmp / "ktune-cache")
    return env


def _run(tmp: Path, *args: str) -> str:
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          env=_env(tmp), timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, dict]:
    """One subprocess's build into a fresh cache, as a GPU worker starts it (arch given)."""
    pytest.importorskip("triton")
    tmp = tmp_path_factory.mktemp("timer-ahead")
    return tmp, json.loads(_run(tmp, "-c", AHEAD))


def test_the_build_keeps_torch_out(built):
    _tmp, out = built
    assert out["torch loaded"] is False
    assert "kept out" in out.get("torch import", ""), out


def test_the_timers_launches_find_the_subprocess_build(built):
    pytest.importorskip("torch")
    tmp, _out = built
    new = _run(tmp, "-c", LOOKUP, "timer")
    assert new == "0", f"the timer's launches compiled again ({new} new cache files)"


def test_a_misaligned_counter_is_a_miss(built):
    """The check can fail: the hold's old arguments specialise otherwise."""
    pytest.importorskip("torch")
    tmp, _out = built
    assert int(_run(tmp, "-c", LOOKUP, "view")) > 0



def _as_started(proc: subprocess.Popen, age: float) -> None:
    timer_ahead._started.append(proc)
    timer_ahead._started_at.append(time.monotonic() - age)


def test_the_worker_waits_until_the_deadline_after_the_start_and_no_longer(fresh_ahead):
    assert timer_ahead.wait_built() is None  # none started: nothing to wait for
    slow = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        _as_started(slow, timer_ahead.WAIT_S - 0.5)  # started 2.5 s ago: 0.5 s left
        clock = time.monotonic()
        assert timer_ahead.wait_built() is False
        assert 0.3 < time.monotonic() - clock < 2.0
    finally:
        slow.kill()
        slow.wait()


@pytest.mark.parametrize("code, built", [("0", True), ("3", False)])
def test_the_exit_status_says_whether_it_built(fresh_ahead, code, built):
    _as_started(subprocess.Popen([sys.executable, "-c", f"raise SystemExit({code})"]), 0.0)
    assert timer_ahead.wait_built() is built


@pytest.mark.parametrize("gpu, compile_only, switch, started", [
    (True, "", "", True), (False, "", "", False), (True, "1", "", False),
    (True, "", "0", False)])
def test_only_a_device_worker_on_a_gpu_machine_starts_it(fresh_ahead, gpu, compile_only, switch,
                                                         started):
    calls = []
    fresh_ahead.setattr(timer_ahead, "nvidia_gpu_visible", lambda: gpu)
    fresh_ahead.setenv(timer_ahead.COMPILE_ONLY_ENV, compile_only)
    fresh_ahead.setenv(timer_ahead.SWITCH_ENV, switch)
    fresh_ahead.setattr(subprocess, "Popen", lambda argv, **kw: calls.append(argv) or object())
    timer_ahead.start_in_worker()
    timer_ahead.start_in_worker()
    assert len(calls) == (1 if started else 0)  # once per process
    if started:
        assert calls[0][1:3] == ["-m", "jupyter_ktune.backends.triton.timer_ahead"]


def test_the_timer_waits_for_the_subprocess_before_building(monkeypatch):
    """``_make_timer`` on a GPU: the wait comes before the timer's own compiles."""
    from jupyter_ktune.backends.triton import backend as triton_backend

    order = []
    monkeypatch.setattr(timer_ahead, "wait_built", lambda: order.append("wait"))

    class Timer:
        def __init__(self, *args):
            order.append("build")

        def warmed(self):
            return self

    monkeypatch.setattr(triton_backend, "TorchTimer", Timer)
    be = triton_backend.TritonBackend()
    be.__dict__["interpret"] = False  # the GPU path, on this CPU machine
    be._make_timer({"L2_BYTES": L2, "SM_COUNT": 132})
    assert order == ["wait", "build"]


def test_a_hung_build_ends_itself():
    """Nobody waits for the subprocess past its deadline: one that hangs ends on its own."""
    code = ("from jupyter_ktune.backends.triton import timer_ahead as t\n"
            "import time\n"
            "t.LIFETIME_S = 1\n"
            "t.build = lambda arch, l2: time.sleep(30)\n"
            "t.main(['sm_90', '1'])\n")
    clock = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60,
                          check=False)
    assert proc.returncode != 0
    assert time.monotonic() - clock < 20
