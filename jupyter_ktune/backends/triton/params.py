"""Tunable values checked against the Triton kernel's parameter types, on the notebook side.

The kernel receives its tunables as written (``Space.py_env``: ``"leaky_relu"``, not its
index; issue 15), so a value of the wrong kind would otherwise surface as a Triton compile error
deep in the kernel, or run a branch nobody meant. Values are checked against what the kernel
says about a parameter, where it says something: a launch option is an integer, a parameter
annotated ``int``/``float``/``str``/``bool`` takes that kind, a ``tl.constexpr`` with a literal
default takes the default's kind, and one without takes what its uses in the body need: an
integer in arithmetic or as an argument of ``tl.arange``/``range``, a string when compared with a
string literal (no kind when the uses disagree).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from jupyter_ktune.errors import CellError
from jupyter_ktune.spec import KernelSpec

# As the kernel receives them (Param.py): integers, floats, bools or names.
_KINDS: dict[str, type] = {"int": int, "float": float, "str": str, "bool": bool}


def param_kinds(kernel: ast.FunctionDef) -> dict[str, type]:
    """Return the Python type each parameter must have, where the kernel's signature tells it."""
    args = kernel.args.args
    defaults = dict(zip([a.arg for a in args[len(args) - len(kernel.args.defaults):]],
                        kernel.args.defaults, strict=True))
    kinds: dict[str, type] = {}
    used = _kinds_by_use(kernel)
    for a in args:
        note = ast.unparse(a.annotation) if a.annotation is not None else ""
        if note in _KINDS:
            kinds[a.arg] = _KINDS[note]
        elif "constexpr" in note and isinstance(defaults.get(a.arg), ast.Constant):
            value = defaults[a.arg].value
            if type(value) in _KINDS.values():
                kinds[a.arg] = type(value)
        elif "constexpr" in note and len(used.get(a.arg, ())) == 1:
            kinds[a.arg] = next(iter(used[a.arg]))
    return kinds


def _kinds_by_use(kernel: ast.FunctionDef) -> dict[str, set[type]]:
    """Return the kinds that the uses of each name in the body need (see the module docstring)."""
    uses: dict[str, set[type]] = {}

    def need(node: ast.AST, kind: type) -> None:
        if isinstance(node, ast.Name):
            uses.setdefault(node.id, set()).add(kind)

    for node in ast.walk(kernel):
        if isinstance(node, ast.BinOp):
            need(node.left, int)
            need(node.right, int)
        elif isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in (
                "arange", "range"):
            for arg in node.args:
                need(arg, int)
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(x, ast.Constant) and isinstance(x.value, str) for x in sides):
                for x in sides:
                    need(x, str)
    return uses


def _fits(value: Any, kind: type) -> bool:
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is bool:
        return isinstance(value, bool) or value in (0, 1)
    return isinstance(value, kind)


def check_values(spec: KernelSpec, kinds: Mapping[str, type],
                 launch_options: tuple[str, ...]) -> None:
    """Raise a CellError on the tunable's line when a value is of the wrong kind."""
    for p in spec.space.params:
        kind = int if p.name in launch_options else kinds.get(p.name)
        if kind is None:
            continue
        bad = next((v for v in p.values if not _fits(p.py(v), kind)), None)
        if bad is None:
            continue
        why = ("a launch option" if p.name in launch_options
               else f"a parameter of {spec.name} that takes {kind.__name__} values")
        raise CellError(f"tunable {p.name} is {why}, but one of its values is {bad!r}",
                        line=p.line, fix=f"Give {p.name} {kind.__name__} values only, e.g. "
                                         f"{p.name} in [{_example(kind)}].")


def _example(kind: type) -> str:
    return {int: "64, 128", float: "0.5, 1.0", str: "relu, leaky_relu", bool: "False, True"}[kind]
