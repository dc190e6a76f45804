"""A kernel's ``@triton.autotune`` config list as ktune's space, read by the device worker.

Published config lists are built by code (comprehensions, helper functions, ``IS_AMD``,
``get_current_target()``), so the list is only known after the cell's module has run. The
notebook never imports triton or the kernel's package, so the module runs where it has to run
anyway: in the device worker (request ``("describe", spec)``, :mod:`jupyter_ktune.runner.describe`),
which loads it as :meth:`TritonBackend.module` does for a run, in the worker's own mode (the
GPU, or the interpreter with the active driver answering for the compile target,
:func:`.interpreter.install_target_driver`). The run then finds the module loaded: the package
is imported once per cell text, not once in a parse-time child interpreter and again in the
worker (16-20 s and ~12 s of fla's first cell on the H200, issue 33). The notebook side keeps
the answer per cell text.

The list becomes tunables: one per config field (the kwargs, then ``num_warps``,
``num_stages``, ``num_ctas``, ``maxnreg`` where set), with the values in list order, and, when
the list is not the whole product of those values, a ``require`` constraint that keeps exactly
the listed combinations. A directive for one of these names wins: it replaces that field's
values (widen or narrow), and the constraint then keeps the listed combinations of the others.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from jupyter_ktune.backends.triton.cell import kernel_def
from jupyter_ktune.backends.triton.decorators import config_values, unwrap
from jupyter_ktune.errors import CannotRun, CellError, CompileFailure
from jupyter_ktune.space import Constraint, Param, Space
from jupyter_ktune.spec import KernelSpec

_DONE: dict[tuple[str, str, str], dict[str, Any]] = {}
FIELDS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def module_source(spec: KernelSpec) -> str:
    """The text of the cell's module: the cell, then the helpers of earlier cells."""
    return f"{spec.source.rstrip()}\n\n\n{spec.helpers}" if spec.helpers else spec.source


def autotune_line(spec: KernelSpec) -> int | None:
    """The cell line of an autotune-like decorator above the kernel (ast only), or None."""
    try:
        tree = ast.parse(spec.source)
    except SyntaxError:
        return None
    for dec in kernel_def(tree, spec.name)[1]:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if "autotune" in ast.unparse(target):
            return spec.body_line - 1 + target.lineno
    return None


def describe(spec: KernelSpec, ask: Callable[[KernelSpec], dict[str, Any]]) -> dict[str, Any]:
    """The cell module's autotune list (``{"configs": [...], ...}``), read by the device worker
    (:func:`read_autotune` there, asked through ``ask``) once per cell text."""
    key = (module_source(spec), spec.name, spec.options.arch)
    if key in _DONE:
        return _DONE[key]
    out = ask(spec)
    if "error" in out:
        raise CellError(f"the cell's module failed while ktune read the @triton.autotune list: "
                        f"{out['error']}", line=out.get("line") or autotune_line(spec),
                        fix="Make the module-level code of the cell run without a GPU, or "
                            "declare the tunables with # ktune: NAME in [...] lines.")
    _DONE[key] = out
    return out


def expand(spec: KernelSpec, ask: Callable[[KernelSpec], dict[str, Any]]) -> KernelSpec:
    """The spec with the autotune list folded into its space (see the module docstring);
    ``ask(spec)`` is the device worker's answer to the backend's ``describe``."""
    line = autotune_line(spec)
    if line is None:
        return spec
    configs = describe(spec, ask)["configs"]
    declared = set(spec.space.names)
    names = [n for c in configs for n in c if n not in declared]
    names = list(dict.fromkeys(names))
    if not names:
        return spec
    values = {n: list(dict.fromkeys(_value(c[n]) for c in configs if n in c)) for n in names}
    params = [Param(n, tuple(values[n]), line) for n in names]
    combos = list(dict.fromkeys(tuple(_value(c.get(n)) for n in names) for c in configs))
    constraints = list(spec.space.constraints)
    if len(combos) < math.prod(len(v) for v in values.values()):
        lookup = {p.name: p for p in params}
        listed = tuple(tuple(lookup[n].cxx(v) for n, v in zip(names, combo, strict=True))
                       for combo in combos)
        constraints.append(Constraint(f"({', '.join(names)},) in {listed!r}", line, comment="#"))
    space = Space((*spec.space.params, *params), tuple(constraints))
    return replace(spec, space=space)


def _value(v: Any) -> int | str:
    if isinstance(v, bool) or not isinstance(v, int):
        return str(v)
    return v


def read_autotune(backend: Any, spec: KernelSpec) -> dict[str, Any]:
    """In the worker: load the cell's module (``backend.module``, as a run loads it, so the run
    finds it loaded) and return its autotune list as plain data (JSON types: the notebook
    unpickles no triton or torch object), or ``{"error": first line, "line": cell line}``."""
    try:
        module = backend.module(spec)
    except CompileFailure as failure:  # the cell's own error, with its line
        line = failure.diagnostics[0].line if failure.diagnostics else None
        return {"error": failure.log.splitlines()[0], "line": line}
    except (CannotRun, CellError) as exc:
        return {"error": str(exc).splitlines()[0], "line": getattr(exc, "line", None)}
    chain = unwrap(getattr(module, spec.name))
    configs = [config_values(c) for t in chain.autotuners for c in t.configs]
    configs = [{k: v for k, v in c.items() if not (k == "num_ctas" and v == 1)} for c in configs]
    keys = [k for t in chain.autotuners for k in t.keys]
    return json.loads(json.dumps({"configs": configs, "keys": keys,
                                  "heuristics": list(chain.heuristic_names)}, default=str))
