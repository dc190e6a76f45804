"""The Triton cell read with ``ast``, on the notebook side: no triton import.

The kernel is found by name and decorator; its ``tl.constexpr`` parameters must be tunables (or
have defaults), every tunable must be a parameter or a launch option, and a grid must be given.
"""

from __future__ import annotations

import ast
import functools
import re
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
    heuristics: frozenset[str] = frozenset()  # constexprs a @triton.heuristics dict computes
    loaded: frozenset[str] = frozenset()  # pointer parameters the kernel reads with tl.load

    @property
    def runtime(self) -> tuple[str, ...]:
        """Parameters passed at launch (not constexpr)."""
        return tuple(p for p in self.params if p not in self.constexprs)


def _is_jit(dec: ast.expr) -> bool:
    target = ast.unparse(dec.func if isinstance(dec, ast.Call) else dec)
    return any(word in target for word in ("jit", "autotune", "heuristics"))


def _heuristic_names(kernel: ast.FunctionDef) -> frozenset[str]:
    """Keys of ``@triton.heuristics({...})`` / ``values={...}`` dicts written as literals."""
    names = set()
    for dec in kernel.decorator_list:
        if isinstance(dec, ast.Call) and "heuristics" in ast.unparse(dec.func):
            for arg in [*dec.args, *(k.value for k in dec.keywords)]:
                if isinstance(arg, ast.Dict):
                    names |= {k.value for k in arg.keys if isinstance(k, ast.Constant)}
    return frozenset(names)


def _loaded(kernel: ast.FunctionDef) -> frozenset[str]:
    """Parameters that appear in the pointer argument of a ``tl.load`` (in-place candidates)."""
    params = {a.arg for a in kernel.args.args}
    out = set()
    for node in ast.walk(kernel):
        if (isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "load"
                and node.args):
            out |= {n.id for n in ast.walk(node.args[0])
                    if isinstance(n, ast.Name) and n.id in params}
    return frozenset(out)


def parse_kernel(spec: KernelSpec) -> TritonSignature:
    """Find ``@triton.jit def NAME(...)`` in the cell; CellError with the line and the fix.

    Parsed once per source: the worker checks the cell three or four times per config (the
    run, the compile, the static report), and each parse and walk of a published kernel's
    module took about 6 ms on the H200's host, 0.18 s of an 8-config sweep of fla's cumsum
    (bench/results/sweep_profile/2026-12-01-2309). Errors are not cached: each call raises.
    """
    return _parse_kernel(spec.source, spec.name, spec.body_line)


@functools.lru_cache(maxsize=64)
def _parse_kernel(source: str, name: str, body_line: int) -> TritonSignature:
    offset = body_line - 1
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise CellError(f"Python syntax error: {exc.msg}", line=offset + (exc.lineno or 1),
                        fix="Fix the Python syntax of the cell.") from None
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    def_lines = {f.name: offset + f.lineno for f in funcs}
    kernel = next((f for f in funcs if f.name == name), None)
    jitted = [f.name for f in funcs if any(_is_jit(d) for d in f.decorator_list)]
    if kernel is None or not any(_is_jit(d) for d in kernel.decorator_list):
        hint = f" The cell defines: {', '.join(jitted)}." if jitted else ""
        what = "is not decorated with @triton.jit" if kernel else "is not in the cell"
        raise CellError(f"the Triton kernel '{name}' {what}", line=1,
                        fix=f"Write @triton.jit def {name}(...) or name the kernel on the "
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
                           param_kinds(kernel), _heuristic_names(kernel), _loaded(kernel))


def check_cell(spec: KernelSpec) -> TritonSignature:
    """Host-side checks: kernel found, constexprs are tunables, tunables are used, a grid."""
    sig = parse_kernel(spec)
    for p in sig.constexprs:
        # a constexpr the inputs give is checked when they are bound (TritonBound)
        if (p not in spec.space.names and p not in sig.defaults and p not in sig.heuristics
                and spec.inputs is None):
            raise CellError(f"constexpr parameter {p} of {spec.name} has no value", line=sig.line,
                            fix=f"Return {p} from the inputs function (--inputs), declare it as "
                                f"a tunable: # ktune: {p} in [...], or give it a default: "
                                f"{p}: tl.constexpr = ...")
    in_exprs = " ".join(e.text for e in (spec.grid, spec.block, spec.flops, spec.bytes) if e)
    for name in spec.space.names:
        if (name not in sig.params and name not in LAUNCH_OPTIONS
                and not re.search(rf"\b{name}\b", in_exprs)):  # a tunable of the grid only
            raise CellError(f"tunable {name} is neither a parameter of {spec.name} nor a launch "
                            "option", line=spec.space.param(name).line,
                            fix=f"Add '{name}: tl.constexpr' to the kernel, or use one of "
                                f"{', '.join(LAUNCH_OPTIONS)}.")
    check_values(spec, sig.kinds, LAUNCH_OPTIONS)
    for what, why, fix in (
            ("block", "Triton runs 32 * num_warps threads per program",
             "Remove it; tune the threads with # ktune: num_warps in [4, 8]."),
            ("smem", "Triton sizes a kernel's shared memory itself",
             "Remove it; a require line can bound a tile's size instead.")):
        expr = getattr(spec, what)
        if expr is not None:  # it would be ignored, silently (issue 34: --block 0 ran)
            raise CellError(f"'{what} = {expr.text.strip()}' has no effect in a Triton cell: "
                            f"{why}", line=expr.line, fix=fix)
    if spec.grid is None:
        raise CellError("the launch grid is not given", line=1,
                        fix="Add: # ktune: grid = cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)  "
                            "(or --grid on the magic line)")
    bad = [o for o in spec.outputs if o not in sig.runtime]
    if bad:
        raise CellError(f"--out names '{bad[0]}', which is not a pointer parameter of "
                        f"{spec.name}", line=1, fix="Name the kernel's output arrays in --out.")
    return sig
