"""Which device array packages (torch, CuPy, JAX) a cell's inputs function or reference uses.

The input helper (:mod:`.inputs_ahead`) draws the next random set while the worker times, and
runs a host reference on it. A function that uses a device array API must not run there: its
GPU work would land inside the worker's timed runs. It runs in the worker, which owns the
device, and the helper sees no device at all (:func:`~.inputs_ahead.helper_env`).

A function names a package through its globals or closure (``torch`` imported in the notebook)
or through an ``import`` in its own body, as Kernel Tuner's convolution cell's reference does
(``import torch`` under a ``try``). The body's imports are read from the code's names: an
``import torch.nn.functional as F`` or ``from cupyx.scipy import signal`` puts the dotted module
in ``co_names``. Before this module read them, such a reference was taken for a host one and
the helper ran its torch ``conv2d`` on the GPU for every set of a sweep, beside the timing.
"""

from __future__ import annotations

import contextlib
import inspect
import types
from typing import Any

#: top-level names of the device array packages -> the package
DEVICE_PACKAGES = {"torch": "torch", "cupy": "cupy", "cupyx": "cupy", "jax": "jax",
                   "jaxlib": "jax"}


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
