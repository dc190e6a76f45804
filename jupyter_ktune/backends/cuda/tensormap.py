"""TMA descriptors for CUDA cells: built per config on the host, passed to the kernel by value.

A Hopper kernel that loads tiles with the copy engine (``cp.async.bulk.tensor``) takes a
128-byte tensor map per operand, ``const __grid_constant__ kt::TensorMap A_map`` (the type is in
``ktune_hopper.cuh``; ``CUtensorMap`` works too). The map holds the array's device address,
shape and strides and the tile ("box") shape and swizzle, so it can only be made in the worker,
once the array is on the device and the config is known. The cell's inputs function says what
to build with :func:`tma`, in the place of the argument::

    def inputs():
        ...
        return dict(A=a, B=b, C=c, M=m, N=n, K=k,
                    A_map=jupyter_ktune.tma("A", box=("BM", "SWIZZLE // 2"), swizzle="SWIZZLE"),
                    B_map=jupyter_ktune.tma("B", box=("BN", "SWIZZLE // 2"), swizzle="SWIZZLE"))

Box sizes and the swizzle are ints or Python expressions over the tunables and the scalar
inputs, like the cell's ``grid =`` line, so one inputs function serves every slider setting. The
box is given in NumPy order (rows, then columns); the driver wants the innermost dimension
first, and :func:`tma_args` reverses it.

The encoding is the driver's own ``cuTensorMapEncodeTiled``, called through ctypes on
``libcuda`` (the C signature and enum values are the driver API's, so nothing depends on how a
Python binding spells its arguments); its 128 bytes travel as a one-element NumPy array of a
128-byte void dtype, which CuPy passes by value (it copies ``itemsize`` bytes from the array's
data for a size-1 ``numpy.ndarray`` argument). The driver call is behind :class:`Encoder`, so
the argument packing is tested on any machine with a fake one.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from jupyter_ktune.errors import CellError
from jupyter_ktune.spec import Expr

#: Kernel parameter types that take a TMA descriptor (``const`` is stripped before this test).
TENSORMAP_TYPES = frozenset({"kt::TensorMap", "::kt::TensorMap", "CUtensorMap", "TensorMap"})
DESCRIPTOR_BYTES = 128
DESCRIPTOR_DTYPE = np.dtype((np.void, DESCRIPTOR_BYTES))

# The driver API's enums (cuda.h, CUDA 12/13): CUtensorMapDataType, ...Swizzle, ...L2promotion.
DATA_TYPES = {"uint8": 0, "uint16": 1, "uint32": 2, "int32": 3, "uint64": 4, "int64": 5,
              "float16": 6, "float32": 7, "float64": 8, "bfloat16": 9}
# Same-width stand-ins: TMA copies bytes, so 8-bit floats and signed ints move as unsigned.
_BY_WIDTH = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}
SWIZZLES = {0: 0, 32: 1, 64: 2, 128: 3}
L2_PROMOTIONS = {0: 0, 64: 1, 128: 2, 256: 3}
INTERLEAVE_NONE = 0
OOB_FILL_NONE = 0
MAX_BOX = 256


@dataclass(frozen=True)
class Tma:
    """What descriptor to build for one kernel parameter: see :func:`tma`."""

    array: str
    box: tuple[int | str, ...]
    swizzle: int | str = 0
    l2_promotion: int = 256


def tma(array: str, box: Sequence[int | str], swizzle: int | str = 0, *,
        l2_promotion: int = 256) -> Tma:
    """Ask for a TMA descriptor of input ``array`` with tiles of shape ``box``.

    Parameters
    ----------
    array
        Name of the input array (a pointer parameter of the kernel) the map describes.
    box
        Tile shape in NumPy order (outermost first), one entry per array dimension: ints or
        expressions over the tunables and scalar inputs, e.g. ``("BM", "SWIZZLE // 2")``.
    swizzle
        Shared-memory swizzle span in bytes (0, 32, 64, 128) or an expression such as
        ``"SWIZZLE"``; the innermost box row must fit in it.
    l2_promotion
        L2 promotion size in bytes: 0, 64, 128 or 256.

    Examples
    --------
    >>> tma("A", box=("BM", 64), swizzle=128)
    Tma(array='A', box=('BM', 64), swizzle=128, l2_promotion=256)
    """
    if not isinstance(array, str) or not array.isidentifier():
        raise TypeError(f"[ktune] tma() takes the input array's name as a string, not {array!r}")
    if isinstance(box, (str, int)) or not 1 <= len(box) <= 5:
        raise ValueError(f"[ktune] tma({array!r}): box needs 1 to 5 sizes, one per dimension, "
                         f"got {box!r}")
    if l2_promotion not in L2_PROMOTIONS:
        raise ValueError(f"[ktune] tma({array!r}): l2_promotion must be one of "
                         f"{sorted(L2_PROMOTIONS)} bytes, got {l2_promotion!r}")
    return Tma(array, tuple(box), swizzle, l2_promotion)


#: (shape, strides in bytes, dtype) of the array a map describes, NumPy order.
Layout = tuple[tuple[int, ...], tuple[int, ...], np.dtype]


@dataclass(frozen=True)
class TmaArgs:
    """The arguments of ``cuTensorMapEncodeTiled`` after the address, innermost dimension first."""

    data_type: int
    global_dim: tuple[int, ...]
    global_strides: tuple[int, ...]  # bytes, rank - 1 entries
    box_dim: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int

    @property
    def rank(self) -> int:
        """Number of dimensions."""
        return len(self.global_dim)


def is_tensormap_param(ctype: str) -> bool:
    """Whether a kernel parameter's type (qualifiers stripped) takes a TMA descriptor."""
    return re.sub(r"\b__grid_constant__\b", " ", ctype).strip() in TENSORMAP_TYPES


def data_type(dtype: np.dtype) -> int:
    """CUtensorMapDataType of a NumPy dtype (bfloat16 from ml_dtypes included)."""
    name = np.dtype(dtype).name
    if name in DATA_TYPES:
        return DATA_TYPES[name]
    by_width = _BY_WIDTH.get(np.dtype(dtype).itemsize)
    if by_width is None:
        raise ValueError(f"[ktune] TMA cannot copy elements of {name}")
    return DATA_TYPES[by_width]


def _value(item: int | str, env: Mapping[str, Any], what: str, line: int | None) -> int:
    value = Expr(item, line, what)(env) if isinstance(item, str) else item
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise CellError(f"{what} = {item!r} gave {value!r}, not an integer", line=line,
                        fix="Give box sizes and the swizzle as ints or integer expressions.")
    return int(value)


def tma_args(spec: Tma, layout: Layout, env: Mapping[str, Any],
             line: int | None = None) -> TmaArgs:
    """Check ``spec`` against the array's layout and this config; pack the driver's arguments.

    ``env`` holds the tunables (as the kernel sees them) and the scalar inputs. Every rule the
    driver checks is checked here first, so a bad box is one line with the fix, not
    ``CUDA_ERROR_INVALID_VALUE``.
    """
    name = f"tma({spec.array!r})"
    shape, strides_all, dtype = layout
    ndim = len(shape)
    if ndim != len(spec.box):
        raise CellError(f"{name}: the box has {len(spec.box)} sizes but {spec.array} has "
                        f"{ndim} dimensions", line=line, fix="Give one box size per dimension.")
    box = [_value(b, env, f"{name} box", line) for b in spec.box]
    swizzle = _value(spec.swizzle, env, f"{name} swizzle", line)
    item = np.dtype(dtype).itemsize
    if swizzle not in SWIZZLES:
        raise CellError(f"{name}: swizzle {swizzle} is not 0, 32, 64 or 128 bytes", line=line,
                        fix="Use a swizzle span in bytes: SWIZZLE in [none, 32B, 64B, 128B].")
    if strides_all[-1] != item:
        raise CellError(f"{name}: the innermost dimension of {spec.array} is not contiguous",
                        line=line, fix="Pass a C-contiguous array (np.ascontiguousarray).")
    bad = [b for b in box if not 1 <= b <= MAX_BOX]
    if bad:
        raise CellError(f"{name}: box size {bad[0]} is outside 1..{MAX_BOX}", line=line,
                        fix=f"Keep every box size in 1..{MAX_BOX}; load bigger tiles in pieces.")
    inner = box[-1] * item
    if inner % 16:
        raise CellError(f"{name}: the box's rows are {inner} bytes, not a multiple of 16",
                        line=line, fix="Make the innermost box size * element bytes a multiple "
                        "of 16.")
    if swizzle and inner > swizzle:
        raise CellError(f"{name}: box rows of {inner} bytes do not fit the {swizzle}B swizzle",
                        line=line, fix=f"Use an innermost box of at most {swizzle // item} "
                        "elements, or a wider swizzle.")
    strides = strides_all[-2::-1]
    bad_strides = [s for s in strides if s % 16 or not 0 < s < 1 << 40]
    if bad_strides:
        raise CellError(f"{name}: stride {bad_strides[0]} bytes of {spec.array} is not a "
                        "positive multiple of 16", line=line,
                        fix="Pad the rows to a multiple of 16 bytes.")
    return TmaArgs(data_type=data_type(dtype), global_dim=tuple(int(d) for d in shape[::-1]),
                   global_strides=tuple(int(s) for s in strides), box_dim=tuple(box[::-1]),
                   element_strides=(1,) * ndim, interleave=INTERLEAVE_NONE,
                   swizzle=SWIZZLES[swizzle], l2_promotion=L2_PROMOTIONS[spec.l2_promotion],
                   oob_fill=OOB_FILL_NONE)


class Encoder(Protocol):
    """Something that turns a device address and :class:`TmaArgs` into the 128 bytes."""

    def encode(self, address: int, args: TmaArgs) -> bytes:
        """Return the descriptor, or raise RuntimeError with the driver's status."""
        ...


class LibcudaEncoder:
    """``cuTensorMapEncodeTiled`` from the CUDA driver library, through ctypes."""

    def __init__(self, lib: Any = None):
        self._lib = lib  # loaded at the first encode: a bad map is reported before that

    def _function(self) -> Any:
        if self._lib is None:
            try:
                self._lib = ctypes.CDLL("libcuda.so.1")
            except OSError as exc:
                raise RuntimeError("[ktune] cannot build TMA descriptors here: no CUDA driver "
                                   f"(libcuda.so.1: {exc}); TMA kernels run on a GPU machine "
                                   "only") from None
        return self._lib.cuTensorMapEncodeTiled

    def encode(self, address: int, args: TmaArgs) -> bytes:
        """Call the driver; the C signature is the driver API's."""
        u64, u32 = ctypes.c_uint64, ctypes.c_uint32
        out = (u64 * 16)()
        rank = args.rank
        status = self._function()(out, ctypes.c_int(args.data_type), u32(rank),
                          ctypes.c_void_p(address), (u64 * rank)(*args.global_dim),
                          (u64 * max(rank - 1, 1))(*args.global_strides),
                          (u32 * rank)(*args.box_dim), (u32 * rank)(*args.element_strides),
                          ctypes.c_int(args.interleave), ctypes.c_int(args.swizzle),
                          ctypes.c_int(args.l2_promotion), ctypes.c_int(args.oob_fill))
        if status != 0:
            raise RuntimeError(f"[ktune] cuTensorMapEncodeTiled returned CUresult {status} for "
                               f"{args}")
        return bytes(out)


def descriptor(spec: Tma, layout: Layout, address: int, env: Mapping[str, Any],
               encoder: Encoder, line: int | None = None) -> np.ndarray:
    """Build the kernel argument: the descriptor as a one-element 128-byte void array."""
    if address % 16:
        raise CellError(f"tma({spec.array!r}): the device address is not 16-byte aligned",
                        line=line, fix="Pass the whole array, not an offset view.")
    raw = encoder.encode(address, tma_args(spec, layout, env, line))
    if len(raw) != DESCRIPTOR_BYTES:
        raise RuntimeError(f"[ktune] a tensor map is {DESCRIPTOR_BYTES} bytes, got {len(raw)}")
    return np.frombuffer(raw, dtype=DESCRIPTOR_DTYPE).copy()


def tensormap_value(name: str, value: Any, host_args: Mapping[str, Any],
                    devices: Mapping[str, Any], env: Mapping[str, Any], encoder: Encoder,
                    line: int | None) -> np.ndarray:
    """Build the descriptor for kernel parameter ``name`` from the inputs' :class:`Tma`.

    ``devices`` maps pointer parameters to their device arrays (CuPy), whose address the map
    holds; ``host_args`` gives the array's shape, strides and dtype.
    """
    if not isinstance(value, Tma):
        raise CellError(f"kernel parameter '{name}' is a TMA descriptor but the inputs give a "
                        f"{type(value).__name__}", line=line,
                        fix=f"Return {name}=jupyter_ktune.tma('A', box=(BM, BK), "
                            "swizzle='SWIZZLE') from the inputs function.")
    if value.array not in devices or not isinstance(host_args.get(value.array), np.ndarray):
        raise CellError(f"tma({value.array!r}) for '{name}' names no array parameter of the "
                        "kernel", line=line,
                        fix="Name one of the kernel's pointer parameters: "
                            f"{', '.join(devices) or '(none)'}.")
    dev = devices[value.array]
    # shape and strides of the device copy (what the copy engine walks), the host's dtype
    # (a bfloat16 array travels as a uint16 view of the same width)
    layout = (tuple(dev.shape), tuple(dev.strides), host_args[value.array].dtype)
    return descriptor(value, layout, int(dev.data.ptr), env, encoder, line)
