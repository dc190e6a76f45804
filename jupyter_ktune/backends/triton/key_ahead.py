"""Triton's cache key, handed to the device worker by the timer's subprocess (:mod:`.timer_ahead`).

Every compile and JIT lookup keys its cache entry on ``triton_key()``, a hash of Triton's own
installation that each process computes once (:func:`.jit_warm.warm_cache_key`): 0.33 s of CPU,
and 1.07 s of wall time in a fresh device worker, where the key thread hashes while the main
thread imports torch and the two share the GIL. The timer's subprocess imports Triton without
torch and needs the key for its own compiles anyway, so it hashes first, writes the key on a
pipe of its own and only then compiles; the worker's key thread waits for that line on the pipe
(a ``select``, outside the GIL) and installs the key instead of hashing. Triton 3.9 hands the key
to its warm-up pool processes the same way (``triton.runtime.cache.triton_key = lambda: key``,
``triton/_compile_warmup_pool.py``). On an H100 host, in turns against ``KTUNE_KEY_AHEAD=0``
(5 a side): fla's first result 3.17 -> 2.93 s from spawn, new lower in 5 of 5 pairs (median of
the pairs -0.19 s), torch's import in the worker 1.72 -> 1.46 s
(7df6452:bench/results/first_minute_ab/2026-12-07-1459, call 1).

The key is a pipe of its own (``pass_fds``), not the subprocess's stdout: stdout stays DEVNULL,
so nothing the build prints (its seconds, a compiler's warnings) can fill a pipe nobody reads,
and the subprocess closes its end once the line is written, so the compilers it starts do not
hold it open. The worker takes the key only if the subprocess imported the same Triton
(``triton.__file__`` and ``__version__``: the key hashes the files under that folder).

Where the key is read: in Triton 3.6 and 3.9, ``triton.runtime.cache.get_cache_key`` (every
compile's key) looks the module's global up at each call, and ``triton.runtime.autotuner`` binds
it at its import (``from .cache import triton_key``, for the autotuner's disk cache); Triton's
``__init__`` imports the autotuner, so it is bound in any process that can import the cache
module. :func:`install` replaces the function in every loaded ``triton`` module that holds it
(older Tritons define it in ``triton.compiler.compiler``; the scan finds it there too), and a
module imported later binds the replacement.

``KTUNE_KEY_AHEAD=0`` turns the handoff off (to compare); ``KTUNE_TIMER_AHEAD=0`` starts no
subprocess, so nothing is handed either. Whatever goes wrong (no line within :data:`WAIT_S`, the
subprocess dead, another Triton, anything raising), the worker hashes as before.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import sys
import time
from types import ModuleType
from typing import Any

SWITCH_ENV = "KTUNE_KEY_AHEAD"
#: The subprocess's argument that names the pipe's write end (before its own arguments).
FD_FLAG = "--key-fd"
#: How long after the subprocess's start the worker waits for the key at most, then hashes.
#: On this project's 2-core CPU machine the line came 0.85 s after the start when idle and up
#: to 1.6 s under a load of 5 (an interpreter, numpy, ``import triton``, the hash); on an H100
#: host the whole subprocess, compiles included, was done in 1.0 s, and the worker's first
#: compile asks for the key about 2 s after its start. Only a subprocess that hangs before
#: writing costs the whole wait (one that dies closes the pipe, and the worker hashes at once);
#: the key is then ready about 3 s after the start, when the timer gives up on the subprocess
#: too (``timer_ahead.WAIT_S``).
WAIT_S = 2.0
_pipe: list[tuple[int, float, int]] = []  # the read end, when the subprocess started, our pid


def pipe_for_subprocess() -> tuple[list[str], tuple[int, ...]]:
    """In the worker, just before the subprocess starts: its extra arguments and ``pass_fds``
    (none where switched off or not on POSIX). :func:`started` must follow."""
    if os.environ.get(SWITCH_ENV) == "0" or os.name != "posix":
        return [], ()
    try:
        read, write = os.pipe()
    except OSError:
        return [], ()
    _pipe[:] = [(read, time.monotonic(), os.getpid())]
    return [FD_FLAG, str(write)], (write,)


def started(pass_fds: tuple[int, ...], ok: bool) -> None:
    """Close the worker's copy of the write end (else the pipe never reports the subprocess's
    death); forget the read end where the subprocess did not start."""
    for fd in pass_fds:
        os.close(fd)
    if not ok and pass_fds:
        os.close(_pipe.pop()[0])


def key_home() -> ModuleType:
    """The module that defines ``triton_key`` (``triton.runtime.cache`` since Triton 3.0)."""
    import importlib

    for where in ("triton.runtime.cache", "triton.compiler.compiler"):
        try:
            module = importlib.import_module(where)
        except ImportError:
            continue
        if callable(getattr(module, "triton_key", None)):
            return module
    raise ImportError("this Triton has no triton_key")


def _facts() -> tuple[str, str]:
    import triton

    return os.path.realpath(triton.__file__), str(triton.__version__)


def hand(fd: int) -> None:
    """In the subprocess, before its build: hash, write one line, close the pipe. A failure
    writes nothing; the closed pipe then tells the worker to hash itself."""
    try:
        key = key_home().triton_key()
        file, version = _facts()
        line = json.dumps({"key": key, "file": file, "version": version}) + "\n"
        os.write(fd, line.encode())  # one small write: a pipe takes it whole, nobody blocks
    except Exception:  # noqa: BLE001, S110 - the worker hashes itself
        pass
    finally:
        os.close(fd)


def receive(wait_s: float = WAIT_S) -> dict[str, Any] | None:
    """The subprocess's line, waited for until ``wait_s`` after its start, once per process;
    None where none was started here, the line is late or the subprocess ended without it."""
    if not _pipe:
        return None
    read, start, pid = _pipe.pop()
    try:
        if pid != os.getpid():  # a fork of the worker: the pipe is the worker's to read
            return None
        data = b""
        while not data.endswith(b"\n"):
            left = start + wait_s - time.monotonic()
            if left <= 0 or not select.select([read], [], [], left)[0]:
                return None
            chunk = os.read(read, 65536)
            if not chunk:  # the subprocess closed the pipe without the line (it failed)
                return None
            data += chunk
        handed = json.loads(data)
        return handed if isinstance(handed, dict) else None
    except (OSError, ValueError):
        return None
    finally:
        os.close(read)


def install(handed: dict[str, Any]) -> bool:
    """Make ``triton_key()`` return the handed key, if it is this process's Triton's (True)."""
    key = handed.get("key")
    if not isinstance(key, str) or not key or [handed.get("file"), handed.get("version")] != list(
            _facts()):
        return False
    home = key_home()
    original = home.triton_key

    def triton_key() -> str:
        return key

    home.triton_key = triton_key  # every compile's key; then the bindings made at import
    for name, module in list(sys.modules.items()):
        if name == "triton" or name.startswith("triton."):
            with contextlib.suppress(Exception):  # a lazy module's __getattr__, say
                if getattr(module, "triton_key", None) is original:
                    module.triton_key = triton_key
    return True


def take(wait_s: float = WAIT_S) -> bool:
    """In the worker: install the handed key (True), or False where the worker must hash."""
    try:
        handed = receive(wait_s)
        return handed is not None and install(handed)
    except Exception:  # noqa: BLE001 - anything: the caller hashes, as without the handoff
        return False
