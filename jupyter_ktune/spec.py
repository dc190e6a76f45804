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
"""

from __future__ import annotations

import argparse
import hashlib
import keyword
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from jupyter_ktune.errors import CellError
from jupyter_ktune.space import Constraint, Param, Space, compile_expr, eval_expr

Lang = Literal["cuda", "triton", "pallas"]
LANGS: tuple[str, ...] = get_args(Lang)

_DIRECTIVE = re.compile(r"^\s*(?://|#)\s*ktune\s*:\s*(?P<body>.*?)\s*$")
_IN_STMT = re.compile(r"^(?P<name>[A-Za-z_]\w*)\s+in\s+(?P<values>.+)$")
_ASSIGN_STMT = re.compile(r"^(?P<key>grid|block|smem|flops|bytes)\s*=\s*(?P<expr>.+)$")
_REQUIRE_STMT = re.compile(r"^require\s+(?P<expr>.+)$")
_DIRECTIVE_HELP = ("Directives: 'NAME in [v1, v2]', 'NAME in pow2(16, 256)', "
                   "'NAME in range(1, 5)', "
                   "'grid = EXPR', 'block = EXPR', 'smem = EXPR', 'flops = EXPR', 'bytes = EXPR', "
                   "'require EXPR'.")


@dataclass(frozen=True)
class Expr:
    """A Python expression from the cell (grid, block, flops ...) with its cell line."""

    text: str
    line: int | None = None
    what: str = "expression"
    _code: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_code", compile_expr(self.text, self.line, self.what))

    def __call__(self, env: Mapping[str, Any]) -> Any:
        """Evaluate over ``env`` (parameters as C++ integers, scalar inputs, arrays)."""
        return eval_expr(self._code, env, self.text, self.line)


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
    static_only: bool = False
    panel: bool = True
    result_name: str | None = None  # notebook variable for the panel / result (-o, --name)


@dataclass(frozen=True)
class KernelSpec:
    """A kernel cell, parsed: source, backend, space, launch geometry and I/O functions."""

    name: str
    backend: Lang
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
    outputs: tuple[str, ...] = ()
    initial: Mapping[str, Any] = field(default_factory=dict)
    options: RunOptions = RunOptions()

    @property
    def source_hash(self) -> str:
        """SHA-256 over what changes the compiled code: an edited kernel never reuses timings."""
        h = hashlib.sha256()
        for part in (self.backend, self.name, self.source,
                     *(e.text if e else "" for e in (self.grid, self.block, self.smem))):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()[:16]

    def with_options(self, **kw: Any) -> KernelSpec:
        """Return a copy with some :class:`RunOptions` fields replaced."""
        return replace(self, options=replace(self.options, **kw))


MAX_VALUES = 4096  # values of one tunable


def _fits(values: range) -> bool:
    """Whether a range is short enough to list (len() itself overflows past 2**63)."""
    try:
        return len(values) <= MAX_VALUES
    except OverflowError:
        return False


def parse_values(text: str, line: int | None, name: str) -> tuple[int | str, ...]:
    """Parse ``[64, 128]``, ``[none, 64B]``, ``pow2(16, 256)`` or ``range(1, 5)``."""
    text = text.strip()
    m = re.match(r"^(pow2|range)\s*\((.*)\)$", text)
    if m:
        try:
            nums = [int(x, 0) for x in m.group(2).split(",")]
        except ValueError:
            raise CellError(f"{m.group(1)}() takes integers, got '{m.group(2)}'", line=line,
                            fix=f"Write {name} in {m.group(1)}(16, 256).") from None
        if m.group(1) == "range":
            if not 1 <= len(nums) <= 3:
                raise CellError(f"range() takes 1 to 3 integers, got {len(nums)}", line=line,
                                fix=f"Write {name} in range(1, 5).")
            if len(nums) == 3 and nums[2] == 0:
                raise CellError("range() step must not be zero", line=line,
                                fix=f"Write {name} in range(1, 5).")
            values = range(*nums)
            if not _fits(values):  # range(0, 10**9) would fill the memory (issue 9)
                raise CellError(f"range({m.group(2).strip()}) has more values than a slider or "
                                f"a sweep can use ({MAX_VALUES})", line=line,
                                fix=f"Write {name} in pow2(...) or a shorter range.")
            return tuple(values)
        if len(nums) != 2:
            raise CellError(f"pow2() takes 2 integers (lowest, highest), got {len(nums)}",
                            line=line, fix=f"Write {name} in pow2(16, 256).")
        lo, hi = nums
        if lo <= 0 or lo & (lo - 1) or hi & (hi - 1) or hi < lo:
            raise CellError(f"pow2({lo}, {hi}) needs powers of two with lo <= hi", line=line)
        return tuple(1 << k for k in range(lo.bit_length() - 1, hi.bit_length()))
    if not (text.startswith("[") and text.endswith("]")):
        raise CellError(f"cannot read the values of {name}: '{text}'", line=line,
                        fix=f"Write: {name} in [64, 128, 256].")
    out: list[int | str] = []
    for item in text[1:-1].split(","):
        item = item.strip().strip("'\"")
        if not item:
            continue
        try:
            out.append(int(item, 0))
        except ValueError:
            out.append(item)
    return tuple(out)


@dataclass
class _Draft:
    """Mutable collector used while parsing; frozen into a KernelSpec at the end."""

    params: dict[str, Param] = field(default_factory=dict)
    constraints: list[Constraint] = field(default_factory=list)
    exprs: dict[str, Expr] = field(default_factory=dict)


def _statement(stmt: str, line: int | None, draft: _Draft) -> None:
    if m := _IN_STMT.match(stmt):
        name = m.group("name")
        if name in draft.params:
            raise CellError(f"parameter {name} is declared twice", line=line,
                            fix="Keep one declaration.")
        draft.params[name] = Param(name, parse_values(m.group("values"), line, name), line)
    elif m := _ASSIGN_STMT.match(stmt):
        key = m.group("key")
        draft.exprs[key] = Expr(m.group("expr"), line, key)
    elif m := _REQUIRE_STMT.match(stmt):
        draft.constraints.append(Constraint(m.group("expr"), line))
    else:
        raise CellError(f"cannot read the ktune directive '{stmt}'", line=line, fix=_DIRECTIVE_HELP)


def parse_directives(body: str, body_line: int = 2) -> _Draft:
    """Collect ``ktune:`` statements from the cell body (``;`` separates statements)."""
    draft = _Draft()
    for i, text in enumerate(body.splitlines()):
        m = _DIRECTIVE.match(text)
        if not m:
            continue
        for stmt in _split_statements(m.group("body")):
            _statement(stmt, body_line + i, draft)
    return draft


def _split_statements(text: str) -> list[str]:
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


class _ArgParser(argparse.ArgumentParser):
    """argparse that raises a CellError on line 1 instead of exiting the kernel."""

    def error(self, message: str) -> None:  # type: ignore[override]
        usage = self.format_usage().strip().replace("usage:", "Usage:", 1)
        raise CellError(f"magic line: {message}", line=1, fix=usage)

    def exit(self, status: int = 0, message: str | None = None) -> None:  # type: ignore[override]
        raise CellError(f"magic line: {message or 'invalid arguments'}", line=1)


def _line_parser() -> _ArgParser:
    p = _ArgParser(prog="%%kernel", add_help=False)
    p.add_argument("name", help="the kernel function's name")
    p.add_argument("--backend", "-b", default="cuda")
    p.add_argument("--inputs", "-i", help="function returning a dict of the kernel's arguments")
    p.add_argument("--reference", "-r", help="function computing the correct outputs")
    p.add_argument("--out", default="", help="comma-separated output argument names")
    p.add_argument("--param", "-p", action="append", default=[], help="NAME=v1,v2,...")
    p.add_argument("--config", "-c", action="append", default=[], help="NAME=value to start at")
    for key in ("grid", "block", "smem", "flops", "bytes"):
        p.add_argument(f"--{key}")
    p.add_argument("--require", action="append", default=[])
    p.add_argument("--warm-cache", action="store_true")
    p.add_argument("--budget-ms", type=float, default=RunOptions.budget_ms)
    p.add_argument("--timeout", type=float, default=RunOptions.timeout_s)
    p.add_argument("--arch", default=RunOptions.arch)
    p.add_argument("--rtol", type=float)
    p.add_argument("--atol", type=float)
    p.add_argument("--no-verify", action="store_true")
    p.add_argument("--static-only", action="store_true")
    p.add_argument("--no-panel", action="store_true", help="return the RunResult, no controls")
    p.add_argument("-o", "--name", dest="result_name", metavar="VAR",
                   help="also store the panel (or RunResult) in this notebook variable")
    return p


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


def parse_cell(line: str, body: str, namespace: Mapping[str, Any] | None = None) -> KernelSpec:
    r"""Parse a ``%%kernel`` magic line and cell body into a :class:`KernelSpec`.

    Examples
    --------
    >>> spec = parse_cell("scale --backend cuda", "// ktune: BLOCK in [64, 128]\n__global__ ...")
    >>> spec.space.names
    ('BLOCK',)
    """
    namespace = {} if namespace is None else namespace
    try:
        words = shlex.split(line)
    except ValueError as exc:  # unbalanced quotes
        raise CellError(f"magic line: {exc}", line=1, fix="Balance the quotes.") from None
    args = _line_parser().parse_args(words)
    from jupyter_ktune.backends import backend_names

    known = sorted(set(LANGS) | set(backend_names()))
    if args.backend not in known:
        raise CellError(f"unknown backend '{args.backend}'", line=1,
                        fix=f"Use --backend {' | '.join(known)}.")
    draft = parse_directives(body)
    for item in args.param:
        name, _, values = item.partition("=")
        draft.params.pop(name.strip(), None)
        _statement(f"{name.strip()} in [{values}]", 1, draft)
    for key in ("grid", "block", "smem", "flops", "bytes"):
        if getattr(args, key):
            draft.exprs[key] = Expr(getattr(args, key), 1, key)
    draft.constraints.extend(Constraint(r, 1) for r in args.require)
    initial = {}
    for item in args.config:
        name, sep, value = item.partition("=")
        if not sep:
            raise CellError(f"--config {item} needs a value", line=1,
                            fix="Write --config BLOCK=128.")
        initial[name.strip()] = value.strip()
    space = Space(tuple(draft.params.values()), tuple(draft.constraints))
    if initial:
        try:
            space.config(initial)  # validates names and values now, on line 1
        except CellError as exc:
            raise CellError(exc.message, line=1, fix=exc.fix) from None
    options = RunOptions(verify=not args.no_verify, warm_cache=args.warm_cache,
                         budget_ms=args.budget_ms, timeout_s=args.timeout, arch=args.arch,
                         rtol=args.rtol, atol=args.atol, static_only=args.static_only,
                         panel=not args.no_panel, result_name=_variable(args.result_name))
    outputs = tuple(o.strip() for o in args.out.split(",") if o.strip())
    reference = _lookup(namespace, args.reference, "--reference")
    if reference is not None and not outputs:
        raise CellError("--reference needs the names of the outputs to check", line=1,
                        fix="Add --out y (comma-separated for several).")
    return KernelSpec(
        name=args.name, backend=args.backend, source=body, space=space,
        grid=draft.exprs.get("grid"), block=draft.exprs.get("block"), smem=draft.exprs.get("smem"),
        flops=draft.exprs.get("flops"), bytes=draft.exprs.get("bytes"),
        inputs=_lookup(namespace, args.inputs, "--inputs"), reference=reference,
        outputs=outputs, initial=initial, options=options)
