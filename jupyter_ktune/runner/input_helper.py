"""The input helper's process: started with the worker, before any cell asks it for a set.

The helper (:mod:`.inputs_ahead`) draws a cell's first input set while the worker opens the
device, and a CUDA C++ cell with host inputs waits for that set: Kernel Tuner's vector add's
first run waited 0.85 s for it against about 0.5 s for the draw itself. Started by the cell's
first-set request, the helper's interpreter and imports (its module, NumPy, ``numpy.random``:
0.23 s on an H100 host, pid 1774 in
``bench/results/first_minute_ab/2026-12-07-1459/raw_output.txt``, call 3) came before the draw;
the request itself first waited for the worker's idle imports (``worker._import_while_idle``).

Now the worker starts the helper right after its ready message, and the helper imports what a
draw needs and waits for the job; the first draw adopts it (:func:`adopt`). It is started from the
worker's main thread: the helper asks the kernel for a signal when the thread that started it
exits (``PR_SET_PDEATHSIG``, :func:`.inputs_ahead.serve`), and a helper started from a short-lived
thread would be killed with that thread. A notebook whose cells never draw on the host keeps an
idle helper (one sleeping interpreter with NumPy). ``KTUNE_HELPER_AHEAD=0`` starts the helper at
the first draw instead, as before, to compare.

Only the standard library here: the worker's start pays no NumPy for it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from multiprocessing.connection import Connection

ENV = "KTUNE_HELPER_AHEAD"
#: live helper processes of this worker, adopted or not (``inputs_ahead.abandon`` kills them)
helpers: set[subprocess.Popen] = set()
_waiting: list[tuple[subprocess.Popen, Connection]] = []  # started ahead, not adopted yet
_lock = threading.Lock()


def helper_env() -> dict[str, str]:
    """The helper's environment: the worker's, with every device hidden. Only host work belongs
    there; a function that reaches a device anyway (through a module the names do not show) then
    fails in the helper, and the worker draws or checks that set itself, on the device."""
    return {**os.environ, "CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "",
            "JAX_PLATFORMS": "cpu"}


def spawn() -> tuple[subprocess.Popen, Connection]:
    """Start a helper on a fresh socket pair: (its process, this side's connection). A plain
    subprocess in the worker's process group, so a killed worker takes it along."""
    mine, theirs = socket.socketpair()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", "import sys; from jupyter_ktune.runner.inputs_ahead import "
             "serve; serve(int(sys.argv[1]), int(sys.argv[2]))", str(theirs.fileno()),
             str(os.getpid())],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, env=helper_env())
    except BaseException:
        mine.close()
        raise
    finally:
        theirs.close()
    helpers.add(proc)
    return proc, Connection(mine.detach())


def start_ahead() -> bool:
    """Worker side, at its start and on its main thread: start the helper the first draw will
    adopt (unless ``KTUNE_HELPER_AHEAD=0``, or one waits already). Whether one now waits."""
    if os.environ.get(ENV, "1") == "0":
        return False
    with _lock:
        if not _waiting:
            try:
                _waiting.append(spawn())
            except Exception:  # noqa: BLE001 - no helper ahead: the first draw starts one
                return False
    return True


def adopt() -> tuple[subprocess.Popen, Connection] | None:
    """The helper started ahead, still alive, handed over once; None where there is none."""
    with _lock:
        while _waiting:
            proc, conn = _waiting.pop()
            if proc.poll() is None:
                return proc, conn
            conn.close()
            helpers.discard(proc)
    return None
