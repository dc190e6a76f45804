"""When a CUDA worker warms torch for its on-device checks: not beside a first run that never
needs it.

The CUDA backend checks outputs, inputs and guards on the GPU with torch where it is installed
(:func:`~jupyter_ktune.backends.torch_interop.start_warming`), and until torch is warm it checks
on the host with the same rule. It used to start that warm-up as the device opened, so a cell's
first run shared the worker with torch's import. The import holds the GIL for seconds, a
host-bound timing taken beside it is taken again once the warm-up is done
(``timed.quiet_host``), and so the first result of a CUDA cell that never touches torch (Kernel
Tuner's vector add, the quickstart's scale, with NumPy references) waited for torch's import
and CUDA start: 1.3-2.5 s on an H100 host, against the issue's 2 s for a CUDA cell.

Now the backend only asks for the warm-up (``torch_interop.warm_when_idle``), and the worker
starts it:

- at once, when the cell's inputs function or reference names torch: the worker imports torch
  for it anyway, and the warm-up's head start overlaps the rest. The notebook reads those
  functions off the magic line at the cell's start (:func:`line_uses_torch`) and says so with
  its device request, so the warm-up starts as the device opens (:func:`start_asked`), as it
  did for every CUDA cell before: started at the first spec request instead, a fraction of a
  second later, Kernel Tuner's convolution (torch's ``conv2d`` reference) began its first run
  beside torch's import, and its "device" phase read 661 ms against 95 ms, verify 265 against
  35 ms (an H100, a40d9b1:bench/results/first_minute_ab/2026-12-07-0731). The first spec request
  (:func:`for_spec`) still starts it for a spec whose functions were not on a line (a panel
  of a spec built in code);
- otherwise once the worker has sat :data:`IDLE_S` without a request (:func:`after_reply`): a
  notebook opened and read, a panel left alone; never between a sweep's requests.
"""

from __future__ import annotations

import sys
from typing import Any

#: how long the worker waits for a next request before it counts as idle and warms torch; a
#: panel's start sends its requests within about 0.8 s of each other (its widgets are built
#: between the first-set claim and the first run on a 2-core machine)
IDLE_S = 1.5
#: read from ``sys.modules``, never imported here: it imports NumPy, which the worker's start
#: does not pay (a worker that never opened a CUDA device has nothing asked)
INTEROP = "jupyter_ktune.backends.torch_interop"


def _asked() -> Any:
    """``torch_interop`` when it is imported and a warm-up is asked for and not started."""
    interop = sys.modules.get(INTEROP)
    return interop if interop is not None and interop.warm_asked() else None


def uses_torch(*fns: Any) -> bool:
    """Whether any of ``fns`` (None skipped) uses torch, or cannot be read (a callable object:
    taken as torch's)."""
    from jupyter_ktune.runner.device_modules import device_modules

    found = [device_modules(f) for f in fns if f is not None]
    return any(f is None or "torch" in f for f in found)


def line_uses_torch(line: str, namespace: Any) -> bool:
    """Notebook side, at a cell's start: whether the inputs function or reference the magic
    line names uses torch. Never raises: False for a line the parse will refuse (it says why)
    or functions that cannot be read, and the device opens as it would without the flag."""
    from jupyter_ktune.spec import line_functions

    try:
        read = line_functions(line, namespace)
        return read is not None and uses_torch(read[0], read[1])
    except Exception:  # noqa: BLE001 - a hint only: the cell's own run reports what is wrong
        return False


def start_asked() -> bool:
    """Start the asked-for warm-up now (the notebook said the cell uses torch). Whether it was
    started."""
    interop = _asked()
    if interop is None:
        return False
    interop.start_warming()
    return True


def for_spec(spec: Any) -> bool:
    """Start the asked-for warm-up now where ``spec``'s inputs function or reference uses torch
    (or cannot be read: a callable object). Whether it was started."""
    if _asked() is None or not uses_torch(getattr(spec, "inputs", None),
                                          getattr(spec, "reference", None)):
        return False
    return start_asked()


def after_reply(kind: str, conn: Any) -> bool:
    """After the worker sent the reply to a ``kind`` request: start the asked-for warm-up if
    no request comes within :data:`IDLE_S` (``conn.poll`` returns at once when one does, so a
    busy worker waits for nothing). Whether it was started.

    Not after a run's reply at once: Autotune pressed at the first result then swept while
    torch imported, and its first result came 1.74 s after the press against 0.68 s before
    (Kernel Tuner's vector add on an H100,
    d1330a7:bench/results/first_minute_ab/2026-12-07-0433)."""
    interop = _asked()
    if interop is None or conn.poll(IDLE_S):
        return False
    interop.start_warming()
    return True
