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

from jupyter_ktune.backends import Registered
from jupyter_ktune.backends.triton.params import check_values, param_kinds
from jupyter_ktune.compiler_controls import check_controls
from jupyter_ktune.errors import CellError
from jupyter_ktune.spec import KernelSpec
from jupyter_ktune.tunable_values import NOT_FOR_KERNEL

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
    #: parameters the kernel uses as tensor descriptors (``a_desc.load([...])``), with the
    #: cell line of the first such use
    descriptors: Mapping[str, int] = field(default_factory=dict)

    @property
    def runtime(self) -> tuple[str, ...]:
        """Parameters passed at launch (not constexpr)."""
        return tuple(p for p in self.params if p not in self.constexprs)


def _is_jit(dec: ast.expr) -> bool:
    target = ast.unparse(dec.func if isinstance(dec, ast.Call) else dec)
    return any(word in target for word in ("jit", "autotune", "heuristics"))


def _applied(value: ast.expr) -> tuple[str | None, list[ast.expr]]:
    """``triton.autotune(...)(triton.jit(fn))`` as (``fn``, the decorators it applies, outermost
    first, each written as it would stand above a ``def``); (None, []) for anything else."""
    decorators: list[ast.expr] = []
    node = value
    while isinstance(node, ast.Call) and node.args:
        if isinstance(node.func, ast.Call):  # triton.heuristics({...})(fn)
            decorators.append(node.func)
        elif len(node.args) > 1 or node.keywords:  # triton.jit(fn, do_not_specialize=[...])
            decorators.append(ast.Call(func=node.func, args=node.args[1:],
                                       keywords=node.keywords))
        else:  # triton.jit(fn)
            decorators.append(node.func)
        node = node.args[0]
    if not isinstance(node, ast.Name) or not any(_is_jit(d) for d in decorators):
        return None, []
    return node.id, decorators


def kernel_def(tree: ast.Module, name: str) -> tuple[ast.FunctionDef | None, list[ast.expr]]:
    """The kernel's ``def`` and its decorators, outermost first: those above the ``def``, or
    for ``name = triton.jit(fn)`` (``triton.autotune(...)(triton.heuristics(...)(fn))``, the
    style of several published packages) those applied by the assignment, then ``fn``'s own."""
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    for node in reversed(tree.body):  # the last binding of the name wins, as at run time
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name):
            inner, decorators = _applied(node.value)
            if inner in funcs:
                return funcs[inner], [*decorators, *funcs[inner].decorator_list]
            break
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node, list(node.decorator_list)
    return None, []


def _jitted_as(tree: ast.Module, fn: str) -> str | None:
    """The name a ``NAME = triton.jit(fn)`` assignment gives the function ``fn``, if any."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if _applied(node.value)[0] == fn:
                return node.targets[0].id
    return None


def _heuristic_names(decorators: list[ast.expr]) -> frozenset[str]:
    """Keys of ``@triton.heuristics({...})`` / ``values={...}`` dicts written as literals."""
    names = set()
    for dec in decorators:
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


_DESCRIPTOR_METHODS = ("load", "store", "gather", "scatter", "atomic_add", "atomic_max",
                       "atomic_min", "atomic_and", "atomic_or", "atomic_xor")


def _descriptors(kernel: ast.FunctionDef, offset: int) -> dict[str, int]:
    """Parameters used as host tensor descriptors (``a_desc.load([m, k])``: a pointer has no
    methods), with the cell line of the first use."""
    params = {a.arg for a in kernel.args.args}
    out: dict[str, int] = {}
    for node in ast.walk(kernel):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in _DESCRIPTOR_METHODS
                and isinstance(node.func.value, ast.Name) and node.func.value.id in params):
            line = offset + node.lineno
            out[node.func.value.id] = min(out.get(node.func.value.id, line), line)
    return out


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
    kernel, decorators = kernel_def(tree, name)
    if kernel is None or not any(_is_jit(d) for d in decorators):
        if kernel is not None and (jitted_as := _jitted_as(tree, name)) is not None:
            raise CellError(f"the Triton kernel '{name}' is jitted by assignment, as "
                            f"'{jitted_as}'", line=offset + kernel.lineno,
                            fix=f"Name that on the magic line: %%kernel {jitted_as}")
        jitted = [f.name for f in funcs if any(_is_jit(d) for d in f.decorator_list)]
        jitted += [n.targets[0].id for n in tree.body if isinstance(n, ast.Assign)
                   and isinstance(n.targets[0], ast.Name) and _applied(n.value)[0] in def_lines]
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
                           param_kinds(kernel), _heuristic_names(decorators), _loaded(kernel),
                           _descriptors(kernel, offset))


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
    check_controls(spec, Registered())
    in_exprs = " ".join(e.text for e in (spec.grid, spec.block, spec.flops, spec.bytes) if e)
    for name in spec.space.names:
        if name in NOT_FOR_KERNEL and name in sig.params:
            raise CellError(f"{name} is a compiler control (a reserved tunable name), and it "
                            f"never reaches the kernel: {spec.name} has a parameter {name}",
                            line=spec.space.param(name).line,
                            fix=f"Rename the kernel's parameter (e.g. {name}_value).")
        if (name not in sig.params and name not in LAUNCH_OPTIONS and name not in NOT_FOR_KERNEL
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
