"""Gaps of Triton's interpreter that published kernels hit on a CPU, patched in the worker only.

Each patch is applied only when this worker interprets and only when the installed Triton
shows the gap (checked by behaviour, not by version number), so a Triton that fixes it, or a GPU
worker (triton 3.6 on the H200), runs unchanged:

- float scalar arguments reach the kernel as Python floats, so ``eps.to(tl.float32)`` (Liger's
  norms) fails with "'float' object has no attribute 'to'": ``_implicit_cvt`` wraps ints and
  bools as tensors, and here floats too, as fp32 (what the compiler makes of them);
- libdevice functions bound by name (``from triton.language.extra.libdevice import tanh``,
  xformers' ``libdevice_find("rsqrt")``) are empty stubs for the interpreter and return None:
  :func:`bind_libdevice` rebinds those names in a kernel module to NumPy versions;
- ``triton.runtime.driver.active`` has no driver without a GPU, so module-level code that asks
  for ``get_current_target()`` (to choose a config list) fails: :func:`install_target_driver`
  answers with the target the cell is compiled for (sm_90 by default).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np


def patch_float_scalars() -> None:
    """Wrap float kernel arguments as fp32 scalars under the interpreter (see the docstring)."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return
    original = interpreter._implicit_cvt
    if getattr(original, "_ktune", False) or not isinstance(original(1.5), float):
        return  # patched already, or this Triton wraps floats itself

    def implicit_cvt(arg: Any) -> Any:
        if isinstance(arg, float):
            handle = interpreter.TensorHandle(np.array([arg], dtype=np.float32), tl.float32)
            return tl.tensor(handle, tl.float32)
        return original(arg)

    implicit_cvt._ktune = True  # type: ignore[attr-defined]
    interpreter._implicit_cvt = implicit_cvt


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[x.dtype])(x)


# libdevice names -> NumPy; the result keeps the first tensor argument's dtype.
_NUMPY: dict[str, Callable[..., Any]] = {
    "tanh": np.tanh, "rsqrt": lambda x: 1 / np.sqrt(x), "sqrt": np.sqrt, "exp": np.exp,
    "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10,
    "log1p": np.log1p, "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin,
    "acos": np.arccos, "atan": np.arctan, "atan2": np.arctan2, "sinh": np.sinh,
    "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "erf": _erf, "pow": np.power, "fmax": np.fmax, "fmin": np.fmin, "floor": np.floor,
    "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint, "round": np.round, "abs": np.abs,
    "fabs": np.abs, "isnan": np.isnan, "isinf": np.isinf, "fast_expf": np.exp,
    "fast_logf": np.log, "fast_tanhf": np.tanh, "exp10": lambda x: np.power(10, x),
    "fdividef": np.divide, "div_rn": np.divide, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "copysign": np.copysign, "fmod": np.fmod, "hypot": np.hypot, "cbrt": np.cbrt,
}


def _numpy_version(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **_: Any) -> Any:
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle

        first = next((a for a in args if isinstance(a, tl.tensor)), None)
        data = [a.handle.data if isinstance(a, tl.tensor) else getattr(a, "value", a)
                for a in args]
        out = np.asarray(fn(*data))
        if first is None:
            return out
        if out.dtype != np.bool_:
            out = out.astype(first.handle.data.dtype, copy=False)
            ty = first.type
        else:
            ty = tl.block_type(tl.int1, first.shape) if first.shape else tl.int1
        return tl.tensor(TensorHandle(out, ty.scalar if hasattr(ty, "scalar") else ty), ty)

    call.__name__ = name
    call._ktune_libdevice = True  # type: ignore[attr-defined]
    return call


def _is_libdevice_stub(value: Any) -> bool:
    module = getattr(value, "__module__", "") or ""
    return callable(value) and module.startswith("triton.language.extra")


def bind_libdevice(namespace: dict[str, Any]) -> list[str]:
    """Rebind the libdevice functions a kernel module holds by name to NumPy versions.

    Returns the names rebound. A module attribute such as ``libdevice`` (``libdevice.tanh``) is
    left alone: the interpreter resolves those through the module at call time.
    """
    rebound = []
    for key, value in list(namespace.items()):
        if not _is_libdevice_stub(value):
            continue
        name = re.sub(r"^_+", "", getattr(value, "__name__", key))
        fn = _NUMPY.get(name)
        if fn is not None:
            namespace[key] = _numpy_version(name, fn)
            rebound.append(key)
    return rebound


def asks_for_target(source: str) -> bool:
    """Whether the cell's own text asks Triton's active driver (``get_current_target()``).

    Only then is the target driver installed: packages that a cell imports (fla's
    ``fla.utils``) probe the driver too, and on a CPU they fall back by themselves when it
    fails; told "cuda" instead, they go on to ask torch for a CUDA device and fail.
    """
    return "get_current_target" in source or "driver.active" in source


def install_target_driver(arch: str = "sm_90") -> None:
    """Let ``triton.runtime.driver.active`` answer for ``arch`` when no driver is active."""
    from triton.runtime import driver

    try:
        driver.active  # noqa: B018 - a GPU (or a fixed Triton) answers itself
        return
    except RuntimeError:
        pass
    from jupyter_ktune.backends.triton.jit_warm import CompileOnlyDriver, arch_number

    try:
        number = arch_number(arch)
    except ValueError:
        number = 90
    driver.set_active(CompileOnlyDriver(number))  # type: ignore[arg-type]
