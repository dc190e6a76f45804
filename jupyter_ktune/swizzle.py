"""Shared-memory swizzles, bank maps and tile ordering, in NumPy.

This is the Python mirror of ``jupyter_ktune/include/ktune.cuh``: the same
XOR swizzles that Hopper's TMA writes and WGMMA reads
(``CU_TENSOR_MAP_SWIZZLE_32B/64B/128B``, CUTLASS ``Swizzle<B,4,3>``), and the
same grouped program-id order as Triton's matmul tutorial. The tests check
that both give the same value for every input. On top of that it models the
32 shared-memory banks, so the panel can draw which bank each element of a
tile lands in and how many ways a warp's access conflicts.

Examples
--------
>>> from jupyter_ktune.swizzle import Swizzle, conflicts, swizzle_offset
>>> swizzle_offset(128, Swizzle.B128)
144
>>> conflicts(64, 64, 2, "none", access="column", vector_bytes=16)
8
>>> conflicts(64, 64, 2, "128B", access="column", vector_bytes=16)
1
"""

from __future__ import annotations

import enum
from typing import Literal

import numpy as np

__all__ = [
    "Swizzle",
    "bank_map",
    "conflicts",
    "grouped_tile",
    "swizzle_index",
    "swizzle_offset",
]

_NUM_BANKS = 32
_BANK_BYTES = 4
_WARP = 32
# Widest access of one thread; a swizzle never splits such a chunk.
_CHUNK_BYTES = 16
_ELEM_SIZES = (1, 2, 4, 8, 16)

Access = Literal["row", "column"]


class Swizzle(enum.Enum):
    """Swizzle mode of a shared-memory tile, named by its span in bytes.

    ``B128`` is ``CU_TENSOR_MAP_SWIZZLE_128B`` (CUTLASS ``Swizzle<3,4,3>``),
    ``B64`` is ``Swizzle<2,4,3>``, ``B32`` is ``Swizzle<1,4,3>``.

    Examples
    --------
    >>> Swizzle.parse("128B")
    <Swizzle.B128: 128>
    >>> Swizzle.parse(0)
    <Swizzle.NONE: 0>
    """

    NONE = 0
    B32 = 32
    B64 = 64
    B128 = 128

    @property
    def bits(self) -> int:
        """Number of 128-byte-row bits XORed into the 16-byte chunk index."""
        return {0: 0, 32: 1, 64: 2, 128: 3}[self.value]

    @property
    def span(self) -> int:
        """Bytes after which the pattern repeats (0 for ``NONE``)."""
        return self.value * 8

    @classmethod
    def parse(cls, mode: Swizzle | str | int) -> Swizzle:
        """Return the mode named by an Enum member, a string or a byte count.

        Parameters
        ----------
        mode : Swizzle, str or int
            ``Swizzle.B64``, ``"none"``, ``"32B"``, ``"64b"``, ``"128"``,
            ``0``, ``32``, ``64`` or ``128``.

        Returns
        -------
        Swizzle

        Raises
        ------
        TypeError
            If ``mode`` is not a Swizzle, str or int.
        ValueError
            If ``mode`` names no swizzle mode; the message lists those allowed.

        Examples
        --------
        >>> Swizzle.parse("none")
        <Swizzle.NONE: 0>
        >>> Swizzle.parse(64)
        <Swizzle.B64: 64>
        """
        if isinstance(mode, cls):
            return mode
        if isinstance(mode, bool) or not isinstance(mode, (str, int, np.integer)):
            msg = f"[ktune] swizzle mode must be a Swizzle, str or int, not {type(mode).__name__}"
            raise TypeError(msg)
        if isinstance(mode, str):
            text = mode.strip().lower()
            if text == "none":
                return cls.NONE
            value = text[:-1] if text.endswith("b") else text
            if value.isdigit() and int(value) in _BY_VALUE:
                return _BY_VALUE[int(value)]
        elif int(mode) in _BY_VALUE:
            return _BY_VALUE[int(mode)]
        msg = (
            f"[ktune] unknown swizzle mode {mode!r}; "
            "use one of 'none', '32B', '64B', '128B' (or 0, 32, 64, 128)"
        )
        raise ValueError(msg)


_BY_VALUE = {m.value: m for m in Swizzle}


def _as_offsets(values: object, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if not np.issubdtype(arr.dtype, np.integer):
        msg = f"[ktune] {name} must be integers, not {arr.dtype}"
        raise TypeError(msg)
    if np.any(arr < 0):
        msg = f"[ktune] {name} must be non-negative"
        raise ValueError(msg)
    return arr.astype(np.int64)


def _swizzle(offsets: np.ndarray, mode: Swizzle) -> np.ndarray:
    # CUTLASS Swizzle<B,4,3>: XOR row bits [7, 7+B) into chunk bits [4, 4+B).
    yyy_mask = ((1 << mode.bits) - 1) << 7
    return offsets ^ ((offsets & yyy_mask) >> 3)


def swizzle_offset(byte_offset: int | np.ndarray, mode: Swizzle | str | int) -> int | np.ndarray:
    """Swizzle byte offsets within a shared-memory tile, as ``kt::swizzle``.

    Parameters
    ----------
    byte_offset : int or array_like of int
        Non-negative byte offsets from the start of the tile (which should be
        aligned to ``mode.span`` bytes, as TMA requires).
    mode : Swizzle, str or int
        Anything :meth:`Swizzle.parse` accepts.

    Returns
    -------
    int or numpy.ndarray
        The swizzled offsets, an int for a scalar input, else an int64 array
        of the input's shape.

    Examples
    --------
    >>> swizzle_offset(128, "128B")  # row 1, chunk 0 -> chunk 1
    144
    >>> swizzle_offset([0, 128, 256, 384], "32B").tolist()
    [0, 144, 256, 400]
    """
    swz = Swizzle.parse(mode)
    out = _swizzle(_as_offsets(byte_offset, "byte_offset"), swz)
    return int(out) if out.ndim == 0 else out


def _check_elem_bytes(elem_bytes: int) -> None:
    if elem_bytes not in _ELEM_SIZES:
        msg = f"[ktune] elem_bytes must be one of {_ELEM_SIZES}, not {elem_bytes!r}"
        raise ValueError(msg)


def swizzle_index(
    row: int | np.ndarray,
    col: int | np.ndarray,
    row_elems: int,
    elem_bytes: int,
    mode: Swizzle | str | int,
) -> int | np.ndarray:
    """Swizzled element index of (row, col) in a row-major tile.

    Mirrors ``kt::swizzle_index<BYTES, T>(row, col, row_elems)`` with
    ``elem_bytes == sizeof(T)``.

    Parameters
    ----------
    row, col : int or array_like of int
        Element coordinates (broadcast together).
    row_elems : int
        Elements per row of the tile.
    elem_bytes : int
        Element size: 1, 2, 4, 8 or 16.
    mode : Swizzle, str or int
        Anything :meth:`Swizzle.parse` accepts.

    Returns
    -------
    int or numpy.ndarray

    Examples
    --------
    >>> swizzle_index(1, 0, 64, 2, "128B")  # fp16, 128-byte rows
    72
    """
    _check_elem_bytes(elem_bytes)
    r = _as_offsets(row, "row")
    c = _as_offsets(col, "col")
    out = _swizzle((r * row_elems + c) * elem_bytes, Swizzle.parse(mode)) // elem_bytes
    return int(out) if out.ndim == 0 else out


def bank_map(rows: int, cols: int, elem_bytes: int, mode: Swizzle | str | int) -> np.ndarray:
    """Bank (0..31) of each element of a row-major tile after swizzling.

    An element wider than 4 bytes spans several banks; its first one is
    given (the others follow it).

    Parameters
    ----------
    rows, cols : int
        Tile shape in elements.
    elem_bytes : int
        Element size: 1, 2, 4, 8 or 16.
    mode : Swizzle, str or int
        Anything :meth:`Swizzle.parse` accepts.

    Returns
    -------
    numpy.ndarray
        int64 array of shape ``(rows, cols)``.

    Examples
    --------
    >>> bank_map(4, 64, 2, "none")[:, 0].tolist()  # 128-byte rows: one bank
    [0, 0, 0, 0]
    >>> bank_map(4, 64, 2, "128B")[:, 0].tolist()
    [0, 4, 8, 12]
    """
    _check_elem_bytes(elem_bytes)
    offsets = np.arange(rows * cols, dtype=np.int64).reshape(rows, cols) * elem_bytes
    return (_swizzle(offsets, Swizzle.parse(mode)) // _BANK_BYTES) % _NUM_BANKS


def _warp_words(
    rows: int, cols: int, elem_bytes: int, access: Access, vector_bytes: int
) -> np.ndarray:
    """Unswizzled byte offsets of each thread's vector, one row per warp access.

    The tile is seen as a grid of vectors; "row" hands consecutive vectors to
    consecutive threads in row-major order, "column" in column-major order.
    """
    vec_cols = cols * elem_bytes // vector_bytes
    vr, vc = np.meshgrid(np.arange(rows), np.arange(vec_cols), indexing="ij")
    if access == "column":
        vr, vc = vr.T, vc.T
    starts = (vr.ravel() * cols * elem_bytes + vc.ravel() * vector_bytes).astype(np.int64)
    pad = -len(starts) % _WARP
    if pad:
        # A last, partial warp: idle lanes repeat its first lane's address,
        # which the hardware serves by broadcast, adding no conflict.
        first = starts[len(starts) - len(starts) % _WARP]
        starts = np.concatenate([starts, np.full(pad, first)])
    return starts.reshape(-1, _WARP)


def _phase_degree(byte_offsets: np.ndarray, vector_bytes: int) -> int:
    """Most distinct 4-byte words any one bank serves for one phase."""
    words_per_vec = max(vector_bytes // _BANK_BYTES, 1)
    words = (byte_offsets[:, None] // _BANK_BYTES + np.arange(words_per_vec)).ravel()
    unique = np.unique(words)  # same word = broadcast, served once
    return int(np.bincount(unique % _NUM_BANKS, minlength=_NUM_BANKS).max())


def conflicts(
    rows: int,
    cols: int,
    elem_bytes: int,
    mode: Swizzle | str | int,
    access: Access = "row",
    vector_bytes: int | None = None,
) -> int:
    """Worst n-way bank conflict of a warp reading a swizzled tile.

    Each of 32 threads reads one vector of ``vector_bytes``; consecutive
    threads take consecutive vectors along a row (``"row"``, continuing on the
    next row) or down a column (``"column"``, continuing in the next column
    of vectors). Every warp access needed to cover the tile is modelled and
    the worst is returned.

    The model: a bank serves one 4-byte word per wavefront, so the degree is
    the largest number of distinct words addressed in one bank (threads that
    read the same word get it by broadcast). 8-byte accesses are served a
    half warp (16 threads) at a time and 16-byte accesses a quarter warp
    (8 threads) at a time; the degree is the worst such phase. 1 means
    conflict-free: a warp of 16-byte loads still takes 4 wavefronts, but no
    more.

    Parameters
    ----------
    rows, cols : int
        Tile shape in elements, row-major.
    elem_bytes : int
        Element size: 1, 2, 4, 8 or 16.
    mode : Swizzle, str or int
        Anything :meth:`Swizzle.parse` accepts.
    access : {"row", "column"}
        Direction in which consecutive threads walk the tile.
    vector_bytes : int, optional
        Bytes each thread reads: a multiple of ``elem_bytes`` up to 16 that
        divides the row. Defaults to ``elem_bytes``.

    Returns
    -------
    int
        The conflict degree, 1 (none) to 32.

    Raises
    ------
    ValueError
        For an unknown ``access``, or sizes that do not fit together.

    Examples
    --------
    >>> conflicts(64, 64, 2, "none", access="column")  # 128-byte rows
    32
    >>> conflicts(64, 64, 2, "128B", access="column")
    4
    >>> conflicts(64, 64, 2, "none", access="row", vector_bytes=16)
    1
    """
    _check_elem_bytes(elem_bytes)
    vec = elem_bytes if vector_bytes is None else vector_bytes
    if access not in ("row", "column"):
        msg = f"[ktune] access must be 'row' or 'column', not {access!r}"
        raise ValueError(msg)
    if vec not in _ELEM_SIZES or vec % elem_bytes or (cols * elem_bytes) % vec:
        msg = (
            f"[ktune] vector_bytes={vec!r} must be 1, 2, 4, 8 or 16, a multiple of "
            f"elem_bytes={elem_bytes} and divide a row of {cols * elem_bytes} bytes"
        )
        raise ValueError(msg)
    if rows < 1 or cols < 1:
        msg = f"[ktune] tile shape must be positive, not {rows}x{cols}"
        raise ValueError(msg)
    swz = Swizzle.parse(mode)
    # Threads served together: 32 for words or less, 16 for 8 bytes, 8 for 16.
    phase = _WARP * _BANK_BYTES // max(vec, _BANK_BYTES)
    warps = _swizzle(_warp_words(rows, cols, elem_bytes, access, vec), swz)
    return max(
        _phase_degree(w[start : start + phase], vec)
        for w in warps
        for start in range(0, _WARP, phase)
    )


def grouped_tile(pid: int, num_pid_m: int, num_pid_n: int, group_m: int) -> tuple[int, int]:
    """Output tile ``(pid_m, pid_n)`` of program ``pid`` in GROUP_M order.

    Mirrors ``kt::grouped_tile`` and Triton's matmul tutorial: programs walk
    down ``group_m`` tile rows before moving one tile column right, so those
    running together share operands in L2. ``group_m <= 1`` is row-major.

    Parameters
    ----------
    pid : int
        Linear program id, ``0 <= pid < num_pid_m * num_pid_n``.
    num_pid_m, num_pid_n : int
        Tiles along M and N.
    group_m : int
        Tile rows per super-group.

    Returns
    -------
    tuple of int
        ``(pid_m, pid_n)``.

    Examples
    --------
    >>> [grouped_tile(p, 4, 4, 2) for p in range(4)]
    [(0, 0), (1, 0), (0, 1), (1, 1)]
    >>> grouped_tile(5, 4, 4, 1)
    (1, 1)
    """
    if group_m <= 1:
        return pid // num_pid_n, pid % num_pid_n
    num_pid_in_group = group_m * num_pid_n
    first_pid_m = pid // num_pid_in_group * group_m
    group_size_m = min(num_pid_m - first_pid_m, group_m)
    in_group = pid % num_pid_in_group
    return first_pid_m + in_group % group_size_m, in_group // group_size_m
