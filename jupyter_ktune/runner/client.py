"""Client side of the device worker: start it, send requests, survive its death.

The notebook process never imports CuPy, Triton's driver or JAX's GPU client; it only talks to
the worker. When the worker faults (a sticky CUDA error), segfaults, or hangs past the request's
timeout, the request becomes a failed :class:`RunResult` with the reason, the worker is replaced,
and the next request is served by a fresh process.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Collection, Mapping
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from jupyter_ktune.backends import DEFAULT_BACKEND
from jupyter_ktune.errors import CellError, KtuneError
from jupyter_ktune.results import RunResult, Status
from jupyter_ktune.runner.first_set import claim_first_set
from jupyter_ktune.runner.gpu_guest import give_way
from jupyter_ktune.runner.set_segments import remove_orphans
from jupyter_ktune.runner.wire import pack_message, unpack_message
from jupyter_ktune.runner.worker_errors import (
    RequestAbandoned,
    WorkerDied,
    WorkerTimeout,
    exit_text,
)
from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec, timeout_problem

LOG_TAIL_BYTES = 64 << 10  # read back from the worker's log on a failure, from its end


class DeviceWorker:
    """A restartable worker process that owns the device.

    Parameters
    ----------
    env
        Extra environment variables for the worker (e.g. ``CUDA_VISIBLE_DEVICES``).
    startup_timeout
        Seconds to wait for a new worker to say it is ready.

    Examples
    --------
    >>> with DeviceWorker() as w:                       # doctest: +SKIP
    ...     result = w.run(spec, spec.space.default())
    """

    def __init__(self, env: Mapping[str, str] | None = None, startup_timeout: float = 120.0):
        self._env = dict(env or {})
        self._startup_timeout = startup_timeout
        self._lock = threading.RLock()
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._ready = False
        fd, log = tempfile.mkstemp(prefix="ktune-worker-", suffix=".log")
        os.close(fd)  # the child opens it by name; an open fd per worker would leak
        self._log = Path(log)
        self.restarts = 0
        self.stale_replies = 0  # replies to earlier requests, read and dropped
        self._request_id = 0
        self._in_flight: threading.Thread | None = None  # whose request the worker serves
        self._idle_since = time.perf_counter()  # when the last request ended (idle_s)
        self._abandoned = False
        self._refused: weakref.WeakSet[threading.Thread] = weakref.WeakSet()  # see abandon
        self.last_start_s: float | None = None
        self.start_times_s: list[float] = []  # every start, first one included (issue 9)
        self.ready_waits_s: list[float] = []  # a request's wait for each start (issue 33)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Spawn the worker process now (requests also start it on demand)."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                return
            self._kill()  # one that exited between requests: its group, its socket
            remove_orphans()  # segments of workers that died with their notebook (kill -9)
            parent, child = socket.socketpair()
            env = {**os.environ, **self._env, "PYTHONUNBUFFERED": "1"}
            # read and append: the worker trims it by reading its tail back (worker.trim_log)
            log = open(self._log, "a+b")  # noqa: SIM115 - owned by the child
            self._t0 = time.perf_counter()
            self._t0_wall = time.time()
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "jupyter_ktune.runner.worker", str(child.fileno())],
                pass_fds=(child.fileno(),), env=env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True)
            log.close()
            child.close()
            self._conn = Connection(parent.detach())
            self._ready = False

    def _ensure_ready(self) -> None:
        self.start()
        if self._ready:
            return
        assert self._conn is not None and self._proc is not None
        waiting = time.perf_counter()
        if not self._conn.poll(self._startup_timeout):
            self._kill()
            raise WorkerTimeout(f"[ktune] the device worker did not start within "
                                f"{self._startup_timeout:.0f} s. Its log: {self._log}")
        try:
            _, hello = unpack_message(self._conn.recv_bytes())
        except (EOFError, OSError):
            code = self._proc.wait()
            self._kill()
            raise WorkerDied(f"[ktune] the device worker failed to start ({exit_text(code)})."
                             f"\n{self.log_tail()}") from None
        self._ready = True
        self.ready_waits_s.append(time.perf_counter() - waiting)  # what a request waited for
        # From spawn to the worker's ready message; the client may read it much later (a restart
        # is spawned at once but read on the next request), which is not start time.
        waited = time.perf_counter() - self._t0
        start = hello[2] - self._t0_wall if len(hello) > 2 else waited
        self.last_start_s = min(max(start, 0.0), waited)
        self.start_times_s.append(self.last_start_s)

    def _kill(self) -> None:
        """Kill the worker's whole process group and unlink what it left in shared memory.

        Also when the worker has already exited (a crash, a fatal fault): its input helper, an
        nvcc or ncu it started may live on in its group, and a set drawn ahead may sit in
        /dev/shm (issue 15).
        """
        if self._proc is not None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass  # the group is empty already
            self._proc.wait()
            self._proc = None
            remove_orphans()  # an input set it had drawn ahead, left in shared memory
        if self._conn is not None:
            self._conn.close()
        self._conn, self._ready = None, False

    def restart(self) -> None:
        """Replace the worker with a fresh process (started immediately, ready on next use)."""
        with self._lock:
            self._kill()
            self.restarts += 1
            self.start()

    def abandon(self, threads: Collection[threading.Thread] | None = None,
                refuse_later: bool = False) -> bool:
        """Kill the worker now if it serves a request of one of ``threads`` (any when None);
        with ``refuse_later``, refuse their later requests (RequestAbandoned): nobody waits.

        An Interrupt reaches the main thread, not the one waiting for the reply (a sweep's, a
        panel's session thread): waiting for that request held the next one for its time limit,
        17 s of 20 behind a hanging variant (issue 34). Called from any thread, without the
        request lock; the waiting thread starts a fresh worker and raises RequestAbandoned.
        The refusal is marked before the request in flight is read, and a request is marked
        in flight before it reads the refusal: a thread about to send cannot slip between.
        Returns whether a request was abandoned.
        """
        if refuse_later and threads is not None:
            self._refused.update(threads)
        proc, requester = self._proc, self._in_flight
        if proc is None or requester is None or (threads is not None and requester not in threads):
            return False
        self._abandoned = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # not reaped until the waiting thread's wait()
        except (ProcessLookupError, PermissionError):
            pass
        return True

    def close(self) -> None:
        """Stop the worker and remove its log file (a temp file per worker, issue 9)."""
        with self._lock:
            self._kill()
            self._proc = None
            self._log.unlink(missing_ok=True)

    def __enter__(self) -> DeviceWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """Process id of the current worker, if one is running."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    @property
    def log_path(self) -> Path:
        """The worker's log file (its stdout and stderr, trimmed by the worker past 8 MiB)."""
        return self._log

    def log_tail(self, lines: int = 15) -> str:
        """Last lines the worker printed (kernel printf, driver messages, tracebacks).

        Read from the end, a bounded tail only: the log of a kernel that prints can be large.
        """
        return "\n".join(self._read_log(0).splitlines()[-lines:])

    def _read_log(self, mark: int, limit: int = LOG_TAIL_BYTES) -> str:
        """Return what the worker printed since byte ``mark``, at most the last ``limit`` bytes.

        The worker trims its log (``worker.trim_log``): a ``mark`` past the end means it was
        trimmed since, and the tail left is what there is.
        """
        try:
            with open(self._log, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                start = mark if mark <= size else 0
                f.seek(max(start, size - limit))
                return f.read(limit).decode(errors="replace")
        except OSError:
            return ""

    # -- requests ----------------------------------------------------------------------------
    def request(self, message: tuple, timeout: float) -> tuple[str, Any]:
        """Send one request and return ``(kind, value)``; kill and raise on death or timeout.

        Every request carries a fresh id and its reply the same id (issue 15): a reply with
        another id, left unread by an earlier request, is read and dropped. Any exception
        between send and receive (Jupyter's Interrupt is a KeyboardInterrupt) restarts the
        worker before it propagates: the worker may still be inside that request, and its
        reply must never be taken as the next request's.
        """
        problem = timeout_problem(timeout)
        if problem:
            raise KtuneError(f"[ktune] timeout {timeout!r}: {problem}. Pass seconds, e.g. "
                             "timeout=60.")
        me = threading.current_thread()
        with self._lock:
            if me in self._refused:  # before a fresh worker's start, too
                raise RequestAbandoned("the request was abandoned (Interrupt) before it was sent")
            self._ensure_ready()
            assert self._conn is not None and self._proc is not None
            mark = self._log.stat().st_size if self._log.exists() else 0
            self._request_id += 1
            rid = self._request_id
            self._in_flight, self._abandoned = me, False
            give_way()  # a guest job on the GPU (the ceilings) stops before the worker serves
            try:
                if me in self._refused:  # abandoned while the worker started (see abandon)
                    raise RequestAbandoned("the request was abandoned (Interrupt) before it "
                                           "was sent")
                self._conn.send_bytes(pack_message(rid, message))
                data = self._receive(rid, timeout, mark)
            except (WorkerTimeout, WorkerDied):
                raise
            except BaseException:
                self.restart()  # out of step with the worker: never read its stale reply
                raise
            finally:
                self._in_flight, self._idle_since = None, time.perf_counter()
            kind, value = data
            if kind == "fatal":
                self._proc.wait()
                self.restart()
            return kind, value

    def _receive(self, rid: int, timeout: float, mark: int) -> tuple[str, Any]:
        """Wait for the reply to request ``rid``, dropping replies to earlier requests.

        ``timeout`` is the limit of each phase the worker announces (``runner.phases``): a
        phase message restarts the deadline, and a timeout names the phase that was running.
        """
        assert self._conn is not None and self._proc is not None
        deadline = time.monotonic() + timeout
        phase = None
        while True:
            if not self._conn.poll(max(deadline - time.monotonic(), 0.0)):
                self.restart()
                what = phase.overdue(timeout) if phase else f"no answer within {timeout:g} s"
                raise WorkerTimeout(f"{what}; the worker was killed and restarted")
            try:
                data = self._conn.recv_bytes()
            except (EOFError, OSError):
                code = self._proc.wait()
                tail = self._new_log_text(mark)
                self.restart()
                if self._abandoned:
                    raise RequestAbandoned("the request was abandoned (Interrupt) and the "
                                           "worker restarted") from None
                raise WorkerDied(f"the worker died ({exit_text(code)}) and was restarted"
                                 + (f"; it printed:\n{tail}" if tail else "")) from None
            got, reply = unpack_message(data)
            if reply[0] == "phase":  # progress, not an answer: the next phase's clock starts
                if got == rid:
                    phase, deadline = reply[1], time.monotonic() + timeout
                continue
            if got == rid:
                return reply
            self.stale_replies += 1  # an earlier request's answer, arrived late: drop it

    def _new_log_text(self, mark: int) -> str:
        return self._read_log(mark, 2000).strip()

    @property
    def env(self) -> dict[str, str]:
        """The environment the worker process starts with (a guest job's too, ``gpu_guest``)."""
        return {**os.environ, **self._env}

    def idle_s(self) -> float:
        """Seconds since the last request ended; 0 while one is in flight (``gpu_guest``)."""
        return 0.0 if self._in_flight is not None else time.perf_counter() - self._idle_since

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float = 60.0, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` in the worker and return its value (errors re-raised)."""
        kind, value = self.request(("call", fn, args, kwargs), timeout)
        if kind == "error":
            raise KtuneError(f"[ktune] the worker raised: {value}")
        return value

    def device(self, backend: str = DEFAULT_BACKEND, timeout: float = 120.0,
               torch_soon: bool = False) -> Any:
        """DeviceInfo for ``backend`` as the worker sees it; ``torch_soon``: the cell uses torch,
        so the worker starts warming it as the device opens (:mod:`.torch_warm`)."""
        kind, value = self.request(("device", backend, True) if torch_soon else
                                   ("device", backend), timeout)
        if kind == "error":
            raise KtuneError(f"[ktune] device query failed: {value}")
        return value

    def limits(self, spec: KernelSpec, timeout: float | None = None) -> dict[str, Any]:
        """What ``spec``'s ``require`` lines read, as the worker sees it: its device's limits and
        the values of the inputs they name.

        The inputs function runs in the worker, never here (issue 34): one that allocates on the
        GPU would open a device context in the notebook. Its failure is a CellError."""
        self.device(spec.backend)  # the backend picks its mode before any spec is unpickled
        kind, value = self.request(("limits", spec),
                                   spec.options.timeout_s if timeout is None else timeout)
        if kind == "cell_error":
            message, line, fix = value
            raise CellError(message, line=line, fix=fix)
        if kind == "error":
            raise KtuneError(f"[ktune] the worker could not read the limits: {value}")
        return value

    def run(self, spec: KernelSpec, config: Config, timeout: float | None = None,
            violations: list[str] | None = None) -> RunResult:
        """Compile, verify and time one variant; failures come back as a RunResult, not raised.
        ``violations``: the caller's ``Space.violations`` of it (a panel's), not checked again."""
        return self._variant_request("run", spec, config, timeout, violations)

    def compile(self, spec: KernelSpec, config: Config, timeout: float | None = None) -> RunResult:
        """Compile and cache one variant without running it.

        The status is OK, COMPILE_ERROR, or CANNOT_RUN with the static report on a machine
        without a device.
        """
        return self._variant_request("compile", spec, config, timeout)

    def _variant_request(self, kind: str, spec: KernelSpec, config: Config,
                         timeout: float | None, *extra: Any) -> RunResult:
        timeout = spec.options.timeout_s if timeout is None else timeout
        if timeout_problem(timeout):
            raise CellError(f"--timeout {timeout!r}: {timeout_problem(timeout)}", line=1,
                            fix="Write --timeout 60 (seconds).")
        base = dict(name=spec.name, backend=spec.backend, config=dict(config))
        claim_first_set(self, spec)  # the set a cell's start had drawn, if it is this spec's
        try:
            kind, value = self.request((kind, spec, config, *extra), timeout)
        except WorkerTimeout as exc:
            return RunResult(**base, status=Status.TIMEOUT, reason=f"[ktune] {exc}")
        except WorkerDied as exc:
            return RunResult(**base, status=Status.CRASHED, reason=f"[ktune] {exc}")
        if kind == "error":
            return RunResult(**base, status=Status.RUNTIME_ERROR, reason=str(value))
        if kind == "fatal":
            value = dataclasses.replace(value, reason=value.reason + " The device context was "
                                        "lost; the worker restarted.")
        return value


_default: DeviceWorker | None = None
_default_lock = threading.Lock()


def get_worker() -> DeviceWorker:
    """Return the process-wide worker used by the magic (started on first use, stopped at exit)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = DeviceWorker()
            atexit.register(_default.close)
        return _default
