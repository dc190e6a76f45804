"""Directive expressions (``grid =``, ``require``, ``flops =`` ...) with bounded cost.

A directive expression is evaluated in the notebook's own process, for every config of a space,
so it must never run for long: ``require 7**7**9 > 0`` froze a notebook for 54 s (issue 15).
Expressions are parsed once into a Python AST, checked against a whitelist of node kinds (no
comprehensions, lambdas, f-strings or ``:=``: nothing that loops or formats), and every binary
operator and helper call is rewritten into a call of a checked function. The checks look at the
operands *before* computing: an integer result may not exceed :data:`MAX_INT_BITS` bits, a
repeated or concatenated sequence may not exceed :data:`MAX_SEQ` items, ``%`` formatting of
strings is refused. Constant sub-expressions are folded at parse time, so ``require 7**7**9 > 0``
is an error on its cell line before anything runs.

The rewritten tree is compiled, so evaluation runs at Python speed (a sweep evaluates the
constraints of every config).
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

from jupyter_ktune.errors import CellError

MAX_INT_BITS = 128  # grid sizes, byte counts and flop counts are far below 2**128
MAX_SEQ = 10_000  # items in a tuple, list or string an expression may build
MAX_NDIGITS = 100  # round(x, n): round(7, -10**9) computes 10**10**9 inside

_LIMIT_FIX = ("Directive expressions compute sizes and limits: keep every value under "
              f"2**{MAX_INT_BITS} and every sequence under {MAX_SEQ} items.")


class ExprLimit(ArithmeticError):
    """An operation refused before it ran because its result would be too large."""


def _isint(x: Any) -> bool:
    return isinstance(x, int)  # bool too; numpy integers are fixed-width and cheap


def _check(value: Any) -> Any:
    if _isint(value) and value.bit_length() > MAX_INT_BITS:
        raise ExprLimit(f"a result has {value.bit_length()} bits (more than {MAX_INT_BITS})")
    if isinstance(value, str | bytes | tuple | list) and len(value) > MAX_SEQ:
        raise ExprLimit(f"a sequence has {len(value)} items (more than {MAX_SEQ})")
    return value


def _seq(x: Any) -> bool:
    return isinstance(x, str | bytes | tuple | list)


def _pow(a: Any, b: Any) -> Any:
    if _isint(a) and _isint(b) and b > 0 and abs(a) > 1:
        bits = (abs(a).bit_length() - 1) * b  # a lower bound of the result's bits
        if bits > MAX_INT_BITS:
            raise ExprLimit(f"{a} ** {b} would have about {bits:,} bits "
                            f"(more than {MAX_INT_BITS})")
    return operator.pow(a, b)


def _mul(a: Any, b: Any) -> Any:
    if _isint(a) and _isint(b) and a and b:
        bits = abs(a).bit_length() + abs(b).bit_length() - 1
        if bits > MAX_INT_BITS:
            raise ExprLimit(f"a product would have {bits:,} bits (more than {MAX_INT_BITS})")
    for s, n in ((a, b), (b, a)):
        if _seq(s) and _isint(n) and len(s) * max(n, 0) > MAX_SEQ:
            raise ExprLimit(f"repeating {len(s)} items {n} times makes more than {MAX_SEQ}")
    return operator.mul(a, b)


def _lshift(a: Any, b: Any) -> Any:
    if _isint(a) and _isint(b) and a and b > 0 and abs(a).bit_length() + b > MAX_INT_BITS:
        raise ExprLimit(f"{a} << {b} would have {abs(a).bit_length() + b:,} bits "
                        f"(more than {MAX_INT_BITS})")
    return operator.lshift(a, b)


def _add(a: Any, b: Any) -> Any:
    if _seq(a) and _seq(b) and len(a) + len(b) > MAX_SEQ:
        raise ExprLimit(f"joining {len(a)} and {len(b)} items makes more than {MAX_SEQ}")
    return operator.add(a, b)


def _mod(a: Any, b: Any) -> Any:
    if isinstance(a, str | bytes):  # '%0999999999d' % 1 would fill the memory
        raise ExprLimit("'%' string formatting is not allowed")
    return operator.mod(a, b)


def _matmul(a: Any, b: Any) -> Any:
    raise ExprLimit("'@' (matrix product) is not allowed")


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: _add, ast.Sub: operator.sub, ast.Mult: _mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: _mod, ast.Pow: _pow, ast.LShift: _lshift,
    ast.RShift: operator.rshift, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
    ast.BitAnd: operator.and_, ast.MatMult: _matmul,
}


def _round(number: Any, ndigits: Any = None) -> Any:
    if ndigits is not None and _isint(ndigits) and abs(ndigits) > MAX_NDIGITS:
        raise ExprLimit(f"round() to {ndigits} digits (at most {MAX_NDIGITS})")
    return round(number, ndigits)


def _prod(values: Any, *, start: Any = 1) -> Any:
    out = start
    for v in values:
        out = _check(_mul(out, v))
    return out


# Names usable inside constraint, grid and block expressions besides the parameters.
SAFE_FUNCS: dict[str, Callable[..., Any]] = {
    "min": min, "max": max, "abs": abs, "int": int, "round": _round, "len": len,
    "cdiv": lambda a, b: -(-a // b), "log2": math.log2, "prod": _prod,
    "next_power_of_2": lambda n: 1 << (int(n) - 1).bit_length() if n > 0 else 1,
}
# ``triton.cdiv(n, BLOCK)`` as Triton users write grids: these modules' helpers are SAFE_FUNCS.
SAFE_MODULES = frozenset({"triton", "tl"})
# Methods of arrays and tensors an expression may call (``x.size(0)``, ``x.numel()``); any other
# method call could be unbounded (``'a'.center(10**9)``).
SAFE_METHODS = frozenset({"numel", "nelement", "size", "dim", "item", "element_size", "stride"})

_ALLOWED = (ast.Expression, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.IfExp, ast.Compare,
            ast.Call, ast.Constant, ast.Attribute, ast.Subscript, ast.Slice, ast.Name,
            ast.Load, ast.Tuple, ast.List, ast.keyword, ast.boolop, ast.operator, ast.unaryop,
            ast.cmpop)
_HELPER = "__ktune_"  # prefix of the checked helpers in the evaluation scope


def _node_name(node: ast.AST) -> str:
    names = {ast.ListComp: "a comprehension", ast.SetComp: "a comprehension",
             ast.DictComp: "a comprehension", ast.GeneratorExp: "a comprehension",
             ast.Lambda: "lambda", ast.JoinedStr: "an f-string", ast.NamedExpr: "':='",
             ast.Starred: "'*' unpacking", ast.Dict: "a dict", ast.Set: "a set",
             ast.Yield: "'yield'", ast.YieldFrom: "'yield'", ast.Await: "'await'"}
    return names.get(type(node), type(node).__name__)


class _Rewrite(ast.NodeTransformer):
    """Check node kinds, fold constants through the checked operators, route calls to them."""

    def __init__(self, what: str):
        self.what = what

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if not isinstance(node, _ALLOWED):
            raise ExprLimit(f"cannot parse the {self.what} expression: {_node_name(node)} is "
                            "not allowed")
        return super().generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id.startswith("_"):
            raise ExprLimit(f"'{node.id}' is not allowed in a {self.what} expression")
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if node.attr.startswith("_"):
            raise ExprLimit(f"'{node.attr}' is not allowed in a {self.what} expression")
        return self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.MatMult):
            _matmul(None, None)
        op = _BINOPS[type(node.op)]
        if isinstance(node.left, ast.Constant) and isinstance(node.right, ast.Constant):
            try:  # fold now, so '7**7**9' fails on its line before anything runs
                return ast.copy_location(
                    ast.Constant(_check(op(node.left.value, node.right.value))), node)
            except ExprLimit:
                raise
            except Exception:  # noqa: BLE001 - '1/0' stays an error of the evaluation
                pass
        fn = ast.Name(f"{_HELPER}{type(node.op).__name__}", ast.Load())
        return ast.copy_location(ast.Call(fn, [node.left, node.right], []), node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        f = node.func
        if isinstance(f, ast.Name) and f.id in SAFE_FUNCS:
            node.func = ast.Name(f"{_HELPER}{f.id}", ast.Load())
        elif (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
              and f.value.id in SAFE_MODULES and f.attr in SAFE_FUNCS):
            node.func = ast.Name(f"{_HELPER}{f.attr}", ast.Load())
        elif isinstance(f, ast.Attribute) and f.attr in SAFE_METHODS:
            node.func = self.visit(f)
        else:
            self.visit(f)  # a lambda or a comprehension says so
            called = f.id if isinstance(f, ast.Name) else getattr(f, "attr", "this")
            raise ExprLimit(f"calling '{called}' is not allowed in a {self.what} expression "
                            f"(use {', '.join(sorted(SAFE_FUNCS))})")
        node.args = [self.visit(a) for a in node.args]
        node.keywords = [self.visit(k) for k in node.keywords]
        return ast.Call(ast.Name(f"{_HELPER}check", ast.Load()), [node], [])


_SCOPE: dict[str, Any] = {f"{_HELPER}{op.__name__}": fn for op, fn in _BINOPS.items()}
_SCOPE.update({f"{_HELPER}{name}": fn for name, fn in SAFE_FUNCS.items()})
_SCOPE[f"{_HELPER}check"] = _check
_SCOPE["__builtins__"] = {}


def compile_expr(expr: str, line: int | None, what: str) -> Any:
    """Parse, check and compile a cell expression once; a cell-line error when it is not valid."""
    fix = "Write a Python expression, e.g. cdiv(n, BLOCK)."
    text = expr.strip()
    try:
        tree = _Rewrite(what).visit(ast.parse(text, mode="eval"))
        ast.fix_missing_locations(tree)
        # compile() rejects what parses ('(yield)', 'await x'): also a cell error (issue 9)
        return compile(tree, f"<ktune {what}>", "eval")
    except SyntaxError as exc:
        raise CellError(f"cannot parse the {what} expression '{text}' ({exc.msg})",
                        line=line, fix=fix) from None
    except ExprLimit as exc:
        raise CellError(f"'{text}': {exc}", line=line, fix=_LIMIT_FIX) from None
    except (ValueError, RecursionError, MemoryError) as exc:  # a NUL byte, 300 nested '('
        why = type(exc).__name__ if isinstance(exc, RecursionError | MemoryError) else str(exc)
        raise CellError(f"cannot parse the {what} expression ({why})", line=line,
                        fix=fix) from None


def free_names(code: Any) -> set[str]:
    """The names a compiled cell expression reads from its environment (not its helpers)."""
    return {n for n in getattr(code, "co_names", ()) if not n.startswith("_") and n not in _SCOPE}


def eval_expr(code: Any, env: Mapping[str, Any], text: str, line: int | None,
              comment: str = "//") -> Any:
    """Evaluate a compiled cell expression over ``env`` (parameters, limits, inputs).

    ``comment`` is the cell's directive comment, ``//`` (CUDA C++) or ``#`` (Python backends),
    for the fix of an unknown name.
    """
    try:
        return eval(code, _SCOPE, env)  # type: ignore[arg-type]  # noqa: S307 - checked and rewritten by compile_expr
    except NameError as exc:
        name = str(exc).split("'")[1] if "'" in str(exc) else str(exc)
        raise CellError(f"'{name}' in '{text.strip()}' is neither a parameter nor an input",
                        line=line, fix=f"Declare it ({comment} ktune: {name} in [...]) or return "
                        "it from the inputs function.") from None
    except ExprLimit as exc:
        raise CellError(f"'{text.strip()}': {exc}", line=line, fix=_LIMIT_FIX) from None
    except Exception as exc:  # noqa: BLE001 - any user-expression failure is a cell error
        raise CellError(f"'{text.strip()}' failed: {type(exc).__name__}: {exc}",
                        line=line) from None
