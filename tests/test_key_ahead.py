"""Triton's cache key, hashed by the timer's subprocess and handed to the device worker
(:mod:`jupyter_ktune.backends.triton.key_ahead`), is the key this process would hash; installed,
``triton_key()`` returns it with no hash, for every compile's key and the autotuner's binding;
anything else (another Triton, a subprocess that dies or stays silent, the switch off) leaves the
worker hashing, within the bound.

The installs here replace ``triton_key`` of Triton's modules in this process: each test first
puts a stand-in there through ``monkeypatch``, which puts Triton's own back afterwards.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import textwrap
import time

import pytest

from jupyter_ktune.backends.triton import jit_warm, key_ahead, timer_ahead

pytest.importorskip("triton")



@pytest.fixture
def hashing(fresh_ahead):
    """Triton's hash replaced by a counting stand-in, in the module that defines it and where
    the autotuner bound it at its import (as Triton 3.6 and 3.9 do)."""
    import triton.runtime.autotuner as autotuner

    calls = []

    def triton_key() -> str:
        calls.append(1)
        return "hashed"

    home = key_ahead.key_home()
    assert autotuner.triton_key is home.triton_key  # bound at import, before any install
    fresh_ahead.setattr(home, "triton_key", triton_key)
    fresh_ahead.setattr(autotuner, "triton_key", triton_key)
    return calls


def _facts() -> dict[str, str]:
    import triton

    return {"file": os.path.realpath(triton.__file__), "version": triton.__version__}


def _handed(line: bytes, age: float = 0.0) -> None:
    """A subprocess's pipe that holds ``line`` and is closed (it wrote, then ended)."""
    read, write = os.pipe()
    os.write(write, line)
    os.close(write)
    key_ahead._pipe[:] = [(read, time.monotonic() - age, os.getpid())]


def _child(code: str) -> subprocess.Popen:
    """A subprocess given the pipe's write end, as ``timer_ahead.start`` gives it."""
    args, pass_fds = key_ahead.pipe_for_subprocess()
    assert args, "the handoff is on by default"
    proc = subprocess.Popen([sys.executable, "-c", code, *args], pass_fds=pass_fds)
    key_ahead.started(pass_fds, ok=True)
    timer_ahead._started.append(proc)  # killed by the fixture
    return proc


def test_the_subprocess_hands_the_key_this_process_hashes(fresh_ahead):
    """The real subprocess, as a GPU worker starts it (here it then fails to find a driver)."""
    assert timer_ahead.start() is not None
    handed = key_ahead.receive(wait_s=120)
    assert handed is not None
    assert handed == {"key": key_ahead.key_home().triton_key(), **_facts()}


def test_the_key_is_handed_and_its_pipe_closed_before_the_build(fresh_ahead):
    """The worker waits for the key, not for the compiles; and the compilers the build starts
    do not inherit the pipe (the worker sees its end at once)."""
    code = textwrap.dedent("""
        import sys, time
        from jupyter_ktune.backends.triton import timer_ahead as t
        t.gpu_facts = lambda: ("sm_90", 1)
        t.build = lambda arch, l2: time.sleep(60)
        t.main(sys.argv[1:])
    """)
    _child(code)
    read = key_ahead._pipe.pop()[0]
    data, deadline, ended = b"", time.monotonic() + 30, False
    try:  # to the pipe's end, which comes while the child's build sleeps for 60 s
        while not ended and select.select([read], [], [], max(0, deadline - time.monotonic()))[0]:
            chunk = os.read(read, 65536)
            data += chunk
            ended = not chunk
    finally:
        os.close(read)
    assert ended, f"the pipe stayed open into the build (read {data!r})"
    assert data.count(b"\n") == 1
    assert json.loads(data)["key"] == key_ahead.key_home().triton_key()


def test_an_installed_key_is_returned_without_hashing(hashing):
    import triton.runtime.autotuner as autotuner
    import triton.runtime.cache as cache

    _handed(json.dumps({"key": "handed", **_facts()}).encode() + b"\n")
    clock = time.monotonic()
    assert jit_warm.warm_cache_key() is True
    assert time.monotonic() - clock < 0.5
    assert cache.triton_key() == "handed"
    assert autotuner.triton_key() == "handed"  # the binding made at the autotuner's import

    class Part:
        def hash(self) -> str:
            return "part"

    assert cache.get_cache_key(Part(), Part(), Part(), {}).startswith("handed-")  # a compile's
    assert hashing == []
    assert jit_warm.warm_cache_key() is True and hashing == []  # later callers: instant


@pytest.mark.parametrize("change", [{"version": "0.0.1"}, {"file": "/elsewhere/triton/__init__.py"},
                                    {"key": ""}, {"key": 7}])
def test_another_tritons_key_is_not_taken(hashing, change):
    import triton.runtime.cache as cache

    _handed(json.dumps({"key": "handed", **_facts(), **change}).encode() + b"\n")
    assert jit_warm.warm_cache_key() is True
    assert hashing == [1]
    assert cache.triton_key() == "hashed"


@pytest.mark.parametrize("line", [b"not json\n", b"[1, 2]\n", b'{"key": "half'])
def test_a_garbled_line_means_hashing(hashing, line):
    _handed(line)
    assert jit_warm.warm_cache_key() is True
    assert hashing == [1]


def test_a_subprocess_that_dies_silently_means_hashing_at_once(hashing):
    proc = _child("raise SystemExit(3)")
    proc.wait()
    clock = time.monotonic()
    assert jit_warm.warm_cache_key() is True
    assert time.monotonic() - clock < key_ahead.WAIT_S / 2  # the closed pipe, not the bound
    assert hashing == [1]


def test_a_silent_subprocess_is_waited_for_until_the_bound_and_no_longer(hashing):
    _child("import time; time.sleep(60)")
    read, _start, pid = key_ahead._pipe[0]
    key_ahead._pipe[:] = [(read, time.monotonic() - (key_ahead.WAIT_S - 0.5), pid)]  # 0.5 s left
    clock = time.monotonic()
    assert jit_warm.warm_cache_key() is True
    assert 0.3 < time.monotonic() - clock < 2.0
    assert hashing == [1]


def test_a_fork_leaves_the_workers_pipe_alone(hashing):
    _handed(json.dumps({"key": "handed", **_facts()}).encode() + b"\n")
    read, start, pid = key_ahead._pipe[0]
    key_ahead._pipe[:] = [(read, start, pid + 1)]  # started by another process (our parent)
    assert jit_warm.warm_cache_key() is True
    assert hashing == [1]


@pytest.mark.parametrize("switch, handed", [("", True), ("1", True), ("0", False)])
def test_the_switch_turns_the_handoff_off(fresh_ahead, switch, handed):
    calls = []
    fresh_ahead.setattr(timer_ahead, "nvidia_gpu_visible", lambda: True)
    fresh_ahead.setenv(timer_ahead.COMPILE_ONLY_ENV, "")
    fresh_ahead.setenv(timer_ahead.SWITCH_ENV, "")
    fresh_ahead.setenv(key_ahead.SWITCH_ENV, switch)
    fresh_ahead.setattr(subprocess, "Popen",
                        lambda argv, **kw: calls.append((argv, kw)) or object())
    timer_ahead.start_in_worker()
    (argv, kw), = calls
    assert (key_ahead.FD_FLAG in argv) is handed
    assert len(kw["pass_fds"]) == (1 if handed else 0)
    assert len(key_ahead._pipe) == (1 if handed else 0)
    if not handed:
        clock = time.monotonic()
        assert key_ahead.take() is False
        assert time.monotonic() - clock < 0.1


def test_no_timer_subprocess_no_handoff(fresh_ahead):
    fresh_ahead.setattr(timer_ahead, "nvidia_gpu_visible", lambda: True)
    fresh_ahead.setenv(timer_ahead.SWITCH_ENV, "0")
    fresh_ahead.setattr(subprocess, "Popen", lambda argv, **kw: pytest.fail("started"))
    assert timer_ahead.start_in_worker() is None
    assert key_ahead._pipe == []
    assert key_ahead.take() is False


def test_a_failed_start_leaves_no_pipe(fresh_ahead):
    def fail(argv, **kw):
        raise OSError("no interpreter")

    fresh_ahead.setattr(subprocess, "Popen", fail)
    assert timer_ahead.start() is None
    assert key_ahead._pipe == []
