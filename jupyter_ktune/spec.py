"""KernelSpec: everything a ``%%kernel`` cell says, parsed once, with no device work.

A cell is the magic line plus a body. The body carries ``ktune:`` directive comments (``//`` in
CUDA C++, ``#`` in Python backends) that declare the space and the launch geometry::

    %%kernel scale --backend cuda --inputs inputs --reference reference --out y
    // ktune: BLOCK in [64, 128, 256, 512, 1024]; SWIZZLE in [none, 32B, 64B, 128B]
    // ktune: grid = cdiv(n, BLOCK); block = BLOCK
    // ktune: require BLOCK * 4 <= SMEM_PER_BLOCK
    ...

The same statements may be given on the magic line
(``--param BLOCK=64,128 --grid "cdiv(n,BLOCK)"``); the line wins over the body. Errors name
the cell line and the fix.

This module is the model: it imports no backend. What reading a cell needs from its backend
(the directive comment, which directives it takes) is handed in as :class:`CellSyntax`, and the
backend's own expansion of the spec runs after, in the API layer
(:func:`jupyter_ktune.api.parse_cell`).
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import keyword
import math
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from jupyter_ktune.directives import Expr, add_statement, parse_directives
from jupyter_ktune.errors import CellError
from jupyter_ktune.smem_tile import SmemTile, parse_smem_tile
from jupyter_ktune.space import Constraint, Space

MAX_TIMEOUT_S = 86400.0  # a day; more is a typo (and select() overflows on huge values)


def timeout_problem(seconds: Any) -> str | None:
    """Why ``seconds`` is not a usable request timeout (NaN, inf, <= 0, over a day), or None.

    A NaN or infinite timeout made the client give up on a reply it then read as the next
    request's (issue 15).
    """
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        return "not a number of seconds"
    if not 0 < seconds <= MAX_TIMEOUT_S:  # False for NaN too
        return f"must be more than 0 and at most {MAX_TIMEOUT_S:g} seconds"
    return None


class CellSyntax(Protocol):
    """What reading a cell needs to know of its backend (``backends.base.BackendBase``)."""

    #: The comment that starts a ``ktune:`` directive line (``//`` or ``#``).
    comment: str
    #: Whether the CUDA C++ directives (``include``, ``pipeline``, ``T = float``) are its own.
    cxx_directives: bool
    #: Whether the cell is Python, so ``--from module:kernel`` can read it.
    python_cells: bool


@dataclass(frozen=True)
class RunOptions:
    """How to run and time a variant. Defaults follow the project's measuring protocol."""

    verify: bool = True
    time: bool = True
    warm_cache: bool = False
    budget_ms: float = 200.0
    max_runs: int = 2000
    timeout_s: float = 60.0
    arch: str = "sm_90"
    rtol: float | None = None
    atol: float | None = None
    reduction: int | None = None  # K of the normwise tolerance (--reduction), None: estimated
    static_only: bool = False
    #: a run that went through may return before its static report (under an interpreter a
    #: compile for the target arch in a child process; on a GPU the reading of its SASS): a
    #: panel's session fetches it after
    static_later: bool = False
    panel: bool = True
    result_name: str | None = None  # notebook variable for the panel / result (-o, --name)


@dataclass(frozen=True)
class KernelSpec:
    """A kernel cell, parsed: source, backend, space, launch geometry and I/O functions."""

    name: str
    backend: str
    source: str
    space: Space = Space()
    body_line: int = 2
    grid: Expr | None = None
    block: Expr | None = None
    smem: Expr | None = None
    flops: Expr | None = None
    bytes: Expr | None = None
    inputs: Callable[..., Mapping[str, Any]] | None = None
    reference: Callable[..., Any] | None = None
    compare: Callable[..., Any] | None = None  # --compare fn(out, ref) -> bool | (bool, str)
    outputs: tuple[str, ...] = ()
    initial: Mapping[str, Any] = field(default_factory=dict)
    options: RunOptions = RunOptions()
    includes: tuple[tuple[str, int | None], ...] = ()  # (folder, cell line): -I for CUDA C++
    types: Mapping[str, tuple[str, int | None]] = field(default_factory=dict)  # T -> (float, line)
    pipeline: tuple[str, int | None] | None = None  # the pipeline directive's list, its line
    # source the cell's module needs besides the cell: @triton.jit helpers of earlier cells
    helpers: str = ""
    # where the kernel came from with --from: "liger_kernel.ops.rms_norm:_rms_norm_forward_kernel
    # (liger-kernel 0.8.5)"; the source is then the package's, after the cell's directives
    origin: str = ""
    package_source: str = ""  # that source alone, shown read-only in the result
    # Triton: ``a_desc.block_shape = [BLOCK_M, BLOCK_K]``, the block of a host TensorDescriptor
    block_shapes: Mapping[str, Any] = field(default_factory=dict)
    # Triton: ``Mid.shape = (cdiv(M, BLOCK),)``, an output allocated per config at that shape
    output_shapes: Mapping[str, Any] = field(default_factory=dict)
    # ``smem_tile = (TILE, TILE, float32)``: the tile the panel's swizzle bank map draws
    smem_tile: SmemTile | None = None
    # the name_prefix (a compiler control) already applied to ``name`` and ``source``
    symbol_prefix: str = ""

    @property
    def source_hash(self) -> str:
        """SHA-256 over what changes the compiled code: an edited kernel never reuses timings."""
        h = hashlib.sha256()
        for part in (self.backend, self.name, self.source, self.helpers,
                     *(e.text if e else "" for e in (self.grid, self.block, self.smem)),
                     *(path for path, _ in self.includes)):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()[:16]

    def with_options(self, **kw: Any) -> KernelSpec:
        """Return a copy with some :class:`RunOptions` fields replaced."""
        return replace(self, options=replace(self.options, **kw))


class _ArgParser(argparse.ArgumentParser):
    """argparse that raises a CellError on line 1 instead of exiting the kernel."""

    def error(self, message: str) -> None:  # type: ignore[override]
        unknown = [w for w in message.partition("unrecognized arguments:")[2].split()
                   if w.startswith("-")]
        if unknown:  # a misspelled flag: say which one was meant (issue 34)
            flags = sorted(o for o in self._option_string_actions if o.startswith("--"))
            names = {f.lstrip("-"): f for f in flags}  # compared without the dashes they share
            close = difflib.get_close_matches(unknown[0].lstrip("-"), names, n=1, cutoff=0.6)
            raise CellError(f"magic line: unknown flag {unknown[0]}", line=1,
                            fix=f"Did you mean {names[close[0]]}?" if close else
                            f"The flags of %%kernel are {', '.join(flags)}.")
        usage = " ".join(self.format_usage().split()).replace("usage:", "Usage:", 1)
        raise CellError(f"magic line: {message}", line=1, fix=usage)

    def exit(self, status: int = 0, message: str | None = None) -> None:  # type: ignore[override]
        raise CellError(f"magic line: {message or 'invalid arguments'}", line=1)


def _line_parser(default_backend: str | None = None) -> _ArgParser:
    p = _ArgParser(prog="%%kernel", add_help=False)
    p.add_argument("name", nargs="?", help="the kernel function's name")
    p.add_argument("--from", dest="origin", metavar="MODULE:KERNEL",
                   help="read the kernel from an installed package, e.g. "
                        "liger_kernel.ops.rms_norm:_rms_norm_forward_kernel")
    p.add_argument("--backend", "-b", default=default_backend)
    p.add_argument("--inputs", "-i", help="function returning a dict of the kernel's arguments")
    p.add_argument("--reference", "-r", help="function computing the correct outputs")
    p.add_argument("--out", default="", help="comma-separated output argument names")
    p.add_argument("--param", "-p", action="append", default=[], help="NAME=v1,v2,...")
    p.add_argument("--config", "-c", action="append", default=[], help="NAME=value to start at")
    for key in ("grid", "block", "smem", "flops", "bytes"):
        p.add_argument(f"--{key}")
    p.add_argument("--require", action="append", default=[])
    p.add_argument("--include", "-I", action="append", default=[],
                   help="CUDA C++ include folder (or package:folder)")
    p.add_argument("--warm-cache", action="store_true")
    p.add_argument("--budget-ms", type=float, default=RunOptions.budget_ms)
    p.add_argument("--timeout", type=float, default=RunOptions.timeout_s)
    p.add_argument("--arch", default=RunOptions.arch)
    p.add_argument("--rtol", type=float)
    p.add_argument("--atol", type=float)
    p.add_argument("--reduction", type=int, help="reduction length K for the tolerance")
    p.add_argument("--compare", help="function(out, ref) -> bool or (bool, message)")
    p.add_argument("--no-verify", action="store_true")
    p.add_argument("--static-only", action="store_true")
    p.add_argument("--no-panel", action="store_true", help="return the RunResult, no controls")
    p.add_argument("-o", "--name", dest="result_name", metavar="VAR",
                   help="also store the panel (or RunResult) in this notebook variable")
    return p


LineFunctions = tuple[Callable[..., Any], Callable[..., Any] | None, tuple[str, ...]]


def line_functions(line: str, namespace: Mapping[str, Any]) -> LineFunctions | None:
    """The inputs function, the reference (None under ``--no-verify``) and the outputs a magic
    line names, read without the parse's checks: None for a line without an inputs function or
    one the parse will refuse (it says why). A cell's start has the worker draw the first set
    from them while it opens the device (``runner.first_set``)."""
    try:
        args = _line_parser().parse_args(shlex.split(line))
    except (CellError, ValueError):
        return None
    inputs = namespace.get(args.inputs) if args.inputs else None
    reference = namespace.get(args.reference) if args.reference and not args.no_verify else None
    if not callable(inputs):
        return None
    outputs = tuple(o.strip() for o in args.out.split(",") if o.strip())
    return inputs, reference if callable(reference) else None, outputs


def _lookup(namespace: Mapping[str, Any], name: str | None, flag: str) -> Callable[..., Any] | None:
    if name is None:
        return None
    if name not in namespace:
        raise CellError(f"{flag} names '{name}', which is not defined in the notebook", line=1,
                        fix=f"Define it in an earlier cell: def {name}(): ...")
    obj = namespace[name]
    if not callable(obj):
        raise CellError(f"{flag} {name} is a {type(obj).__name__}, not a function", line=1,
                        fix=f"Pass a function: def {name}(): return dict(...)")
    return obj


def _variable(name: str | None) -> str | None:
    """Check the ``-o``/``--name`` variable: a Python identifier that is not a keyword."""
    if name is not None and (not name.isidentifier() or keyword.iskeyword(name)):
        raise CellError(f"-o/--name {name!r} is not a Python variable name", line=1,
                        fix="Write -o NAME, e.g. -o scale_panel.")
    return name


def _smem_tile(stmt: tuple[str, int | None, str] | None, space: Space,
               types: Mapping[str, tuple[str, int | None]]) -> SmemTile | None:
    """Parse the ``smem_tile`` statement; its expressions may read tunables only (the map is
    drawn from the config alone, with no inputs and no device)."""
    if stmt is None:
        return None
    args, line, comment = stmt
    tile = parse_smem_tile(args, line, comment, types)
    unknown = sorted(tile.names() - set(space.names))
    if unknown:
        raise CellError(f"smem_tile reads '{unknown[0]}', which is not a tunable", line=line,
                        fix="Give its sizes in tunables and numbers, e.g. "
                            "smem_tile = (TILE, TILE, float32).")
    return tile


def _check_numbers(args: argparse.Namespace) -> None:
    """Refuse tolerances and budgets that are not usable numbers: ``--rtol inf`` passed a kernel
    computing 3x for 2x, ``--atol -1`` said correct, ``--budget-ms nan`` failed deep in the
    timing protocol (issue 34)."""
    for flag, value, example in (("--rtol", args.rtol, "1e-3"), ("--atol", args.atol, "1e-5")):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise CellError(f"{flag} {value:g} is not a tolerance: it must be a finite number, "
                            "0 or more", line=1,
                            fix=f"Write {flag} {example}, or leave it out for the dtype's rule.")
    if not (math.isfinite(args.budget_ms) and args.budget_ms > 0):
        raise CellError(f"--budget-ms {args.budget_ms:g} is not a time budget: it must be a "
                        "finite number of milliseconds, more than 0", line=1,
                        fix="Write --budget-ms 200 (the timed runs' budget per variant).")


def read_cell(line: str, body: str, namespace: Mapping[str, Any],
              backends: Mapping[str, CellSyntax], default_backend: str) -> KernelSpec:
    """Read a ``%%kernel`` magic line and cell body into a :class:`KernelSpec`, before the
    checks that need more than the model (compiler controls, constant launch sizes) and the
    backend's expansion: :func:`jupyter_ktune.api.parse_cell` is the whole parse.

    ``backends`` maps each name ``--backend`` may give to its :class:`CellSyntax` (the
    registry's backends, looked up when asked); ``default_backend`` is the name without one.
    """
    try:
        words = shlex.split(line)
    except ValueError as exc:  # unbalanced quotes
        raise CellError(f"magic line: {exc}", line=1, fix="Balance the quotes.") from None
    args = _line_parser(default_backend).parse_args(words)
    if timeout_problem(args.timeout):
        raise CellError(f"--timeout {args.timeout:g} {timeout_problem(args.timeout)}", line=1,
                        fix="Write --timeout 60 (seconds).")
    _check_numbers(args)
    known = sorted(backends)
    if args.backend not in known:
        raise CellError(f"unknown backend '{args.backend}'", line=1,
                        fix=f"Use --backend {' | '.join(known)}.")
    syntax = backends[args.backend]
    comment = syntax.comment
    origin, package_source = "", ""
    if args.origin:
        from jupyter_ktune.from_package import read_kernel

        package_source, origin, kernel = read_kernel(args.origin, args.backend, backends)
        args.name = args.name or kernel
    if not args.name:
        raise CellError("magic line: the kernel's name is missing", line=1,
                        fix="Write %%kernel NAME --backend ..., or --from module:NAME.")
    draft = parse_directives(body)
    for item in args.param:
        name, _, values = item.partition("=")
        draft.params.pop(name.strip(), None)
        add_statement(f"{name.strip()} in [{values}]", 1, draft, comment)
    for key in ("grid", "block", "smem", "flops", "bytes"):
        if getattr(args, key):
            draft.exprs[key] = Expr(getattr(args, key), 1, key, comment)
    draft.constraints.extend(Constraint(r, 1, comment=comment) for r in args.require)
    initial = {}
    for item in args.config:
        name, sep, value = item.partition("=")
        if not sep:
            raise CellError(f"--config {item} needs a value", line=1,
                            fix="Write --config BLOCK=128.")
        initial[name.strip()] = value.strip()
    space = Space(tuple(draft.params.values()), tuple(draft.constraints))
    if args.reduction is not None and args.reduction < 1:
        raise CellError(f"--reduction {args.reduction} is not a reduction length", line=1,
                        fix="Give the length of the summed dimension, e.g. --reduction 4096.")
    options = RunOptions(verify=not args.no_verify, warm_cache=args.warm_cache,
                         budget_ms=args.budget_ms, timeout_s=args.timeout, arch=args.arch,
                         rtol=args.rtol, atol=args.atol, reduction=args.reduction,
                         static_only=args.static_only,
                         panel=not args.no_panel, result_name=_variable(args.result_name))
    if not syntax.cxx_directives and (draft.types or draft.pipeline or draft.includes
                                   or args.include):
        what = ("include" if draft.includes or args.include else
                "pipeline" if draft.pipeline else f"{next(iter(draft.types))} = ...")
        line_of = (draft.includes or [(None, 1)])[0][1] if what == "include" else (
            draft.pipeline[1] if draft.pipeline else next(iter(draft.types.values()))[1])
        raise CellError(f"'{what}' is a CUDA C++ directive; this cell is --backend "
                        f"{args.backend}", line=line_of,
                        fix=f"Remove it, or use --backend "
                            f"{' | '.join(n for n in known if backends[n].cxx_directives)}.")
    outputs = tuple(o.strip() for o in args.out.split(",") if o.strip())
    smem_tile = _smem_tile(draft.smem_tile, space, draft.types)
    reference = _lookup(namespace, args.reference, "--reference")
    if reference is not None and not outputs:
        raise CellError("--reference needs the names of the outputs to check", line=1,
                        fix="Add --out y (comma-separated for several).")
    if package_source:  # the cell holds directives only; the package's text follows them
        body = body.rstrip("\n") + "\n" + package_source if body.strip() else package_source
    spec = KernelSpec(
        name=args.name, backend=args.backend, source=body, space=space,
        grid=draft.exprs.get("grid"), block=draft.exprs.get("block"), smem=draft.exprs.get("smem"),
        flops=draft.exprs.get("flops"), bytes=draft.exprs.get("bytes"),
        inputs=_lookup(namespace, args.inputs, "--inputs"), reference=reference,
        compare=_lookup(namespace, args.compare, "--compare"), outputs=outputs, initial=initial,
        options=options, includes=(*((d, 1) for d in args.include), *draft.includes),
        types=dict(draft.types), pipeline=draft.pipeline, origin=origin,
        block_shapes=dict(draft.block_shapes), output_shapes=dict(draft.shapes),
        package_source=package_source, smem_tile=smem_tile)
    return spec


def check_initial(spec: KernelSpec) -> None:
    """Check the ``--config`` values against the space, on line 1: after the backend's
    expansion, since a kernel's own ``@triton.autotune`` list is a space too."""
    if spec.initial:
        try:
            spec.space.config(spec.initial)  # validates names and values now, on line 1
        except CellError as exc:
            raise CellError(exc.message, line=1, fix=exc.fix) from None
