"""The Triton cell read with ``ast``, on the notebook side: no triton import.

The kernel is found by name and decorator; its ``tl.constexpr`` parameters must be tunables (or
have defaults), every tunable must be a parameter or a launch option, and a grid must be given.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field

from jupyter_ktune.errors import CellError
from jupyter_ktune.backends.triton.params import check_values, param_kinds
from jupyter_ktune.spec import KernelSpec

LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


@dataclass(frozen=True)
class TritonSignature:
    """The kernel's parameters split into runtime and constexpr ones, with cell lines."""

    params: tuple[str, ...]
    constexprs: tuple[str, ...]
    defaults: frozenset[str]
    line: int
    def_lines: Mapping[str, int]
    kinds: Mapping[str, type] = field(default_factory=dict)  # params.param_kinds

    @property
    def runtime(self) -> tuple[str, ...]:
        """Parameters passed at launch (not constexpr)."""
        return tuple(p for p in self.params if p not in self.constexprs)


def _is_jit(dec: ast.expr) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    return "jit" in ast.unparse(target) or "autotune" in ast.unparse(target)


def parse_kernel(spec: KernelSpec) -> TritonSignature:
    """Find ``@triton.jit def NAME(...)`` in the cell; CellError with the line and the fix."""
    offset = spec.body_line - 1
    try:
        tree = ast.parse(spec.source)
    except SyntaxError as exc:
        raise CellError(f"Python syntax error: {exc.msg}", line=offset + (exc.lineno or 1),
                        fix="Fix the Python syntax of the cell.") from None
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    def_lines = {f.name: offset + f.lineno for f in funcs}
    kernel = next((f for f in funcs if f.name == spec.name), None)
    jitted = [f.name for f in funcs if any(_is_jit(d) for d in f.decorator_list)]
    if kernel is None or not any(_is_jit(d) for d in kernel.decorator_list):
        hint = f" The cell defines: {', '.join(jitted)}." if jitted else ""
        what = "is not decorated with @triton.jit" if kernel else "is not in the cell"
        raise CellError(f"the Triton kernel '{spec.name}' {what}", line=1,
                        fix=f"Write @triton.jit def {spec.name}(...) or name the kernel on the "
                            f"magic line: %%kernel <name>.{hint}")
    args = kernel.args
    if args.vararg or args.kwarg or args.kwonlyargs:
        raise CellError("Triton kernels take plain parameters only", line=offset + kernel.lineno,
                        fix="Remove *args / **kwargs / keyword-only parameters.")
    params = tuple(a.arg for a in args.args)
    constexprs = tuple(a.arg for a in args.args
                       if a.annotation is not None and "constexpr" in ast.unparse(a.annotation))
    defaults = frozenset(a.arg for a in args.args[len(args.args) - len(args.defaults):])
    return TritonSignature(params, constexprs, defaults, offset + kernel.lineno, def_lines,
                           param_kinds(kernel))


def check_cell(spec: KernelSpec) -> TritonSignature:
    """Host-side checks: kernel found, constexprs are tunables, tunables are used, a grid."""
    sig = parse_kernel(spec)
    for p in sig.constexprs:
        if p not in spec.space.names and p not in sig.defaults:
            raise CellError(f"constexpr parameter {p} of {spec.name} has no value", line=sig.line,
                            fix=f"Declare it as a tunable: # ktune: {p} in [64, 128]  (or give "
                                f"it a default: {p}: tl.constexpr = 64)")
    for name in spec.space.names:
        if name not in sig.params and name not in LAUNCH_OPTIONS:
            raise CellError(f"tunable {name} is neither a parameter of {spec.name} nor a launch "
                            "option", line=spec.space.param(name).line,
                            fix=f"Add '{name}: tl.constexpr' to the kernel, or use one of "
                                f"{', '.join(LAUNCH_OPTIONS)}.")
    check_values(spec, sig.kinds, LAUNCH_OPTIONS)
    if spec.grid is None:
        raise CellError("the launch grid is not given", line=1,
                        fix="Add: # ktune: grid = cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)  "
                            "(or --grid on the magic line)")
    bad = [o for o in spec.outputs if o not in sig.runtime]
    if bad:
        raise CellError(f"--out names '{bad[0]}', which is not a pointer parameter of "
                        f"{spec.name}", line=1, fix="Name the kernel's output arrays in --out.")
    return sig
