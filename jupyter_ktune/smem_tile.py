"""The shared-memory tile a cell declares, for the panel's swizzle bank map.

``// ktune: smem_tile = (TILE, TILE, float32)`` says the kernel stages a row-major ``TILE`` x
``TILE`` tile of fp32 in shared memory, each thread reading one element at a time;
``smem_tile = (BM, BK, bfloat16, vector=8)`` says a bf16 tile read 8 elements (16 bytes) per
thread, as ``ldmatrix`` or a ``uint4`` load does. Rows, columns and ``vector`` are expressions
over the tunables, so the map follows the sliders; ``swizzle=EXPR`` names the swizzle mode when
the tunable is not called ``SWIZZLE`` (its value: ``none``, ``32B``, ``64B``, ``128B`` or the
byte span). The map and its conflict degrees are computed by :mod:`jupyter_ktune.swizzle`'s model,
on the notebook's side, so they need no device.

Examples
--------
>>> tile = parse_smem_tile("TILE, TILE, float32", line=2)
>>> shape = tile.shape({"TILE": 32, "SWIZZLE": "none"})
>>> shape.conflicts()
{'row': 1, 'column': 32}
>>> tile.shape({"TILE": 32, "SWIZZLE": "128B"}).conflicts()["column"]
4
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jupyter_ktune.directives import Expr
from jupyter_ktune.errors import CellError
from jupyter_ktune.expr import free_names
from jupyter_ktune.swizzle import Swizzle, conflicts

#: the tunable names read as the swizzle mode when the statement has no ``swizzle=``
SWIZZLE_NAMES = ("SWIZZLE", "SWIZZLE_MODE", "SMEM_SWIZZLE")
FIX = ("Write smem_tile = (ROWS, COLS, DTYPE), e.g. smem_tile = (TILE, TILE, float32), or "
       "smem_tile = (BM, BK, bfloat16, vector=8) for 16-byte reads.")
#: bytes per element, by every spelling a cell may use (numpy, torch/Triton/JAX, CUDA C++)
ELEM_BYTES = {
    **dict.fromkeys(("float64", "double", "int64", "uint64", "fp64", "long"), 8),
    **dict.fromkeys(("float32", "float", "fp32", "f32", "tf32", "int32", "uint32", "int",
                     "unsigned"), 4),
    **dict.fromkeys(("float16", "half", "__half", "fp16", "f16", "bfloat16", "bf16",
                     "__nv_bfloat16", "nv_bfloat16", "int16", "uint16", "short"), 2),
    **dict.fromkeys(("float8_e4m3fn", "float8_e5m2", "float8e4nv", "float8e5", "fp8",
                     "fp8e4nv", "fp8e5", "__nv_fp8_e4m3", "__nv_fp8_e5m2", "e4m3", "e5m2",
                     "int8", "uint8", "char", "signed char", "unsigned char"), 1),
}
_PREFIXES = ("tl.", "torch.", "jnp.", "np.", "numpy.", "jax.numpy.", "cutlass::")


def elem_bytes_of(dtype: str, types: Mapping[str, tuple[str, int | None]] | None = None) -> int:
    """Bytes per element of a dtype name (``float32``, ``bf16``, ``__half``, ``tl.float16`` ...),
    or of a template type the cell declares (``T = __nv_bfloat16``); KeyError if unknown."""
    name = dtype.strip()
    if types and name in types:
        name = types[name][0].strip()
    for prefix in _PREFIXES:
        name = name.removeprefix(prefix)
    return ELEM_BYTES[name]


@dataclass(frozen=True)
class TileShape:
    """One config's tile: rows x cols elements of ``elem_bytes``, read ``vector_bytes`` a thread."""

    rows: int
    cols: int
    elem_bytes: int
    vector_bytes: int
    dtype: str
    swizzle: Swizzle

    def conflicts(self) -> dict[str, int]:
        """The n-way bank conflict of a warp reading along a row and down a column."""
        return {access: conflicts(self.rows, self.cols, self.elem_bytes, self.swizzle,
                                  access=access, vector_bytes=self.vector_bytes)
                for access in ("row", "column")}

    def label(self) -> str:
        """``64×64 float32 · 4 B a thread · 128B swizzle``."""
        mode = "no" if self.swizzle is Swizzle.NONE else f"{self.swizzle.value}B"
        return (f"{self.rows}×{self.cols} {self.dtype} · {self.vector_bytes} B a thread · "
                f"{mode} swizzle")


@dataclass(frozen=True)
class SmemTile:
    """The ``smem_tile`` statement: its expressions, the element size, its cell line."""

    rows: Expr
    cols: Expr
    dtype: str
    elem_bytes: int
    vector: Expr | None = None
    swizzle: Expr | None = None
    line: int | None = None

    def names(self) -> set[str]:
        """The names its expressions read (they must all be tunables)."""
        exprs = (self.rows, self.cols, self.vector, self.swizzle)
        return set().union(*(free_names(e._code) for e in exprs if e is not None))

    def shape(self, config: Mapping[str, Any]) -> TileShape:
        """The tile of one config; a CellError on the statement's line when it does not fit."""
        rows, cols = self.rows(config), self.cols(config)
        vector = self.vector(config) if self.vector is not None else 1
        if self.swizzle is not None:
            mode = self.swizzle(config)
        else:
            mode = next((config[n] for n in SWIZZLE_NAMES if n in config), "none")
        for what, v in (("rows", rows), ("cols", cols), ("vector", vector)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise CellError(f"smem_tile: {what} is {v!r} here, not a positive integer",
                                line=self.line, fix=FIX)
        try:
            swizzle = Swizzle.parse(mode)
        except (TypeError, ValueError):
            raise CellError(f"smem_tile: the swizzle mode {mode!r} is not none, 32B, 64B or 128B",
                            line=self.line, fix="Write swizzle=SWIZZLE, a tunable in "
                            "[none, 32B, 64B, 128B].") from None
        vector_bytes = vector * self.elem_bytes
        if vector_bytes not in (1, 2, 4, 8, 16) or (cols * self.elem_bytes) % vector_bytes:
            raise CellError(f"smem_tile: a thread's read of {vector} × {self.elem_bytes} B is "
                            f"not 1, 2, 4, 8 or 16 bytes dividing a {cols * self.elem_bytes}-byte "
                            "row", line=self.line,
                            fix="Give vector= in elements: 16 bytes is vector=4 for fp32.")
        return TileShape(rows, cols, self.elem_bytes, vector_bytes, self.dtype, swizzle)


def parse_smem_tile(args: str, line: int | None, comment: str = "//",
                    types: Mapping[str, tuple[str, int | None]] | None = None) -> SmemTile:
    """Parse the inside of ``smem_tile = (ROWS, COLS, DTYPE[, vector=N][, swizzle=S])``."""
    try:
        call = ast.parse(f"_tile({args})", mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # NUL bytes, deep nesting
        raise CellError(f"cannot read smem_tile = ({args[:80]})", line=line, fix=FIX) from None
    assert isinstance(call, ast.Call)
    keywords = {k.arg: k.value for k in call.keywords}
    unknown = set(keywords) - {"vector", "swizzle"}
    if len(call.args) != 3 or unknown or None in keywords:
        extra = f"; unknown {', '.join(sorted(map(str, unknown)))}" if unknown else ""
        raise CellError(f"smem_tile takes ROWS, COLS, DTYPE and optionally vector=, swizzle= "
                        f"(got '{args}'{extra})", line=line, fix=FIX)
    text = f"_tile({args})"

    def expr(node: ast.expr, what: str) -> Expr:
        return Expr(ast.get_source_segment(text, node) or "", line, f"smem_tile {what}", comment)

    dtype_node = call.args[2]
    dtype = (dtype_node.value if isinstance(dtype_node, ast.Constant)
             and isinstance(dtype_node.value, str) else ast.get_source_segment(text, dtype_node))
    try:
        size = elem_bytes_of(dtype or "", types)
    except KeyError:
        raise CellError(f"smem_tile: unknown element type '{dtype}'", line=line,
                        fix="Name it as numpy or CUDA does: float32, float16, bfloat16, "
                        "float8_e4m3fn, int8, float, __half, __nv_bfloat16.") from None
    return SmemTile(rows=expr(call.args[0], "rows"), cols=expr(call.args[1], "cols"),
                    dtype=dtype or "", elem_bytes=size,
                    vector=expr(keywords["vector"], "vector") if "vector" in keywords else None,
                    swizzle=expr(keywords["swizzle"], "swizzle") if "swizzle" in keywords
                    else None, line=line)
