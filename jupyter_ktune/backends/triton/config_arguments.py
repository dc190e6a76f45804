"""Triton arguments the config shapes: host tensor descriptors and config-sized outputs.

Outputs: a two-pass kernel writes one partial result per block, so its buffer's length is
``cdiv(M, BLOCK)``; ``# ktune: Mid.shape = (cdiv(M, BLOCK),)`` allocates it per config
(:func:`sized_output`), and a reference that takes ``config`` returns that many values.

Descriptors (``triton.tools.tensor_descriptor.TensorDescriptor``):
A TMA kernel takes ``a_desc`` rather than ``a``: a descriptor built on the host over a tensor,
whose block shape is the kernel's tile and so depends on the config. The inputs function
returns descriptors as it would call the kernel (``TensorDescriptor.from_tensor(a, [1, 1])``,
over a NumPy array or a CPU tensor); per config, ktune copies the descriptor's tensor to the
device inside guards like any array, and builds a new descriptor over that copy with the
config's block shape: from the cell's ``# ktune: a_desc.block_shape = [BLOCK_M, BLOCK_K]``, or
left to the kernel's own ``@triton.autotune`` pre-hook (published kernels set
``nargs["a_desc"].block_shape`` there), which ktune runs before each launch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from jupyter_ktune.errors import CellError

_FIELDS = ("base", "shape", "strides", "block_shape")


def is_descriptor(value: Any) -> bool:
    """Whether ``value`` is a host tensor descriptor (by its fields, for Triton 3.6 and 3.9)."""
    return not isinstance(value, np.ndarray) and all(hasattr(value, f) for f in _FIELDS)


def not_a_descriptor(name: str, line: int, value: Any) -> CellError:
    """The kernel uses ``name`` as a descriptor (``name.load(...)`` on ``line``) but the inputs
    give it something else (an array): under Triton's interpreter that failed with "'tensor'
    object has no attribute 'load'", on a GPU with a compile error about pointers."""
    return CellError(f"kernel parameter '{name}' is a tensor descriptor ({name}.load/store on "
                     f"this line) but the inputs give it a {type(value).__name__}", line=line,
                     fix=f"Return a descriptor from the inputs function: {name}="
                         "TensorDescriptor.from_tensor(array, [1, 1]) (from "
                         "triton.tools.tensor_descriptor import TensorDescriptor), with "
                         f"# ktune: {name}.block_shape = [...] for its tile.")


def block_shape(spec: Any, name: str, env: Mapping[str, Any]) -> list[int] | None:
    """The config's block shape for descriptor ``name`` from its directive, or None."""
    expr = spec.block_shapes.get(name)
    if expr is None:
        return None
    value = expr(env)
    if not isinstance(value, list | tuple) or not all(isinstance(v, int | np.integer)
                                                      for v in value):
        raise CellError(f"{name}.block_shape must be a list of ints, got {value!r}",
                        line=expr.line, fix=f"Write # ktune: {name}.block_shape = [BLOCK_M, "
                                            "BLOCK_K].")
    return [int(v) for v in value]


def sized_output(spec: Any, name: str, value: Any, env: Mapping[str, Any]) -> np.ndarray:
    """A fresh host array for output ``name`` at the shape its ``name.shape = ...`` directive
    gives for this config (the dtype of the inputs' array): a kernel that writes one partial
    result per block (FlagGems' two-pass norms) fills all of it, whatever the block size."""
    expr = spec.output_shapes[name]
    shape = expr(env)
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    if not all(isinstance(s, int | np.integer) and s > 0 for s in shape):
        raise CellError(f"{name}.shape must be positive ints, got {shape!r}", line=expr.line,
                        fix=f"Write # ktune: {name}.shape = (cdiv(M, BLOCK),).")
    dtype = getattr(value, "dtype", np.float32)
    dtype = dtype if isinstance(dtype, np.dtype) else np.dtype(str(dtype).removeprefix("torch."))
    return np.empty(tuple(int(s) for s in shape), dtype=dtype)


def rebind(desc: Any, base: Any, block: list[int] | None) -> Any:
    """A new descriptor like ``desc`` over ``base`` (the device copy), with ``block`` if given."""
    shape = list(block if block is not None else desc.block_shape)
    if dataclasses.is_dataclass(desc):
        return dataclasses.replace(desc, base=base, block_shape=shape)
    return type(desc)(base, desc.shape, desc.strides, shape)


@dataclasses.dataclass(frozen=True)
class DescriptorPlaceholder:
    """A descriptor argument of a warm compile (:mod:`.jit_warm`): what Triton specialises on."""

    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    block_shape: tuple[int, ...]
    extra: tuple[tuple[str, Any], ...] = ()  # padding, round_f32_to_tf32 where the Triton has them

    @classmethod
    def of(cls, desc: Any, dtype: str, block: list[int] | None) -> DescriptorPlaceholder:
        """The placeholder of ``desc`` with the config's ``block`` (or its own)."""
        extra = tuple((f.name, getattr(desc, f.name)) for f in dataclasses.fields(desc)
                      if f.name not in _FIELDS) if dataclasses.is_dataclass(desc) else ()
        return cls(dtype, tuple(int(s) for s in desc.shape), tuple(int(s) for s in desc.strides),
                   tuple(block if block is not None else desc.block_shape), extra)

    def build(self, base: Any) -> Any:
        """A real TensorDescriptor over a ``MockTensor`` base, for the JIT's warm-up."""
        from triton.tools.tensor_descriptor import TensorDescriptor

        return TensorDescriptor(base, list(self.shape), list(self.strides),
                                list(self.block_shape), **dict(self.extra))
