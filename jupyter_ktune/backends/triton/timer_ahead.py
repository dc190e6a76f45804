"""The Triton timer's kernels compiled in a subprocess from a fresh worker's start.

A device worker's timer (:class:`.timer.TorchTimer`: the L2 flush, the empty kernel, the hold)
compiles its three kernels and, on Triton 3.6, builds their three host launchers with gcc before
the first timing. That build starts once torch is imported and the device is open (about 2 s
after spawn) and runs beside the first config's compile, in the same process: fla's first result
then waited 0.2-0.35 s for it ("time: timer ready") and the config's compile shared the GIL with
it (aad7023:bench/results/first_minute_ab/2026-12-07-0900). None of it needs torch or the GPU,
so a separate interpreter compiles the three kernels for the GPU's arch (Triton's compile-only
driver, :mod:`.jit_warm`) and builds their launchers into Triton's cache from the worker's
start, while the worker imports torch; the worker's timer waits for it (at most :data:`WAIT_S`)
and then finds every compile in the cache. On an H100 host, in turns against
``KTUNE_TIMER_AHEAD=0``: fla's first result 3.39 -> 2.95 s from spawn, new lower in 5 of 5
pairs, "time: timer ready" 233 -> 4 ms; the subprocess was done 1.0 s after its start
(bench/results/first_minute_ab/2026-12-07-1145 in 66427e1's tree, call 1 and its sampled timeline).

torch is kept out of the subprocess: Triton 3.6 imports it at its first specialisation (0.9 s
here), which would end the build about when the worker's own import ends. Arrays are then
placeholders of a :class:`.jit_warm.TorchDtypeName`, which Triton keys as torch's dtype.

The subprocess hashes Triton's installation for its cache key first and hands the key to the
worker on a pipe (:mod:`.key_ahead`) before it compiles: the worker's key thread then installs it
instead of hashing beside torch's import (``KTUNE_KEY_AHEAD=0`` keeps the worker hashing).

Only in a device worker on a machine that shows a GPU (never under the interpreter or in a
compile-only process); ``KTUNE_TIMER_AHEAD=0`` turns it off, to compare. Nothing here can fail
a cell: if the subprocess fails or is late, the worker compiles what is missing itself.
"""

from __future__ import annotations

import ctypes
import importlib.abc
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from jupyter_ktune.backends.base import COMPILE_ONLY_ENV, LAUNCHER_AHEAD_ENV, nvidia_gpu_visible
from jupyter_ktune.backends.triton import key_ahead

SWITCH_ENV = "KTUNE_TIMER_AHEAD"
#: How long after its start the worker's timer waits for the subprocess at most, then compiles
#: what is missing itself (on an H100 host the timer asks about 2 s after the worker's start).
WAIT_S = 3.0
#: Seconds after which the subprocess ends itself (:func:`main`).
LIFETIME_S = 120
_started: list[subprocess.Popen] = []
_started_at: list[float] = []
_lock = threading.Lock()


def start_in_worker() -> subprocess.Popen | None:
    """Start the build in a device worker on a GPU machine (the process, or None)."""
    if (not nvidia_gpu_visible() or os.environ.get(COMPILE_ONLY_ENV)
            or os.environ.get(SWITCH_ENV) == "0"):
        return None
    return start()


def start() -> subprocess.Popen | None:
    """Start the subprocess once per process (it asks the driver for the first GPU's arch and
    L2 size); None where it cannot start."""
    with _lock:
        if _started:
            return _started[0]
        key_args, pass_fds = key_ahead.pipe_for_subprocess()
        try:
            proc = subprocess.Popen([sys.executable, "-m", __name__, *key_args],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, pass_fds=pass_fds)
        except (OSError, ValueError):
            key_ahead.started(pass_fds, ok=False)
            return None
        key_ahead.started(pass_fds, ok=True)
        _started.append(proc)
        _started_at.append(time.monotonic())
    return proc


def wait_built(wait_s: float = WAIT_S) -> bool | None:
    """Wait for the subprocess until ``wait_s`` after its start: True if it built all three,
    False if it failed or is still running (it is left to finish), None where none started."""
    if not _started:
        return None
    try:
        return _started[0].wait(max(0.0, _started_at[0] + wait_s - time.monotonic())) == 0
    except subprocess.TimeoutExpired:
        return False


def gpu_facts(ordinal: int = 0) -> tuple[str, int]:
    """The GPU's arch (``sm_90``) and L2 size in bytes, from the driver through ctypes (no
    context is made: only ``cuInit`` and attribute queries)."""
    cuda = ctypes.CDLL("libcuda.so.1")
    device, value = ctypes.c_int(), ctypes.c_int()

    def attribute(number: int) -> int:
        if cuda.cuDeviceGetAttribute(ctypes.byref(value), number, device) != 0:
            raise OSError(f"cuDeviceGetAttribute({number}) failed")
        return value.value

    if cuda.cuInit(0) != 0 or cuda.cuDeviceGet(ctypes.byref(device), ordinal) != 0:
        raise OSError("cuInit or cuDeviceGet failed")
    # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR (75), _MINOR (76), L2_CACHE_SIZE (38)
    return f"sm_{attribute(75)}{attribute(76)}", attribute(38)


def build(arch: str, l2_bytes: int) -> dict[str, float]:
    """Compile the timer's kernels for ``arch`` as its launches will look them up, and build
    their launchers (each on a thread of its own, started as its kernel is compiled: the host
    compiler runs outside the GIL); seconds per step, from the start."""
    from jupyter_ktune.backends.triton.jit_warm import (
        ArrayPlaceholder,
        build_launcher,
        warm_compile,
    )
    from jupyter_ktune.backends.triton.module import compile_settings, load_module
    from jupyter_ktune.backends.triton.timer import TIMER_SOURCE, flush_bytes, launch_arguments

    start = time.perf_counter()
    os.environ[COMPILE_ONLY_ENV] = "1"  # the compile-only driver, no GPU context
    os.environ[LAUNCHER_AHEAD_ENV] = "1"  # the launchers are built here, on threads
    compile_settings()  # the worker's (fp fusion), so the cache keys agree
    array = ArrayPlaceholder("int32")
    module = load_module(TIMER_SOURCE, "timer")
    seconds: dict[str, float] = {}
    launchers = []

    def launcher(name: str, kernel: Any) -> None:
        built = build_launcher(kernel)
        seconds[f"{name} launcher" if built else f"{name} launcher (none)"] = (
            time.perf_counter() - start)

    launches = launch_arguments(array, array, array, array, flush_bytes(l2_bytes) // 4)
    for name, arguments in launches.items():
        kernel = warm_compile(getattr(module, name), arguments, arch)
        seconds[name] = time.perf_counter() - start
        launchers.append(threading.Thread(target=launcher, args=(name, kernel)))
        launchers[-1].start()
    for thread in launchers:
        thread.join()
    return seconds


class _NoTorch(importlib.abc.MetaPathFinder):
    """Fails torch's import in this process (Triton 3.6's first specialisation tries it and
    goes on without; 3.9 looks only in ``sys.modules``, so a None there would not do)."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if name.partition(".")[0] == "torch":
            raise ModuleNotFoundError("torch is kept out of the timer's build", name=name)


def main(argv: list[str]) -> int:
    """``python -m`` this module ``[--key-fd FD] [ARCH L2_BYTES]``: hand the worker Triton's
    cache key on ``FD`` (:mod:`.key_ahead`), build, print the seconds, exit 0.

    The process ends itself after :data:`LIFETIME_S` whatever it is doing: nobody waits for it
    past :data:`WAIT_S`, and a driver call or a compile that hangs must not outlive the worker.
    """
    signal.signal(signal.SIGALRM, signal.SIG_DFL)  # the default action ends the process
    signal.alarm(LIFETIME_S)
    sys.meta_path.insert(0, _NoTorch())  # see the module's text
    if argv[:1] == [key_ahead.FD_FLAG]:  # the key first: the worker waits for it, not the build
        from jupyter_ktune.backends.triton.module import compile_settings

        compile_settings()  # before Triton's import, as in build()
        key_ahead.hand(int(argv[1]))
        argv = argv[2:]
    arch, l2_bytes = (argv[0], int(argv[1])) if len(argv) == 2 else gpu_facts()
    print(build(arch, l2_bytes))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
