"""The ``ktune:`` directives of a cell body: tunables, launch expressions, constraints.

``// ktune: BLOCK in [64, 128]; grid = cdiv(n, BLOCK); require BLOCK <= 1024`` (``#`` in Python
cells). :func:`parse_directives` collects them into :class:`Directives`, which
:func:`jupyter_ktune.api.parse_cell` freezes into a KernelSpec together with the magic line.
Errors name the cell line and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jupyter_ktune.errors import CellError
from jupyter_ktune.expr import free_names
from jupyter_ktune.space import Constraint, Param, compile_expr, eval_expr
from jupyter_ktune.tunable_values import parse_list

_DIRECTIVE = re.compile(r"^\s*(?P<comment>//|#)\s*ktune\s*:\s*(?P<body>.*?)\s*$")
_LAMBDA = re.compile(r"^lambda\s+(?P<meta>[A-Za-z_]\w*)\s*:\s*(?P<body>.+)$", re.S)
_IN_STMT = re.compile(r"^(?P<name>[A-Za-z_]\w*)\s+in\s+(?P<values>.+)$")
_ASSIGN_STMT = re.compile(r"^(?P<key>grid|block|smem|flops|bytes)\s*=\s*(?P<expr>.+)$")
# Triton host-side tensor descriptors: ``a_desc.block_shape = [BLOCK_M, BLOCK_K]`` per config
_BLOCK_SHAPE_STMT = re.compile(r"^(?P<name>[A-Za-z_]\w*)\.block_shape\s*=\s*(?P<expr>.+)$")
# Triton: an output whose size depends on the config (partial sums per block): ``Mid.shape = ..``
_SHAPE_STMT = re.compile(r"^(?P<name>[A-Za-z_]\w*)\.shape\s*=\s*(?P<expr>.+)$")
_REQUIRE_STMT = re.compile(r"^require\s+(?P<expr>.+)$")
_INCLUDE_STMT = re.compile(r"^include(?:\s*=\s*|\s+)(?P<path>\S.*)$")
# CUDA C++ only: a type for a template type parameter (``T = float``) or the kernel pipeline
_TYPE_STMT = re.compile(r"^(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<ctype>[A-Za-z_][\w:<> ,]*\**)$")
_PIPELINE_STMT = re.compile(r"^pipeline\s*=\s*(?P<stages>\[.*\])$")
# the shared-memory tile the swizzle map draws: ``smem_tile = (TILE, TILE, float32)``
_SMEM_TILE_STMT = re.compile(r"^smem_tile\s*=\s*\((?P<args>.*)\)$")
_DIRECTIVE_HELP = ("Directives: 'NAME in [v1, v2]', 'NAME in pow2(16, 256)', "
                   "'NAME in range(1, 5)', "
                   "'grid = EXPR', 'block = EXPR', 'smem = EXPR', 'flops = EXPR', 'bytes = EXPR', "
                   "'require EXPR', 'smem_tile = (ROWS, COLS, DTYPE)'; "
                   "Triton: 'a_desc.block_shape = [BM, BK]', 'out.shape = (cdiv(n, BLOCK),)'; "
                   "CUDA C++: 'include DIR' (or package:folder), "
                   "'T = float' (a template type), 'pipeline = [k1(grid=..., block=...), ...]'.")


@dataclass(frozen=True)
class Expr:
    """A Python expression from the cell (grid, block, flops ...) with its cell line."""

    text: str
    line: int | None = None
    what: str = "expression"
    comment: str = "//"  # the cell's directive comment, for the fix of an unknown name
    _code: Any = field(default=None, compare=False, repr=False)
    _meta: str | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        body = self.text
        m = _LAMBDA.match(body.strip())
        if m:  # a Triton grid: lambda META: (triton.cdiv(n, META["BLOCK"]),)
            object.__setattr__(self, "_meta", m.group("meta"))
            body = m.group("body")
        object.__setattr__(self, "_code", compile_expr(body, self.line, self.what))

    def names(self) -> set[str]:
        """The names the expression reads (parameters, inputs, limits); empty for a constant."""
        return free_names(self._code)

    def __call__(self, env: Mapping[str, Any]) -> Any:
        """Evaluate over ``env`` (parameters as C++ integers, scalar inputs, arrays); a
        ``lambda META:`` expression sees the same names as ``META[...]`` too."""
        if self._meta is not None:
            env = {**env, self._meta: dict(env)}
        return eval_expr(self._code, env, self.text, self.line, self.comment)


MAX_VALUES = 4096  # values of one tunable


def _fits(values: range) -> bool:
    """Whether a range is short enough to list (len() itself overflows past 2**63)."""
    try:
        return len(values) <= MAX_VALUES
    except OverflowError:
        return False


def parse_values(text: str, line: int | None, name: str) -> tuple[Any, ...]:
    """Parse ``[64, 128]``, ``[none, 64B]``, ``["", "cutlass_"]``, ``[[], ["-O3"]]`` (a list
    value is a tuple of strings), ``pow2(16, 256)`` or ``range(1, 5)``."""
    text = text.strip()
    m = re.match(r"^(pow2|range)\s*\((.*)\)$", text)
    if m:
        nums = _arguments(m.group(1), m.group(2), line, name)
        shown = _short(m.group(2).strip())
        if m.group(1) == "range":
            if not 1 <= len(nums) <= 3:
                raise CellError(f"range() takes 1 to 3 integers, got {len(nums)}", line=line,
                                fix=f"Write {name} in range(1, 5).")
            if len(nums) == 3 and nums[2] == 0:
                raise CellError("range() step must not be zero", line=line,
                                fix=f"Write {name} in range(1, 5).")
            values = range(*nums)
            if not _fits(values):  # range(0, 10**9) would fill the memory (issue 9)
                many = f"{values.stop - values.start:,} values" if values.step == 1 else \
                    "more values"
                raise CellError(f"range({shown}) has {many}, more than a slider "
                                f"or a sweep can use ({MAX_VALUES})", line=line,
                                fix=f"Write {name} in pow2(...) or a shorter range, e.g. "
                                    f"range(1, 65).")
            return tuple(values)
        if len(nums) != 2:
            raise CellError(f"pow2() takes 2 integers (lowest, highest), got {len(nums)}",
                            line=line, fix=f"Write {name} in pow2(16, 256).")
        lo, hi = nums
        if lo <= 0 or lo & (lo - 1) or hi & (hi - 1) or hi < lo:
            raise CellError(f"pow2({shown}) needs powers of two with lo <= hi", line=line,
                            fix=f"Write {name} in pow2(16, 256).")
        count = hi.bit_length() - lo.bit_length() + 1
        if count > MAX_VALUES:  # pow2(1, 2**100000) skipped the limit range() has (issue 34)
            raise CellError(f"pow2({shown}) has {count:,} values, more than a slider "
                            f"or a sweep can use ({MAX_VALUES})", line=line,
                            fix=f"Write {name} in pow2(16, 1024) or another shorter span.")
        return tuple(1 << k for k in range(lo.bit_length() - 1, hi.bit_length()))
    if not (text.startswith("[") and text.endswith("]")):
        raise CellError(f"cannot read the values of {name}: '{text}'", line=line,
                        fix=f"Write: {name} in [64, 128, 256].")
    return parse_list(text, line, name)


def _short(text: str, keep: int = 40) -> str:
    """``text`` cut to ``keep`` characters for a message (a 5,000-digit literal fills a page)."""
    return text if len(text) <= keep else text[:keep - 3] + "..."


def _arguments(fn: str, text: str, line: int | None, name: str) -> list[int]:
    """The integer arguments of ``pow2(...)``/``range(...)``: literals or constant expressions
    (``10**9``, ``1 << 20``), evaluated with the bounds of every directive expression."""
    nums = []
    for part in text.split(","):
        value: Any = None
        try:
            value = eval_expr(compile_expr(part, line, f"{fn}()"), {}, part, line)
        except CellError:
            pass
        if isinstance(value, bool) or not isinstance(value, int):
            raise CellError(f"{fn}() takes integers (or constant expressions such as 1 << 10, "
                            f"under 2**128), got '{_short(text.strip())}'", line=line,
                            fix=f"Write {name} in {fn}(16, 256).") from None
        nums.append(value)
    return nums


@dataclass
class Directives:
    """Mutable collector used while parsing; frozen into a KernelSpec at the end."""

    params: dict[str, Param] = field(default_factory=dict)
    constraints: list[Constraint] = field(default_factory=list)
    exprs: dict[str, Expr] = field(default_factory=dict)
    includes: list[tuple[str, int | None]] = field(default_factory=list)
    types: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    pipeline: tuple[str, int | None] | None = None
    block_shapes: dict[str, Expr] = field(default_factory=dict)
    shapes: dict[str, Expr] = field(default_factory=dict)
    smem_tile: tuple[str, int | None, str] | None = None  # (its arguments, cell line, comment)


def add_statement(stmt: str, line: int | None, draft: Directives, comment: str = "//") -> None:
    if m := _IN_STMT.match(stmt):
        name = m.group("name")
        if name in draft.params:
            raise CellError(f"parameter {name} is declared twice", line=line,
                            fix="Keep one declaration.")
        draft.params[name] = Param(name, parse_values(m.group("values"), line, name), line)
    elif m := _ASSIGN_STMT.match(stmt):
        key = m.group("key")
        draft.exprs[key] = Expr(m.group("expr"), line, key, comment)
    elif m := _BLOCK_SHAPE_STMT.match(stmt):
        name = m.group("name")
        draft.block_shapes[name] = Expr(m.group("expr"), line, f"{name}.block_shape", comment)
    elif m := _SHAPE_STMT.match(stmt):
        name = m.group("name")
        draft.shapes[name] = Expr(m.group("expr"), line, f"{name}.shape", comment)
    elif m := _REQUIRE_STMT.match(stmt):
        draft.constraints.append(Constraint(m.group("expr"), line, comment=comment))
    elif m := _INCLUDE_STMT.match(stmt):
        draft.includes.append((m.group("path").strip().strip("'\""), line))
    elif m := _SMEM_TILE_STMT.match(stmt):
        if draft.smem_tile is not None:
            raise CellError("smem_tile is declared twice", line=line,
                            fix=f"Keep one (the first is on cell line {draft.smem_tile[1]}).")
        draft.smem_tile = (m.group("args"), line, comment)
    elif m := _PIPELINE_STMT.match(stmt):
        draft.pipeline = (m.group("stages"), line)
    elif m := _TYPE_STMT.match(stmt):
        draft.types[m.group("name")] = (m.group("ctype").strip(), line)
    else:
        raise CellError(f"cannot read the ktune directive '{stmt}'", line=line, fix=_DIRECTIVE_HELP)


def parse_directives(body: str, body_line: int = 2) -> Directives:
    """Collect ``ktune:`` statements from the cell body (``;`` separates statements)."""
    draft = Directives()
    for i, text in enumerate(body.splitlines()):
        m = _DIRECTIVE.match(text)
        if not m:
            continue
        for stmt in split_statements(m.group("body")):
            add_statement(stmt, body_line + i, draft, m.group("comment"))
    return draft


def split_statements(text: str) -> list[str]:
    """Split on ``;`` outside brackets, so ``grid = (a, b); block = 128`` works."""
    out, depth, cur = [], 0, []
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == ";" and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur).strip())
    return [s for s in out if s]
