"""A cell's first input set, drawn while the worker opens the device (issue 33).

In a fresh notebook the first Triton cell's worker spends seconds before it can run anything:
torch's import (Triton's driver imports it), the kernel's package, the device context. Only then
did the run call the inputs function and the reference, one after the other: for fla's 4096^2
matmul another 1.0-1.4 s of the first result (inputs 0.6-1.0 s, a NumPy reference 0.4-0.5 s, on
an H100 host, aad7023:bench/results/first_minute/2026-12-06-0903). Now, at the cell's start, the
notebook reads the inputs function, the reference and the outputs off the magic line
(:func:`~jupyter_ktune.spec.line_functions`) and the worker hands them to its input helper
(:mod:`.inputs_ahead`) before it opens the device: the set and its reference are made in the
helper's process beside the imports, and the cell's first run takes them.

The rules:

* Only a cold worker asks the helper (the cell's backend not opened yet: its imports take
  seconds). A warm worker draws sooner itself than a helper that still has to start. A cold
  CUDA worker too asks the helper, although CuPy opens in 0.2-0.5 s: drawn in the worker
  instead, Kernel Tuner's vector add's 10 M-element set took 1,013 ms against 662 ms from
  the helper, and the convolution's 104 ms against 4 ms (an H100, in turns,
  a40d9b1:bench/results/first_minute_ab/2026-12-07-0731): NumPy's draw holds the worker's GIL beside
  the device's opening, while the helper draws on another core.
* Only what the helper draws anyway: a host set, and a reference it may run
  (:func:`~.inputs_ahead.helper_reference`; a reference that uses torch, CuPy or JAX runs in
  the worker, :mod:`.device_modules`). The notebook pickles the functions and the worker
  forwards them unread: unpickled there, a function's globals could import a backend before
  the worker has picked its mode (GPU or interpreter).
* The set is the cell's only if the notebook says so (:func:`claim_first_set`, before the
  worker's first run): the functions and outputs of the spec it runs pickle to the very bytes
  sent at the start (a function rebound since, a closure or a global changed, another cell:
  not the same bytes, not taken). One claim per job: any other run leaves it.
* The run takes the set if it was drawn at most ``AHEAD_MAX_AGE_S`` ago, waiting for it when
  the helper is still drawing it (``input_sets.first_set_waits``): the helper began first, and
  a second draw in the worker beside it only doubled the CPU work (Kernel Tuner's vector add:
  2.48 s against 2.66 s to the first result, median of 5 in turns on an H100,
  aad7023:bench/results/first_minute_ab/2026-12-07-0900). An older set is dropped and the run draws
  its own. The run checks it as any other set (``checked_inputs``).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from typing import Any

from jupyter_ktune.runner.device_modules import uses_device_arrays
from jupyter_ktune.runner.inputs_ahead import draw_job, helper_reference
from jupyter_ktune.spec import KernelSpec, line_functions

REQUEST_TIMEOUT_S = 30.0  # the worker only forwards the job: milliseconds, or a worker start
#: a larger pickle (functions that close over big arrays) is not sent: the claim would pickle
#: it again, on the first run's path, to compare it
MAX_JOB_BYTES = 16 << 20
_sent: dict[int, tuple[int | None, str]] = {}  # id(worker) -> (its pid, the job's key)
_sent_lock = threading.Lock()


def _job(inputs: Any, reference: Any, outputs: tuple[str, ...]) -> tuple[bytes, str]:
    job = draw_job(inputs, reference, outputs)
    return job, "first set " + hashlib.sha256(job).hexdigest()


def send_first_set(worker: Any, backend: str, line: str, namespace: Mapping[str, Any]) -> bool:
    """Notebook side, at a cell's start: have a cold ``worker`` draw the set its first run will
    need (returns whether it took the job). Never raises: a line the parse will refuse, an
    unpicklable function or a busy worker leave the run to draw its own set."""
    read = line_functions(line, namespace)
    if read is None:
        return False
    inputs, reference, outputs = read
    if uses_device_arrays(inputs):  # made on the device: the worker's, where the device is
        return False
    try:
        job, key = _job(inputs, helper_reference(reference), outputs)
        if len(job) > MAX_JOB_BYTES:
            return False
        kind, value = worker.request(("first_set", backend, key, job), REQUEST_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - the run draws its own set and reports any error
        return False
    if kind != "ok" or value is not True:
        return False
    with _sent_lock:
        _sent[id(worker)] = (worker.pid, key)
    return True


def claim_first_set(worker: Any, spec: KernelSpec, config: Any = None) -> None:
    """Notebook side, before ``spec``'s first run: if the set drawn at a cell's start was drawn
    by ``spec``'s very functions, in this worker, it becomes the set of ``spec``'s problem
    (``io_key``), which the run then takes. Once per job, matched or not. With ``config`` (a
    panel's first), the worker starts that config's build meanwhile, on a GPU."""
    with _sent_lock:
        sent = _sent.pop(id(worker), None)
    key = None
    if sent is not None and sent[0] == worker.pid and spec.inputs is not None:
        try:
            _, mine = _job(spec.inputs, helper_reference(spec.reference, spec.options.verify),
                           spec.outputs)
            key = mine if mine == sent[1] else None
        except Exception:  # noqa: BLE001 - not claimed: the run draws its own set
            key = None
    if key is None and config is None:
        return
    try:
        worker.request(("before_first_run", spec, config, key), REQUEST_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - the run draws and builds as it always did
        return
