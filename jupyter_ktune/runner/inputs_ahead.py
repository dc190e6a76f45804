"""The next random input set, drawn in a helper process while the device works on this one.

A sweep draws fresh inputs every few variants (``execute.REDRAW_EVERY``). On the H200 host two
4096^2 bf16 matrices took 0.6 s to draw, every 8 configs: over a third of a warm 72-config sweep.
Drawn on a thread of the worker, they would share its GIL with the timing loop: a NumPy call
holding it between "record start event" and "launch" would put idle GPU time in a timed run.
So the set is drawn in a separate process and handed over in shared memory; the worker takes
the arrays over the segments' own pages at the redraw, outside any timed region, without a copy
(:mod:`.set_segments`).

Only host sets qualify (contiguous NumPy arrays and plain scalars, up to ``MAX_BYTES``): an inputs
function that makes device arrays would launch GPU work of its own during the timing. A C- or
Fortran-ordered array arrives in the same order; a strided view is drawn in place, as it is.

The helper also runs the reference on the set it drew (issue 21): a NumPy fp32 matmul at 4096^3
takes seconds, and run in the worker it sat inside the first config's request of every set. A
reference written against a device array API (torch, CuPy, JAX: :func:`uses_device_arrays`) is
left to the worker, which owns the device (:mod:`.device_modules`, which also reads the imports
in a function's own body). The helper never opens a device context: it runs with every device
hidden (:func:`helper_env`).
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import cloudpickle
import numpy as np

from jupyter_ktune.runner.device_modules import uses_device_arrays
from jupyter_ktune.runner.set_segments import NoRoom, remove_orphans, share, take, unlink_own

MAX_BYTES = 2 << 30  # the drawn set and the one in use are both in host memory
# None too: a Triton kernel's absent optional pointer (fla's matmul: input=None) (issue 33)
_SCALARS = (int, float, complex, bool, str, bytes, np.generic, type(None))
_helpers: set[subprocess.Popen] = set()  # live helper processes of this worker (abandon)


def host_only(args: dict[str, Any]) -> bool:
    """Whether an input set is contiguous NumPy arrays and plain scalars, small enough to hold
    twice (the set drawn ahead must reach the kernel with the same memory layout)."""
    total = 0
    for v in args.values():
        if isinstance(v, np.ndarray):
            if not (v.flags.c_contiguous or v.flags.f_contiguous):
                return False
            total += v.nbytes
        elif not isinstance(v, _SCALARS):
            return False
    return total <= MAX_BYTES


def helper_env() -> dict[str, str]:
    """The helper's environment: the worker's, with every device hidden. Only host work belongs
    there; a function that reaches a device anyway (through a module the names do not show) then
    fails in the helper, and the worker draws or checks that set itself, on the device."""
    return {**os.environ, "CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "",
            "JAX_PLATFORMS": "cpu"}


def draw_job(inputs_fn: Any, reference: Any = None, outputs: tuple[str, ...] = ()) -> bytes:
    """What the helper runs for one set, pickled: the inputs function, the reference (None:
    not run there) and the outputs to take from it."""
    return cloudpickle.dumps((inputs_fn, reference, tuple(outputs)))


def helper_reference(reference: Any, verify: bool = True) -> Any:
    """The reference the helper runs on the sets it draws: None under ``--no-verify`` and for a
    reference written against a device array API (the worker runs that one, on the device)."""
    if reference is None or not verify or uses_device_arrays(reference):
        return None
    return reference


@dataclass(frozen=True)
class DrawnSet:
    """An input set drawn ahead, with the reference's outputs for it when the helper ran it."""

    args: dict[str, Any]
    expected: dict[str, np.ndarray] | None = None
    reference_ms: float | None = None  # the helper's time for the reference (off the worker)


def _draw_into_shared_memory(fn: Any, owner: int, reference: Any = None,
                             outputs: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """In the helper: call the inputs function (and the reference) and put the arrays into
    shared memory.

    Returns {"args": name -> ("shm", segment name, shape, dtype, order) for arrays and the value
    itself for scalars, "expected": the same for the reference's outputs or None, "reference_ms"};
    None when the set is not host-only or /dev/shm cannot hold it (the worker then stops
    drawing ahead; a reference's outputs that do not fit leave "expected" None). An exception of
    the inputs function travels back to the worker, which reports it as the function's own; one
    of the reference leaves "expected" None, and the worker runs it again to report it.
    """
    args = fn()
    if not isinstance(args, dict) or not host_only(args):
        return None
    try:
        shared = share(args, owner)  # copied before the reference can write into the arrays
    except NoRoom:  # the worker draws its sets in place, as for a set that is not host-only
        return None
    expected, ref_ms = None, None
    if reference is not None:
        from jupyter_ktune.measure.verify import reference_outputs

        t0 = time.perf_counter()
        try:
            got = reference_outputs(reference(**args), outputs,
                                    getattr(reference, "__name__", "reference"))
            expected = share({k: np.ascontiguousarray(v) for k, v in got.items()}, owner)
        except Exception:  # noqa: BLE001 - the worker runs it again and reports the error
            expected = None
        ref_ms = (time.perf_counter() - t0) * 1e3
    return {"args": shared, "expected": expected, "reference_ms": ref_ms}


def _take_set(drawn: dict[str, Any]) -> DrawnSet:
    expected = drawn.get("expected")
    return DrawnSet(take(drawn["args"]), take(expected) if expected is not None else None,
                    drawn.get("reference_ms"))


class InputsAhead:
    """One input set drawn ahead per cell (``io`` key), by one lazily started helper process.

    The helper is a plain subprocess on a socket pair, in the worker's process group (a killed
    worker takes it along). Not a ``multiprocessing`` pool: the worker is killed with SIGKILL,
    and a pool's named semaphores would then be left in /dev/shm every time.
    """

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._reader: cf.ThreadPoolExecutor | None = None  # waits for replies, in order
        self._pending: dict[str, cf.Future] = {}
        self._started: dict[str, float] = {}  # io -> time.monotonic() when its draw was sent
        self._dropped: list[cf.Future] = []
        atexit.register(self.close)

    def _ensure_helper(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        self.close()
        remove_orphans()
        mine, theirs = socket.socketpair()
        self._proc = subprocess.Popen(
            [sys.executable, "-c", "import sys; from jupyter_ktune.runner.inputs_ahead import "
             "serve; serve(int(sys.argv[1]), int(sys.argv[2]))", str(theirs.fileno()),
             str(os.getpid())],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, env=helper_env())
        _helpers.add(self._proc)
        theirs.close()
        self._conn = Connection(mine.detach())
        self._reader = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ktune-ahead")

    def warm(self) -> None:
        """Start the helper process before a set is asked of it: its interpreter and imports
        (0.5-1 s on a busy host) overlap the worker's own draw, and the set drawn ahead (a
        sweep's first, :func:`~jupyter_ktune.runner.input_sets.prepare_inputs`) is sooner."""
        try:
            self._ensure_helper()
        except Exception:  # noqa: BLE001 - no helper: the sets are drawn in place, as before
            self.close()

    def start(self, io: str, inputs_fn: Any, reference: Any = None,
              outputs: tuple[str, ...] = ()) -> None:
        """Begin drawing the next set for ``io`` (``reference`` run on it, for ``outputs``)."""
        try:
            job = draw_job(inputs_fn, reference, outputs)
        except Exception:  # noqa: BLE001 - an unpicklable function: drawn in place
            self.drop()
            return
        self.start_job(io, job)

    def start_job(self, io: str, job: bytes) -> None:
        """As :meth:`start`, for a :func:`draw_job` pickled in the notebook (:mod:`.first_set`);
        a set pending for another cell is dropped."""
        self.drop()
        try:
            self._ensure_helper()
            assert self._conn is not None and self._reader is not None
            self._conn.send_bytes(cloudpickle.dumps((os.getpid(), job)))
            self._pending[io] = self._reader.submit(self._conn.recv_bytes)
            self._started[io] = time.monotonic()
        except Exception:  # noqa: BLE001 - a dead helper: drawn in place
            self.close()

    def rename(self, old: str, new: str, max_age_s: float) -> bool:
        """File the set pending under ``old`` under ``new`` if its draw began at most
        ``max_age_s`` ago (whether it did); an older one is dropped, with any other pending."""
        if old in self._pending and time.monotonic() - self._started[old] > max_age_s:
            self.drop()
        if old not in self._pending:
            return False
        self._pending[new], self._started[new] = self._pending.pop(old), self._started.pop(old)
        return True

    def ready(self, io: str) -> bool:
        """Whether the set for ``io`` has come back (taking it now waits for nothing)."""
        fut = self._pending.get(io)
        return fut is not None and fut.done()

    def take_set(self, io: str) -> DrawnSet | None:
        """The set drawn ahead for ``io``, with the reference's outputs when the helper ran it;
        None: nothing pending, not host-only, the helper died, or the inputs function failed
        there (drawn in place, it reports its own error)."""
        fut = self._pending.pop(io, None)
        if fut is None:
            return None
        try:
            kind, drawn = cloudpickle.loads(fut.result())
        except Exception:  # noqa: BLE001 - the helper died: start afresh next time
            self.close()
            return None
        return _take_set(drawn) if kind == "ok" and drawn is not None else None

    def take_recent(self, io: str, max_age_s: float) -> DrawnSet | None:
        """:meth:`take_set` for a set whose draw began at most ``max_age_s`` ago (an older one
        is left pending: a :meth:`drop` unlinks it)."""
        started = self._started.get(io)
        if started is None or time.monotonic() - started > max_age_s:
            return None
        return self.take_set(io)

    def waiting(self, io: str) -> bool:
        """Whether a set for ``io`` is still being drawn (taking it now would wait for it)."""
        fut = self._pending.get(io)
        return fut is not None and not fut.done()

    def drop(self) -> None:
        """Forget pending sets (their segments are unlinked when they arrive)."""
        for fut in self._pending.values():
            fut.add_done_callback(_unlink_when_done)
            self._dropped.append(fut)
        self._pending.clear()
        self._dropped = [f for f in self._dropped if not f.done()]

    def close(self, wait_s: float = 5.0) -> None:
        """Stop the helper, first unlinking what it drew (waiting up to ``wait_s`` for it)."""
        self.drop()
        if self._dropped:
            cf.wait(self._dropped, timeout=wait_s)
            self._dropped = []
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            _helpers.discard(self._proc)
            self._proc = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._reader is not None:
            self._reader.shutdown(wait=False, cancel_futures=True)
            self._reader = None


def serve(fd: int, parent: int | None = None) -> None:
    """The helper's loop: draw a set per request on socket ``fd`` until it closes."""
    if parent is not None:
        _die_with(parent)
    os.nice(10)  # background work: the worker's launches come first on a busy host
    conn = Connection(socket.socket(fileno=fd).detach())
    while True:
        try:
            owner, job = cloudpickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return
        try:
            fn, reference, outputs = cloudpickle.loads(job)
            reply: tuple[str, Any] = ("ok", _draw_into_shared_memory(fn, owner, reference,
                                                                     outputs))
        except BaseException as exc:  # noqa: BLE001 - the worker draws again and reports it
            reply = ("error", f"{type(exc).__name__}: {exc}")
        conn.send_bytes(cloudpickle.dumps(reply))


def _die_with(parent: int) -> None:
    """Exit when the worker ``parent`` does, even from inside a stuck ``inputs()`` (issue 15):
    the socket's closing is noticed only between requests. The worker starts the helper from
    its main thread, so on Linux the kernel may kill it with its parent (``PR_SET_PDEATHSIG``),
    besides the watch of the parent id (:mod:`.parent_death`)."""
    from jupyter_ktune.runner.parent_death import exit_with_parent

    exit_with_parent(parent, kernel_signal=True)


def abandon() -> None:
    """In a worker about to exit abruptly: kill its helpers, unlink the segments it owns.

    The worker exits with ``os._exit`` when its notebook dies; without this, a set drawn ahead
    stayed in /dev/shm until another client started (issue 15).
    """
    for proc in list(_helpers):
        try:
            proc.kill()
            proc.wait(timeout=2)
        except Exception:  # noqa: BLE001, S110 - best effort on the way out
            pass
    unlink_own()


def _unlink_when_done(fut: cf.Future) -> None:
    try:
        kind, drawn = cloudpickle.loads(fut.result())
    except Exception:  # noqa: BLE001 - nothing was left in shared memory
        return
    if kind == "ok" and drawn:
        _take_set(drawn)
