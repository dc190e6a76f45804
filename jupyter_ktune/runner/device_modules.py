"""Which device array modules (torch, CuPy, JAX) a cell's inputs function or reference uses.

Two decisions hang on it. Where a function runs: one that uses a device array API runs in the
worker, which owns the device, never in the input helper (:mod:`.inputs_ahead`), whose GPU work
would land inside the worker's timed runs. And what the worker imports ahead: a reference's
device module is imported on a thread from the cell's start, beside the backend's own imports,
instead of inside the first run.

A function names a module through its globals or closure (``torch`` imported in the notebook) or
through an ``import`` in its own body, as Kernel Tuner's convolution reference does
(``import torch`` under a ``try``). The body's imports are read from the code's names: an
``import torch.nn.functional as F`` or ``from cupyx.scipy import signal`` puts the dotted module
in ``co_names``. Before this module read them, such a reference was taken for a host one and ran
its torch ``conv2d`` on the GPU inside the helper, beside the worker's timing.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import threading
import types
from typing import Any

#: top-level names of the device array packages -> the package the worker imports for them
DEVICE_PACKAGES = {"torch": "torch", "cupy": "cupy", "cupyx": "cupy", "jax": "jax",
                   "jaxlib": "jax"}
_ahead: list[threading.Thread] = []  # the worker's imports ahead (import_ahead), in order
IMPORTED_AHEAD: list[tuple[str, bool]] = []  # (package, whether its import succeeded)


def _code_names(code: types.CodeType) -> set[str]:
    names: set[str] = set()
    stack = [code]
    while stack:  # nested functions, comprehensions and lambdas carry their own names
        c = stack.pop()
        names.update(c.co_names)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return names


def device_modules(fn: Any) -> set[str] | None:
    """The device packages ``fn`` uses (``{"torch"}``), empty for a host-only function; None
    when there is no code to read (a callable object): the caller then assumes the device."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    names = _code_names(code)
    found = {DEVICE_PACKAGES[n.split(".")[0]] for n in names
             if n.split(".")[0] in DEVICE_PACKAGES}  # the body's own imports
    glb = getattr(fn, "__globals__", {})
    values = [glb[n] for n in names if n in glb]
    with contextlib.suppress(TypeError, ValueError):  # a builtin or C function has no closure
        values += list(inspect.getclosurevars(fn).nonlocals.values())
    for v in values:
        mod = v.__name__ if isinstance(v, types.ModuleType) else getattr(v, "__module__", "")
        top = (mod or "").split(".")[0]
        if top in DEVICE_PACKAGES:
            found.add(DEVICE_PACKAGES[top])
    return found


def uses_device_arrays(fn: Any) -> bool:
    """Whether ``fn`` uses a device array module (or cannot be read): it runs in the worker."""
    found = device_modules(fn)
    return found is None or bool(found)


def import_ahead(packages: Any) -> list[str]:
    """In the worker: import ``packages`` (device package names) on a thread, now. Returns the
    ones it started. Any later ``import`` of the same package waits for this one under Python's
    module lock, so the reference's own import finds it done or joins it midway."""
    wanted = [p for p in dict.fromkeys(packages or ()) if p in DEVICE_PACKAGES.values()]
    if not wanted:
        return []

    def run() -> None:
        for name in wanted:
            try:
                importlib.import_module(name)
                IMPORTED_AHEAD.append((name, True))
            except BaseException:  # noqa: BLE001 - the reference's own import reports it
                IMPORTED_AHEAD.append((name, False))

    thread = threading.Thread(target=run, name="ktune-reference-imports", daemon=True)
    _ahead.append(thread)
    thread.start()
    return wanted


def join_ahead() -> None:
    """Wait for the imports started ahead: before a request that runs user code or times."""
    while _ahead:
        _ahead.pop(0).join()
