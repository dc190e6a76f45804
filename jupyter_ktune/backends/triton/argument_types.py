"""The argument types every compile of a Triton cell shares, read from one input set.

Tunables are never runtime arguments of a Triton kernel (they are constexprs or launch options),
so the types, the 16-byte alignment and the inputs' constexpr values do not depend on the
config: one input set gives them for every compile of the cell. They are read where an input
set already is (the device worker's first run: ``user_code.any_inputs``) or from
one ``inputs()`` call, and handed to each compile-pool process (``tuning/pool_warm.py``).

Handed on, the arrays of an input set would travel with them: two 4096^2 fp16 operands and
the output, 96 MB pickled for every compile sent. A compile reads an array's dtype, shape and
strides only (a placeholder's dtype, an output's dtype, a heuristic's ``x.stride(0)``), never
its values, so :func:`light` puts in each array's place one that pickles as its recipe: a torch
tensor as a ``meta`` tensor (no storage), a NumPy array as an uninitialised one of the same
dtype, shape and strides (pages the compile never touches are never committed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from jupyter_ktune.backends.triton import static as ts
from jupyter_ktune.backends.triton.config_arguments import (
    is_descriptor,
    not_a_descriptor,
)
from jupyter_ktune.backends.triton.decorators import param_default, unwrap
from jupyter_ktune.errors import CellError

#: (types by parameter, the 16-divisible parameters, the inputs' values of the kernel's params)
Hints = tuple[dict[str, str], set[str], dict[str, Any]]


def argument_types(sig: Any, kernel: Any, host: Mapping[str, Any],
                   cxx: Mapping[str, Any]) -> Hints:
    """Argument types and 16-byte alignment of ``kernel``'s runtime parameters for the input
    set ``host`` (``cxx``: a config's values, for a runtime parameter a tunable gives), and the
    inputs' values of its parameters (its constexprs' and what a heuristic may read)."""
    types: dict[str, str] = {}
    aligned: set[str] = set()
    for p in sig.runtime:
        value = host.get(p, cxx.get(p))
        if value is None:
            value = param_default(unwrap(kernel).jit, p)
        if value is None and p in host:
            types[p] = "constexpr"  # a None argument (fla's cu_seqlens=None) specializes
            continue
        if value is None:
            raise CellError(f"kernel parameter '{p}' has no value", line=sig.line,
                            fix=f"Return '{p}' from the inputs function.")
        if p in sig.descriptors and not is_descriptor(value):
            raise not_a_descriptor(p, sig.descriptors[p], value)
        if is_descriptor(value):  # compiled through the JIT's warm-up only (.jit_warm)
            types[p] = "tensordesc"
            continue
        types[p] = ts.arg_type(p, value)
        if ts.divisible(value):
            aligned.add(p)
    given = {p: v for p, v in host.items() if p in sig.params}
    return types, aligned, given


def light(hints: Hints | None) -> Hints | None:
    """``hints`` with each array of the input set in :func:`stand_in`'s form, to be pickled."""
    if hints is None:
        return None
    types, aligned, given = hints
    return types, aligned, {p: stand_in(v) for p, v in given.items()}


def stand_in(value: Any) -> Any:
    """What a compile reads of ``value`` without its data: a torch tensor as a ``meta``
    tensor of its dtype, shape and strides; a NumPy array as an :class:`UnfilledArray` of
    its dtype, shape and strides; anything else (numbers, None, a tensor descriptor) as it is."""
    if isinstance(value, np.ndarray):
        if value.ndim and all(s >= 0 for s in value.strides):
            return unfilled(value.shape, value.dtype, value.strides)
        return value
    if hasattr(value, "data_ptr") and hasattr(value, "stride") and hasattr(value, "new_empty"):
        import torch  # the value is a tensor: torch is imported already

        return torch.empty_strided(tuple(value.shape), tuple(value.stride()), dtype=value.dtype,
                                   device="meta")
    return value


class UnfilledArray(np.ndarray):
    """An uninitialised NumPy array that pickles as its recipe (dtype, shape, byte strides),
    not its bytes: unpickled, it is one again. Its pages are committed only where written."""

    def __reduce__(self) -> tuple:
        return unfilled, (self.shape, self.dtype, self.strides)


def unfilled(shape: tuple[int, ...], dtype: np.dtype, strides: tuple[int, ...]) -> UnfilledArray:
    """An :class:`UnfilledArray` of ``dtype``, ``shape`` and ``strides`` (in bytes, >= 0)."""
    dtype = np.dtype(dtype)
    span = 0 if 0 in shape else dtype.itemsize + sum(
        (n - 1) * s for n, s in zip(shape, strides, strict=True))
    buffer = np.empty(max(span, 1), np.uint8)
    return np.ndarray(tuple(shape), dtype, buffer=buffer, strides=tuple(strides)).view(
        UnfilledArray)
