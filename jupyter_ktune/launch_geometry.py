"""The launch geometry a cell's ``grid``, ``block`` and ``smem`` give, checked before a launch.

Before issue 34 a grid was passed on as ``int(g)`` for whatever the expression gave: ``'abc'``
failed inside Triton with "invalid literal for int()", a 4-D grid with an AssertionError,
``2.5`` was truncated to 2 programs (the outputs then read as never written), a grid of 0 or
less ran nothing (never written, too) and ``BLOCK * 10**30`` ran the Triton interpreter until
the timeout, whose reason blamed the kernel's loops. Each is now one line on the expression's
cell line, before anything runs: CUDA's limits (a grid of at most 2**31-1 x 65535 x 65535
blocks, at most 1024 threads per block) hold for the CUDA C++ and Triton backends alike.

The same checks run when the cell is parsed, for expressions that name nothing (``--block 0``,
``smem = -1``), and in the worker for those that depend on the config and the inputs.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from jupyter_ktune.errors import CellError

GRID_LIMITS = (2**31 - 1, 65535, 65535)  # blocks (Triton: programs) per grid dimension
BLOCK_LIMITS = (1024, 1024, 64)  # threads per block dimension
MAX_THREADS = 1024  # threads per block, all dimensions together
_FIX = {"grid": "Make grid a whole number of blocks (programs), or a tuple of up to 3, e.g. "
                "cdiv(n, BLOCK).",
        "block": "Make block a number of threads, or a tuple of up to 3, e.g. BLOCK or (32, 8)."}


def _whole(v: Any) -> int | None:
    """``v`` as an int when it is a whole number (an int, a NumPy integer, 4.0), else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real) and math.isfinite(v) and float(v).is_integer():
        return int(v)
    return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def dims(value: Any, expr: Any, what: str) -> tuple[int, ...]:
    """The sizes ``what`` (``"grid"`` or ``"block"``) = ``expr`` gave, checked: whole numbers,
    1 to 3 of them, each at least 1 and within CUDA's limits. ``expr`` is the cell's
    :class:`~jupyter_ktune.directives.Expr` (its text and line go into the error)."""
    text, line = getattr(expr, "text", str(expr)), getattr(expr, "line", None)
    vals = tuple(value) if isinstance(value, tuple | list) else (value,)

    def bad(why: str, fix: str = _FIX[what]) -> CellError:
        return CellError(f"{what} = {text.strip()} gave {_shown(value)}, {why}", line=line,
                         fix=fix)

    if not 1 <= len(vals) <= 3:
        raise bad(f"{len(vals)} dimensions; CUDA launches have 1 to 3",
                  f"Fold dimensions together, e.g. (a * b, c, d); {_FIX[what]}")
    ints = tuple(_whole(v) for v in vals)
    for v, i in zip(vals, ints, strict=True):
        if i is None and isinstance(v, numbers.Real) and not isinstance(v, bool):
            raise bad(f"{v!r} is not a whole number",
                      "Round up with cdiv(n, BLOCK) or use //, not /.")
        if i is None:
            raise bad(f"a {type(v).__name__}, not a number")
    if min(ints) < 1:  # type: ignore[type-var]
        raise bad("and every size must be at least 1 (a launch of 0 runs nothing)",
                  "Check the expression for this config and these inputs.")
    limits = GRID_LIMITS if what == "grid" else BLOCK_LIMITS
    over = [i for i, (n, cap) in enumerate(zip(ints, limits, strict=False)) if n > cap]  # type: ignore[operator]
    if over:
        caps = " x ".join(f"{c:,}" for c in limits[:len(ints)])
        raise bad(f"beyond CUDA's limit of {caps} {'blocks' if what == 'grid' else 'threads'}",
                  "Check the expression: a grid counts blocks (programs), not threads or bytes."
                  if what == "grid" else _FIX[what])
    if what == "block" and math.prod(ints) > MAX_THREADS:  # type: ignore[arg-type]
        raise bad(f"{math.prod(ints):,} threads; a block has at most {MAX_THREADS}")  # type: ignore[arg-type]
    return ints  # type: ignore[return-value]


def smem_bytes(value: Any, expr: Any) -> int:
    """The dynamic shared memory ``smem = expr`` gave: a whole number of bytes, at least 0."""
    n = _whole(value)
    if n is None or n < 0:
        text, line = getattr(expr, "text", str(expr)), getattr(expr, "line", None)
        raise CellError(f"smem = {text.strip()} gave {_shown(value)}, not a number of bytes "
                        "(0 or more)", line=line,
                        fix="Give the dynamic shared memory in bytes, e.g. smem = BM * BK * 4.")
    return n


def check_constant(what: str, expr: Any) -> None:
    """At parse time: check ``grid``/``block``/``smem`` when the expression names nothing
    (``--block 0``, ``smem = -1``), so a constant mistake is refused before any run."""
    if expr is None or expr.names():
        return
    value = expr({})
    if what == "smem":
        smem_bytes(value, expr)
    elif what in ("grid", "block"):
        dims(value, expr, what)
