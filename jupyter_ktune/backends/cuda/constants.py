"""``__constant__`` memory filled from the inputs (Kernel Tuner's ``cmem_args``).

A kernel that reads a ``__constant__`` array (a convolution filter, a lookup table) gets it from
the inputs dict under the symbol's name: ``inputs()`` returns ``filter=np.array(...)`` and the
bytes are copied into the module's symbol when the variant is bound, before it runs and is
verified. A ``__constant__`` symbol that the kernel reads and the inputs do not name would
silently read zeros, so it is an error on its declaration line, on a GPU and (from the inputs'
names) without one. One that nothing in the cell names besides its declaration (a table left
from an earlier version, a header's leftover) needs no value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from jupyter_ktune.errors import CellError
from jupyter_ktune.spec import KernelSpec

_DECL = re.compile(r"\b__constant__\b(?P<decl>[^;=]*?)\b(?P<name>[A-Za-z_]\w*)\s*"
                   r"(?P<dims>(?:\[[^\]]*\]\s*)*)(?:(?P<init>=)[^;]*)?;")


@dataclass(frozen=True)
class ConstantSymbol:
    """One ``__constant__`` declaration: its name, cell line, and whether it is initialised."""

    name: str
    line: int
    initialised: bool
    nbytes: int | None = None  # from the declaration, when its type and sizes are literal
    read: bool = True  # named anywhere in the cell besides its declaration


#: bytes of the scalar types a ``__constant__`` array is usually declared with
_TYPE_BYTES = {"float": 4, "double": 8, "int": 4, "unsigned": 4, "unsigned int": 4, "char": 1,
               "unsigned char": 1, "signed char": 1, "short": 2, "unsigned short": 2,
               "long long": 8, "unsigned long long": 8, "__half": 2, "half": 2,
               "__nv_bfloat16": 2, "int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2,
               "int32_t": 4, "uint32_t": 4, "int64_t": 8, "uint64_t": 8, "float2": 8,
               "float4": 16, "int2": 8, "int4": 16}


def declared_bytes(decl: str, dims: str) -> int | None:
    """Size of ``<decl> name<dims>`` when the type is a known scalar and the sizes literals."""
    words = [w for w in decl.split() if w not in ("static", "const", "volatile", "__device__")]
    size = _TYPE_BYTES.get(" ".join(words))
    for dim in re.findall(r"\[([^\]]*)\]", dims):
        if size is None or not dim.strip().isdigit():
            return None
        size *= int(dim)
    return size


def constant_symbols(spec: KernelSpec, stripped: str) -> tuple[ConstantSymbol, ...]:
    """The ``__constant__`` declarations of the (comment-stripped) cell source."""
    return tuple(ConstantSymbol(m.group("name"),
                                spec.body_line + stripped.count("\n", 0, m.start()),
                                m.group("init") is not None,
                                declared_bytes(m.group("decl"), m.group("dims") or ""),
                                _named_elsewhere(stripped, m))
                 for m in _DECL.finditer(stripped))


def _named_elsewhere(stripped: str, decl: re.Match[str]) -> bool:
    """Whether the declared name appears in the source outside its own declaration."""
    rest = stripped[:decl.start()] + " " + stripped[decl.end():]
    return re.search(rf"\b{re.escape(decl.group('name'))}\b", rest) is not None


def check_names(spec: KernelSpec, symbols: tuple[ConstantSymbol, ...],
                names: Mapping[str, Any]) -> None:
    """Every uninitialised ``__constant__`` symbol the kernel reads needs an input of its
    name."""
    for sym in symbols:
        if not sym.initialised and sym.read and sym.name not in names:
            given = ", ".join(names) or "nothing"
            raise CellError(f"__constant__ {sym.name} has no value: the inputs function returns "
                            f"no '{sym.name}' (it returns {given}), so the kernel would read "
                            "zeros", line=sym.line,
                            fix=f"Return {sym.name}=np.array(...) from the inputs function; its "
                            "bytes are copied into the symbol before the kernel runs.")


def fill(module: Any, spec: KernelSpec, symbols: tuple[ConstantSymbol, ...],
         host_args: Mapping[str, Any]) -> None:
    """Copy each ``__constant__`` symbol's input into the loaded module (CuPy ``get_global``)."""
    check_names(spec, symbols, host_args)
    for sym in symbols:
        if sym.name not in host_args:
            continue
        data = np.ascontiguousarray(host_args[sym.name])
        ptr = module.get_global(sym.name)
        # CuPy's get_global wraps the symbol's address with a size of 0, so the size comes from
        # the declaration; a declaration whose size is not literal is trusted to fit
        size = sym.nbytes if sym.nbytes is not None else data.nbytes
        if data.nbytes > size:
            raise CellError(f"input '{sym.name}' has {data.nbytes} bytes, but __constant__ "
                            f"{sym.name} holds {size}", line=sym.line,
                            fix="Return an array of the symbol's size and type.")
        ptr.copy_from_host(data.ctypes.data, data.nbytes)
