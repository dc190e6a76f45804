"""Template arguments of a CUDA C++ kernel, and tunables where C++ wants a literal.

Published kernels are templates over an element type as often as over sizes
(``template <typename T> __global__ void rmsnorm(T* out, const T* in, ...)``). A type parameter
takes, in this order: a ``// ktune: T = float`` line; the dtype of the input passed where the
kernel takes a ``T*`` (float32 -> ``float``, float16 -> ``__half``, bfloat16 ->
``__nv_bfloat16``, int32 -> ``int`` ...); the template's default. Integer parameters are
tunables, or keep their default.

``#pragma unroll N`` takes an integral constant expression that the preprocessor does not
expand, so a tunable there that reaches the kernel as a ``-D`` macro is undefined to the
compiler; :func:`literal_pragmas` writes the value into the pragma instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from jupyter_ktune.errors import CellError
from jupyter_ktune.problem_key import inputs_key
from jupyter_ktune.spec import KernelSpec

#: C++ element type for a NumPy dtype name (``ml_dtypes`` names for bfloat16 and fp8).
CTYPE_OF_DTYPE = {
    "float32": "float", "float64": "double", "float16": "__half", "bfloat16": "__nv_bfloat16",
    "float8_e4m3fn": "__nv_fp8_e4m3", "float8_e5m2": "__nv_fp8_e5m2",
    "int8": "signed char", "uint8": "unsigned char", "int16": "short",
    "uint16": "unsigned short", "int32": "int", "uint32": "unsigned int",
    "int64": "long long", "uint64": "unsigned long long", "bool": "bool",
}
#: NumPy type of a by-value scalar whose C++ type is one of the element types above.
NUMPY_OF_CTYPE: dict[str, type] = {"__half": np.float16, "half": np.float16,
                                   "signed char": np.int8}

_HEADERS = {"__half": "cuda_fp16.h", "__nv_bfloat16": "cuda_bf16.h", "__nv_fp8_e4m3": "cuda_fp8.h",
            "__nv_fp8_e5m2": "cuda_fp8.h"}


def type_headers(ctypes: Iterable[str]) -> str:
    """``#include`` lines for the CUDA headers that define these element types."""
    wanted = dict.fromkeys(_HEADERS[t] for t in ctypes if t in _HEADERS)
    return "".join(f"#include <{h}>\n" for h in wanted)


_kinds: dict[str, dict[str, str]] = {}  # inputs function's code hash -> name: dtype or ""


def input_kinds(spec: KernelSpec, line: int | None, why: str) -> dict[str, str]:
    """Every name the inputs return, with its array's dtype name ("" for a scalar); the
    inputs function is called once per inputs function (``why`` says what for, in an error)."""
    if spec.inputs is None:
        return {}
    key = inputs_key(spec.inputs)
    if key not in _kinds:
        try:
            args = spec.inputs()
        except Exception as exc:  # noqa: BLE001 - the user's function
            raise CellError(f"the inputs function failed while reading {why}: "
                            f"{type(exc).__name__}: {exc}", line=line) from None
        _kinds[key] = {k: v.dtype.name if isinstance(v, np.ndarray) else ""
                       for k, v in dict(args).items()}
    return _kinds[key]


def type_arguments(spec: KernelSpec, sig: Any,
                   host_args: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The C++ type of each type template parameter (see the module docstring)."""
    for name, (_, line) in spec.types.items():
        if name not in sig.template_types:
            have = ", ".join(sig.template_types) or "none"
            raise CellError(f"'{name} = ...' names no type template parameter of {spec.name} "
                            f"(its type parameters: {have})", line=line,
                            fix="Name a typename parameter of the kernel's template.")
    out: dict[str, str] = {}
    for t in sig.template_types:
        if t in spec.types:
            out[t] = spec.types[t][0]
            continue
        users = [p.name for p in sig.params if p.pointer and p.ctype == t]
        if users:
            dtypes = ({k: v.dtype.name for k, v in host_args.items()
                       if isinstance(v, np.ndarray)} if host_args is not None
                      else input_kinds(spec, sig.template_line, "the dtypes of template types"))
            dtype = next((dtypes[u] for u in users if dtypes.get(u)), None)
            if dtype in CTYPE_OF_DTYPE:
                out[t] = CTYPE_OF_DTYPE[dtype]
                continue
            if dtype is not None:
                raise CellError(f"template type {t} of {spec.name}: the input '{users[0]}' is "
                                f"{dtype}, which has no C++ element type here",
                                line=sig.template_line, fix=f"Give it: // ktune: {t} = float")
        if t in sig.template_defaults:
            out[t] = sig.template_defaults[t]
            continue
        by_value = [p.name for p in sig.params if not p.pointer and p.ctype == t]
        if by_value and not users:  # a number, or a class (a CuTe shape, stride, layout)
            raise CellError(f"template type {t} of {spec.name} is the type of parameter "
                            f"{by_value[0]}, passed by value, and nothing gives it: the inputs "
                            "give arrays and scalars, which cannot build a class (a CuTe "
                            "shape, stride or layout; the static report can build it)",
                            line=sig.template_line,
                            fix=f"If {t} is a number, give it: // ktune: {t} = float. If it "
                                "is a class, launch the kernel from a __global__ wrapper in "
                                f"the cell that takes pointers and ints and builds the {t}, "
                                "and name the wrapper on the magic line.")
        whence = (f"the inputs give no array for {', '.join(users)}" if users
                  else f"no kernel parameter is a {t}*")
        raise CellError(f"template type {t} of {spec.name} has no type ({whence})",
                        line=sig.template_line,
                        fix=f"Give it: // ktune: {t} = float  (or return arrays from inputs)")
    return out


def template_arguments(sig: Any, cxx: Mapping[str, int], types: Mapping[str, str]) -> list[str]:
    """The arguments of ``kernel<...>``, in order: types, tunables, or the defaults."""
    out = []
    for name in sig.template_params:
        value = types.get(name, cxx.get(name))
        out.append(str(value) if value is not None else sig.template_defaults[name])
    return out


def substitute(text: str, values: Mapping[str, Any]) -> str:
    """Replace whole-word template parameter names in ``text`` (a parameter list)."""
    if not values:
        return text
    words = "|".join(re.escape(k) for k in sorted(values, key=len, reverse=True))
    return re.sub(rf"\b(?:{words})\b", lambda m: str(values[m.group(0)]), text)


_PRAGMA = re.compile(r"^(?P<head>\s*#\s*pragma\s+unroll\s+)(?P<arg>[^\n]+?)\s*$", re.M)


def literal_pragmas(source: str, macros: Mapping[str, Any]) -> str:
    """``#pragma unroll FACTOR`` -> ``#pragma unroll 4`` for the tunables given as macros."""
    if not macros:
        return source
    return _PRAGMA.sub(lambda m: m.group("head") + substitute(m.group("arg"), macros), source)
