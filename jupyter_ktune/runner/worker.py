"""Worker process main loop: ``python -m jupyter_ktune.runner.worker FD``.

Started with ``subprocess`` (a fresh interpreter, never a fork of the notebook, whose CUDA or
JAX state must not leak in), in its own session so the client can kill it and its children
(nvcc, ncu) at once. Requests and replies are cloudpickled tuples over a socket, each framed
with its request id (``runner.wire``; a reply carries its request's id):

* ``("run", spec, config[, violations])`` -> RunResult (compile, verify, time; ``violations``:
  the caller's check of the ``require`` lines, taken instead of checking again)
* ``("compile", spec, config)`` -> RunResult (static report, kernel loaded and cached; not run)
* ``("profile", spec, config, lines)`` -> Breakdown (scopes; with ``lines``, ncu's per-line
  stall samples)
* ``("device", backend[, torch_soon])`` -> DeviceInfo (``torch_soon``: the cell uses torch,
  start the asked-for warm-up now, :mod:`.torch_warm`)
* ``("describe", spec)`` -> what the backend reads from the cell's module at parse (a Triton
  cell's ``@triton.autotune`` list), as plain data; the module stays loaded for the run, so the
  kernel's package is imported once (``runner.describe``)
* ``("limits", spec)`` -> what ``spec``'s ``require`` lines read: the device limits and the
  inputs' values they name (``backends.base.limits_for``), or ``("cell_error", (message, line,
  fix))``: the inputs function runs here, never in the notebook (issue 34)
* ``("first_set", backend, key, job)`` -> whether the input helper took ``job`` (a pickled
  draw, forwarded unread): a cell's start, before the backend is opened, has its first set
  drawn beside the imports (``runner.first_set``); False once the backend is open
* ``("before_first_run", spec, config, key)`` -> whether the set drawn at the cell's start
  (``key``; None: none) was there to become ``spec``'s problem's; if it was, on a GPU the
  build of ``config``, which a panel is about to run, starts meanwhile
  (``static_reports.build_ahead``); where the backend builds a host launcher per signature,
  that run launches without waiting for it (:func:`_first_launch_quick`)
* ``("call", fn, args, kwargs)`` -> fn(*args, **kwargs), for probes and tests
* ``("ping",)`` -> "pong"

A reply is ``("ok", value)``, ``("error", text)``, or ``("fatal", value)`` after which the worker
exits because the device context is lost (illegal address, misaligned access ...). Before its
reply a request may get any number of ``("phase", Phase)`` messages under its id, one as each
phase starts (``runner.phases``): the client gives each phase its own time limit.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import threading
import time
import traceback
from typing import Any

from jupyter_ktune.runner import torch_warm  # sys only: the worker's start pays nothing

# Before anything imports JAX or Triton: never grab all GPU memory, and leave room for others.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


_OPENED: set[str] = set()  # the backends a "device" request has opened in this worker
_preimport: list[threading.Thread] = []  # the idle worker's own imports (_import_while_idle)
IMPORTED_AT: list[float] = []  # when they were done (time.monotonic), once


def _import_while_idle() -> None:
    """Import the worker's own request modules on a thread once it is ready: the first request
    paid them (NumPy, the runner, the measurements: 0.13-0.18 s of a fresh notebook's first
    Triton cell on an H100 host, its "triton device request" in bench/results/first_minute/
    2026-12-06-0934, 0cf38d4 in the history; 0.3 s on a 2-core machine), while the worker waited
    idle between its start and the cell's first request. No backend (no torch, Triton, CuPy or
    JAX): which one the cell needs, and Triton's mode, are the request's. The ready message goes
    first, so the worker's start costs what it did."""
    def run() -> None:
        with contextlib.suppress(Exception):  # the request imports them again, and reports
            import jupyter_ktune.runner.execute  # noqa: F401
            import jupyter_ktune.runner.profile  # noqa: F401
        IMPORTED_AT.append(time.monotonic())

    thread = threading.Thread(target=run, name="ktune-worker-imports", daemon=True)
    _preimport.append(thread)
    thread.start()


def _first_launch_quick(spec: Any, config: Any) -> bool:
    """Have a panel's first run launch its kernel before the kernel's host launcher is built,
    where the backend builds one per signature (Triton 3.6: gcc, 0.4 s of fla's first result
    on an H100 host, after its compile and in series with it) and can launch without it
    (``Backend.quick_launch``, as a sweep's first-pass runs do; the timing's method says so).
    The compile pool builds the launcher for the later runs (``compile_ahead.send_soon``).
    Whether it was asked."""
    from jupyter_ktune.backends import get_backend
    from jupyter_ktune.runner.execute import quick_launch

    backend = get_backend(spec.backend)
    if not backend.quick_launch() or backend.device().compute_capability is None:
        return False
    quick_launch(spec.source_hash, config, True)
    return True


#: the requests whose first argument is the cell's KernelSpec
SPEC_REQUESTS = ("limits", "before_first_run", "compile", "profile", "run")


def _handle(msg: tuple) -> tuple:
    if msg[0] != "ping":  # one importer at a time: no module seen half-initialized
        while _preimport:
            _preimport.pop().join()
    from jupyter_ktune.runner.execute import (
        FatalDeviceError,
        compile_variant,
        device_info,
        run_variant,
    )
    from jupyter_ktune.runner.profile import profile_variant

    kind = msg[0]
    if kind == "ping":
        return ("ok", "pong")
    if kind in SPEC_REQUESTS:  # a cell whose functions use torch: its warm-up starts now
        torch_warm.for_spec(msg[1])
    if kind == "device":
        info = _device(msg[1], device_info)
        _OPENED.add(msg[1])
        if len(msg) > 2 and msg[2]:  # the cell uses torch: its warm-up starts with the device
            torch_warm.start_asked()
        return ("ok", info)
    if kind == "first_set":
        from jupyter_ktune.runner.input_sets import draw_first

        return ("ok", msg[1] not in _OPENED and draw_first(msg[2], msg[3]))
    if kind == "before_first_run":
        from jupyter_ktune.runner.input_sets import first_set_is
        from jupyter_ktune.runner.static_reports import build_ahead

        _, spec, config, key = msg
        taken = key is not None and first_set_is(key, spec)
        if taken and config is not None:  # its argument types at hand: no draw of its own
            build_ahead(spec, config)
        if config is not None:
            with contextlib.suppress(Exception):  # the run launches as it always did
                _first_launch_quick(spec, config)
        return ("ok", taken)
    if kind == "limits":
        return _limits(msg[1])
    if kind == "describe":
        from jupyter_ktune.backends import get_backend

        return ("ok", get_backend(msg[1].backend).describe(msg[1]))
    if kind == "call":
        _, fn, args, kwargs = msg
        return ("ok", fn(*args, **kwargs))
    if kind == "compile":
        return ("ok", compile_variant(msg[1], msg[2]))
    if kind == "profile":
        return ("ok", profile_variant(msg[1], msg[2], bool(msg[3]) if len(msg) > 3 else False))
    if kind == "run":
        try:
            return ("ok", run_variant(*msg[1:]))
        except FatalDeviceError as exc:
            return ("fatal", exc.result)
    return ("error", f"[ktune] unknown worker request {kind!r}")


def _device(backend: str, device_info: Any) -> Any:
    """The backend's DeviceInfo, with what opening the device cost (``opening_ms``) only where
    this request opened it: the parts are times inside the request, so they add up to no more
    than it took. A device opened before (the backend's cached answer, or one opened by another
    request) answers faster than its parts add up to, and this request paid none of them: its
    reply carries none, or a later panel's first result would count torch's import again."""
    from dataclasses import replace

    t0 = time.perf_counter()
    info = device_info(backend)
    parts = getattr(info, "opening_ms", None)
    if parts and sum(parts.values()) > (time.perf_counter() - t0) * 1e3:
        info = replace(info, opening_ms={})
    return info


def _limits(spec: Any) -> tuple:
    from jupyter_ktune.backends.base import limits_for
    from jupyter_ktune.errors import CellError
    from jupyter_ktune.runner.execute import device_info

    try:
        return ("ok", limits_for(spec, device_info(spec.backend)))
    except CellError as exc:  # an inputs function that fails: one line, on the notebook's side
        return ("cell_error", (exc.message, exc.line, exc.fix))


LOG_MAX_BYTES = 8 << 20  # the worker's log (its stdout and stderr) is trimmed past this size
LOG_KEEP_BYTES = 1 << 20  # ... to its last this many bytes
_TRIMMED = b"[ktune] worker log trimmed: earlier output dropped\n"


def trim_log(fd: int = 1, max_bytes: int = LOG_MAX_BYTES, keep: int = LOG_KEEP_BYTES) -> bool:
    """Cut the log file on ``fd`` to its last ``keep`` bytes once it is over ``max_bytes``.

    A kernel that prints wrote 68 MB per run into a log that was never trimmed (issue 15). The
    client opened the file for appending, so writes after the truncation (this process's, its
    children's) land at the new end. Returns whether it trimmed. One trim at a time (the
    watcher thread's and the one before each reply): otherwise a reply could be sent inside the
    other's truncate-then-write, with the log empty (a CI run saw a 0-byte log).
    """
    with _TRIM_LOCK:
        return _trim(fd, max_bytes, keep)


_TRIM_LOCK = threading.Lock()


def _trim(fd: int, max_bytes: int, keep: int) -> bool:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size <= max_bytes:
            return False
        tail = os.pread(fd, keep, st.st_size - keep)
        start = tail.find(b"\n") + 1  # from a line start
        os.ftruncate(fd, 0)
        os.write(fd, _TRIMMED + tail[start:])
    except (OSError, ValueError):
        return False
    return True


def _trim_log_regularly(every_s: float = 0.5) -> None:
    """Trim the log while a long request prints, too (after each request it is trimmed anyway)."""

    def watch() -> None:
        while True:
            time.sleep(every_s)
            trim_log()

    threading.Thread(target=watch, name="ktune-log-trim", daemon=True).start()


def _exit_with_parent() -> None:
    """Exit when the notebook process dies (issue 9).

    The worker runs in its own session, so a ``kill -9`` of the notebook's kernel does not reach
    it; a worker stuck in a hung kernel would never read the closed socket and would spin (and
    hold the GPU) forever. A daemon thread watches the parent id instead
    (:mod:`.parent_death`); on the way out, the input helper and the set it drew ahead in
    /dev/shm go too.
    """
    from jupyter_ktune.runner.parent_death import exit_with_parent

    def abandon() -> None:  # imported on the way out: NumPy is not the worker's start's cost
        from jupyter_ktune.runner.inputs_ahead import abandon

        abandon()

    exit_with_parent(os.getppid(), before_exit=abandon)


def main(fd: int) -> None:
    """Serve requests on socket ``fd`` until the client closes it."""
    import socket
    from multiprocessing.connection import Connection

    from jupyter_ktune.runner.phases import Phase, reporting
    from jupyter_ktune.runner.wire import pack_message, request_id, unpack_message

    sock = socket.socket(fileno=fd)
    conn = Connection(sock.detach())
    _exit_with_parent()
    _trim_log_regularly()
    # the ready time lets the client measure the start alone, not the wait for a first request
    conn.send_bytes(pack_message(0, ("ready", os.getpid(), time.time())))
    _import_while_idle()
    while True:
        try:
            data = conn.recv_bytes()
        except (EOFError, OSError):
            return
        rid = request_id(data)

        def send_phase(phase: Phase, rid: int = rid) -> None:
            try:
                conn.send_bytes(pack_message(rid, ("phase", phase)))
            except OSError:  # the client is gone; the request's reply will fail the same way
                pass

        kind = ""
        try:
            msg = unpack_message(data)[1]
            kind = msg[0]
            with reporting(send_phase):
                reply = _handle(msg)
        except BaseException as exc:  # noqa: BLE001 - report, keep serving
            reply = ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        try:
            payload = pack_message(rid, reply)
        except Exception as exc:  # noqa: BLE001 - an unpicklable result must still answer
            payload = pack_message(rid, ("error", f"[ktune] reply could not be pickled: {exc}"))
        trim_log()
        conn.send_bytes(payload)
        if reply[0] == "fatal":
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(3)
        with contextlib.suppress(OSError, EOFError):  # a closed socket: recv says so next
            torch_warm.after_reply(kind, conn)  # a run answered, or idle: torch's warm-up


if __name__ == "__main__":
    main(int(sys.argv[1]))
