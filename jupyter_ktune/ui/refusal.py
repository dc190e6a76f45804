"""Why a config is not run, with the numbers: ``require`` lines evaluated side by side.

``Space.violations`` names the broken line (``breaks 'require SMEM <= SMEM_PER_BLOCK'``); a
user moving a slider also needs the values that broke it (``245,760 > 232,448``). This module
re-evaluates each side of a broken comparison with the space's own evaluator and formats them.
It only formats: which configs are allowed stays :mod:`jupyter_ktune.space`'s decision, taken
once per move (``Space.violations``) and passed in here.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from jupyter_ktune.space import Space, compile_expr, eval_expr

_OPS = {ast.Lt: "<", ast.LtE: "≤", ast.Gt: ">", ast.GtE: "≥", ast.Eq: "=", ast.NotEq: "≠"}
_BROKEN = {ast.Lt: "≥", ast.LtE: ">", ast.Gt: "≤", ast.GtE: "<", ast.Eq: "≠", ast.NotEq: "="}


def fmt_number(v: Any) -> str:
    """``245,760`` for integers, 4 significant digits for floats, ``repr`` otherwise."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return repr(v)
    if isinstance(v, int) or float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:,.4g}"


def _sides(expr: str, env: Mapping[str, Any], line: int | None) -> str:
    """``245,760 > 232,448`` for a broken single comparison, "" for anything else."""
    try:
        tree = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError:
        return ""
    if not (isinstance(tree, ast.Compare) and len(tree.ops) == 1
            and type(tree.ops[0]) in _BROKEN):
        return ""
    values = []
    for node in (tree.left, tree.comparators[0]):
        text = ast.unparse(node)
        try:
            values.append(eval_expr(compile_expr(text, line, "require"), env, text, line))
        except Exception:  # noqa: BLE001 - a side that does not evaluate alone: no numbers
            return ""
    return f"{fmt_number(values[0])} {_BROKEN[type(tree.ops[0])]} {fmt_number(values[1])}"


def refusal_reasons(space: Space, config: Mapping[str, Any],
                    limits: Mapping[str, Any] | None = None,
                    violations: list[str] | None = None) -> list[str]:
    """One line per broken ``require``: ``require X <= Y: 245,760 > 232,448`` (empty: allowed).

    ``violations``: what :meth:`Space.violations` said for ``config`` under ``limits``, when the
    caller checked already (the panel, once per move): only formatted then, never re-evaluated,
    so a move evaluates its ``require`` lines once (issue 37)."""
    broken = set(space.violations(config, limits) if violations is None else violations)
    env = dict(limits or {})
    env.update(space.cxx_env(config))
    out = []
    for c in space.constraints:
        if c.broken not in broken:
            continue
        numbers = _sides(c.expr, env, c.line)
        out.append(f"require {c.expr.strip()}" + (f": {numbers}" if numbers else ""))
    return out
