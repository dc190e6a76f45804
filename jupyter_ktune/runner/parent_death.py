"""Helper processes die with the process that started them, whatever killed it (issue 34).

The device worker, its input helper and the compile pool's processes are started by a notebook
(or a script) that can die of ``kill -9``, an out-of-memory kill or a crash, with no chance to
stop them. Each of them watches its parent instead and exits within a fraction of a second of
its death: a compile-pool process killed that way with its notebook stayed alive (354 MB), and
with it multiprocessing's resource tracker and the pool's five named semaphores in /dev/shm
(the tracker unlinks them once the last process holding its pipe is gone).

Polling ``os.getppid()`` is what works for all three. The kernel's ``PR_SET_PDEATHSIG`` fires
when the parent *thread* that started the child exits, not the process: a pool started from a
sweep's or a background thread would lose its processes when that thread ends. It is used, on
top of the watch, only where the starting thread is known to live as long as its process.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

WATCH_EVERY_S = 0.25  # how often a helper looks at its parent: it exits well within 5 s


def exit_with_parent(parent: int, before_exit: Callable[[], None] | None = None,
                     code: int = 4, kernel_signal: bool = False) -> None:
    """Exit this process (``os._exit(code)``) once ``parent`` is no longer its parent.

    ``before_exit`` runs first (best effort: unlink what this process owns, kill its own
    helpers). ``kernel_signal`` also asks Linux to SIGKILL this process when the thread that
    started it exits (``PR_SET_PDEATHSIG``), which reaches a process stuck in C code that never
    lets the watch thread run; only for children started by a thread that lives as long as its
    process. A parent already gone when this is called means an exit now.
    """
    if kernel_signal:
        _kill_me_with_parent_thread()

    def leave() -> None:
        try:
            if before_exit is not None:
                before_exit()
        finally:
            os._exit(code)

    if os.getppid() != parent:
        leave()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCH_EVERY_S)
        leave()

    threading.Thread(target=watch, name="ktune-parent-watch", daemon=True).start()


def _kill_me_with_parent_thread() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def exit_with_process(pid: int, code: int = 4) -> None:
    """Exit this process once the process ``pid``, which is not its parent, has ended.

    For a compile-pool process forked by multiprocessing's fork server: its parent is the
    server, which exits only once every process it forked has (each holds the server's
    "alive" pipe), so a watch of the parent would keep both alive after the notebook's
    ``kill -9``. Watched through a pidfd where Linux has one (an ended process, a zombie
    included, makes it readable), else by polling for the process and its zombie state."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None
    if fd is None and not _running(pid):
        os._exit(code)

    def watch() -> None:
        if fd is not None:
            import select

            poller = select.poll()
            poller.register(fd, select.POLLIN)
            while not poller.poll(None):
                pass
        else:
            while _running(pid):
                time.sleep(WATCH_EVERY_S)
        os._exit(code)

    threading.Thread(target=watch, name="ktune-notebook-watch", daemon=True).start()


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie answers kill(0) until its parent reaps it
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True
