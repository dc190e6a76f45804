"""``@triton.jit`` helpers defined in earlier notebook cells, shipped with the kernel's cell.

The worker builds the cell's module from the cell text alone, so a helper that an earlier cell
defined was a NameError there. On the notebook side, every name the cell uses but does not
define is looked up in the notebook's namespace; a jit function found there (anything whose
``.fn`` is a plain function: ``JITFunction``, the interpreter's ``InterpretedFunction``) has its
source read back (``inspect.getsource`` of ``.fn``, which IPython's line cache serves for cells,
else ``JITFunction.src`` under ``@triton.jit``), and so on for the helpers it uses. The sources
go into ``KernelSpec.helpers`` and are appended to the cell's module, after the cell, so cell
lines keep their numbers.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
from collections.abc import Mapping
from typing import Any


def _free_names(tree: ast.AST) -> set[str]:
    defined = {n.name for n in ast.walk(tree)
               if isinstance(n, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)}
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            defined.add(n.id)
        elif isinstance(n, ast.alias):
            defined.add((n.asname or n.name).split(".")[0])
        elif isinstance(n, ast.arg):
            defined.add(n.arg)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return used - defined - set(dir(builtins))


def _jit_source(obj: Any) -> str | None:
    fn = getattr(obj, "fn", None)
    if not inspect.isfunction(fn):
        return None
    try:
        return textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        src = getattr(obj, "src", None)
        return f"@triton.jit\n{textwrap.dedent(src)}" if isinstance(src, str) else None


def notebook_helpers(source: str, namespace: Mapping[str, Any]) -> str:
    """The sources of the jit helpers ``source`` needs from ``namespace`` ('' when none)."""
    try:
        pending = _free_names(ast.parse(source))
    except SyntaxError:
        return ""  # the cell's own syntax error is reported by check_cell
    done: set[str] = set()
    chunks: list[str] = []
    while pending:
        name = pending.pop()
        done.add(name)
        text = _jit_source(namespace.get(name)) if name in namespace else None
        if text is None:
            continue
        chunks.append(f"# from an earlier notebook cell: {name}\n{text}")
        try:
            pending |= _free_names(ast.parse(text)) - done
        except SyntaxError:
            continue
    return "\n\n".join(chunks)
