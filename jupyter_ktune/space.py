"""The tunable space: parameters, their allowed values, constraints, configs and neighbours.

A :class:`Space` is what the sliders are generated from and what a sweep walks. It knows nothing
about devices: constraints that depend on the device (a shared-memory limit) read named limits
from the environment passed to :meth:`Space.violations`.
"""

from __future__ import annotations

import ast
import itertools
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from jupyter_ktune.errors import CellError

ParamValue = int | str

_SWIZZLE_NAME = re.compile(r"^(none|(\d+)B)$", re.IGNORECASE)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Names usable inside constraint, grid and block expressions besides the parameters.
_SAFE_FUNCS: dict[str, Any] = {
    "min": min, "max": max, "abs": abs, "int": int, "round": round, "len": len,
    "cdiv": lambda a, b: -(-a // b), "log2": math.log2, "prod": math.prod,
}


def cxx_value(value: ParamValue, choices: tuple[ParamValue, ...]) -> int:
    """Return the integer a value takes in C++ (template argument or macro).

    Integers pass through. Swizzle names map to their byte span (``none`` -> 0, ``128B`` -> 128), so
    ``template <int SWIZZLE>`` receives the same number ``kt::swizzle<SWIZZLE>`` expects. Any other
    string choice maps to its index in the list of choices.
    """
    if isinstance(value, int):
        return value
    m = _SWIZZLE_NAME.match(value)
    if m:
        return 0 if m.group(2) is None else int(m.group(2))
    return choices.index(value)


@dataclass(frozen=True)
class Param:
    """One tunable: a name and its allowed values, in slider order."""

    name: str
    values: tuple[ParamValue, ...]
    line: int | None = None

    def __post_init__(self) -> None:
        if not _IDENT.match(self.name):
            raise CellError(f"'{self.name}' is not a valid parameter name", line=self.line,
                            fix="Use a C/Python identifier such as BLOCK_M.")
        if not self.values:
            raise CellError(f"parameter {self.name} has no values", line=self.line,
                            fix=f"Give at least one: {self.name} in [64, 128].")
        if len(set(self.values)) != len(self.values):
            raise CellError(f"parameter {self.name} lists a value twice", line=self.line,
                            fix="List each value once.")

    @property
    def numeric(self) -> bool:
        """True when every value is an integer (a slider rather than a dropdown)."""
        return all(isinstance(v, int) for v in self.values)

    @property
    def powers_of_two(self) -> bool:
        """True when every value is a positive power of two (the slider shows 2^k)."""
        return self.numeric and all(v > 0 and v & (v - 1) == 0 for v in self.values)  # type: ignore[operator]

    def cxx(self, value: ParamValue) -> int:
        """Return the C++ integer for ``value``; see :func:`cxx_value`."""
        return cxx_value(value, self.values)

    def py(self, value: ParamValue) -> Any:
        """Return ``value`` as a Python kernel (Triton, Pallas) takes it: as written.

        ``ACTIVATION in [relu, leaky_relu]`` arrives as ``"leaky_relu"`` (Triton takes strings
        as constexprs); the C++ index of :meth:`cxx` once reached Triton kernels, so their
        ``if ACTIVATION == "leaky_relu":`` never ran (issue 15). ``True``/``False`` and decimal
        numbers such as ``0.5`` arrive as the bool or float they read as. Only a swizzle
        tunable (every value ``none`` or ``<N>B``, one at least ``<N>B``) arrives as its byte
        span, which Mosaic GPU's ``swizzle=`` takes; ``[none, relu]`` stays names.
        """
        swizzle = all(isinstance(v, str) and _SWIZZLE_NAME.match(v) for v in self.values) and \
            any(str(v).lower() != "none" for v in self.values)
        return self.cxx(value) if swizzle else _py_value(value)


class Config(Mapping[str, ParamValue]):
    """A frozen, hashable assignment of a value to every parameter of a space.

    Examples
    --------
    >>> c = Config({"BLOCK": 128, "SWIZZLE": "64B"})
    >>> c["BLOCK"], c.key()
    (128, '{"BLOCK":128,"SWIZZLE":"64B"}')
    """

    __slots__ = ("_items", "_hash")

    def __init__(self, values: Mapping[str, ParamValue] | None = None):
        self._items = tuple(sorted((values or {}).items()))
        self._hash = hash(self._items)

    def __getitem__(self, key: str) -> ParamValue:
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Config):
            return self._items == other._items
        return isinstance(other, Mapping) and dict(self._items) == dict(other)

    def __repr__(self) -> str:
        return "Config(" + ", ".join(f"{k}={v!r}" for k, v in self._items) + ")"

    def key(self) -> str:
        """Canonical JSON text: the store's key part for this config."""
        return json.dumps(dict(self._items), sort_keys=True, separators=(",", ":"))

    def label(self) -> str:
        """Short human label, ``BLOCK=128 SWIZZLE=64B``."""
        return " ".join(f"{k}={v}" for k, v in self._items) or "(no parameters)"


@dataclass(frozen=True)
class Constraint:
    """A Python expression over parameters and limits that a valid config makes true."""

    expr: str
    line: int | None = None
    _code: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_code", compile_expr(self.expr, self.line, "require"))

    def holds(self, env: Mapping[str, Any]) -> bool:
        """Evaluate the constraint; a name it cannot resolve is a cell error, not False."""
        return bool(eval_expr(self._code, env, self.expr, self.line))


def compile_expr(expr: str, line: int | None, what: str) -> Any:
    """Compile a cell expression once, with a cell-line error when it is not valid Python."""
    fix = "Write a Python expression, e.g. cdiv(n, BLOCK)."
    try:
        tree = ast.parse(expr.strip(), mode="eval")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                raise CellError(f"'{node.attr}' is not allowed in a {what} expression", line=line)
        # compile() rejects what parses ('(yield)', 'await x'): also a cell error (issue 9)
        return compile(tree, f"<ktune {what}>", "eval")
    except SyntaxError as exc:
        raise CellError(f"cannot parse the {what} expression '{expr.strip()}' ({exc.msg})",
                        line=line, fix=fix) from None
    except (ValueError, RecursionError, MemoryError) as exc:  # a NUL byte, 300 nested '('
        why = type(exc).__name__ if isinstance(exc, RecursionError | MemoryError) else str(exc)
        raise CellError(f"cannot parse the {what} expression ({why})", line=line,
                        fix=fix) from None


def eval_expr(code: Any, env: Mapping[str, Any], text: str, line: int | None) -> Any:
    """Evaluate a compiled cell expression over ``env`` with a handful of safe helpers."""
    scope = dict(_SAFE_FUNCS)
    scope.update(env)
    try:
        return eval(code, {"__builtins__": {}}, scope)  # noqa: S307 - the user's own cell
    except NameError as exc:
        name = str(exc).split("'")[1] if "'" in str(exc) else str(exc)
        raise CellError(f"'{name}' in '{text.strip()}' is neither a parameter nor an input",
                        line=line, fix=f"Declare it (// ktune: {name} in [...]) or return it "
                        "from the inputs function.") from None
    except Exception as exc:  # noqa: BLE001 - any user-expression failure is a cell error
        raise CellError(f"'{text.strip()}' failed: {type(exc).__name__}: {exc}",
                        line=line) from None


@dataclass(frozen=True)
class Space:
    """Parameters and constraints; enumerates valid configs and their neighbours."""

    params: tuple[Param, ...] = ()
    constraints: tuple[Constraint, ...] = ()

    def __post_init__(self) -> None:
        names = [p.name for p in self.params]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            p = next(p for p in reversed(self.params) if p.name in dup)
            raise CellError(f"parameter {p.name} is declared twice", line=p.line,
                            fix="Keep one declaration.")

    @property
    def names(self) -> tuple[str, ...]:
        """Parameter names in declaration order."""
        return tuple(p.name for p in self.params)

    def param(self, name: str) -> Param:
        """Return the parameter called ``name`` or raise an error that lists the names."""
        for p in self.params:
            if p.name == name:
                return p
        raise CellError(f"'{name}' is not a parameter of this kernel",
                        fix=f"Parameters: {', '.join(self.names) or '(none)'}.")

    @property
    def size(self) -> int:
        """Number of configs before constraints."""
        return math.prod(len(p.values) for p in self.params)

    def cxx_env(self, config: Mapping[str, ParamValue]) -> dict[str, int]:
        """Parameter values as the integers the kernel sees."""
        return {p.name: p.cxx(config[p.name]) for p in self.params}

    def py_env(self, config: Mapping[str, ParamValue]) -> dict[str, Any]:
        """Parameter values as a Python kernel (Triton, Pallas) takes them; see ``Param.py``."""
        return {p.name: p.py(config[p.name]) for p in self.params}

    def config(self, values: Mapping[str, Any] | None = None, **kw: Any) -> Config:
        """Build a checked config; unspecified parameters take their first allowed value."""
        given = dict(values or {}, **kw)
        out: dict[str, ParamValue] = {}
        for name in given:
            self.param(name)  # raises with the list of names
        for p in self.params:
            v = given.get(p.name, p.values[0])
            v = _coerce(v, p)
            out[p.name] = v
        return Config(out)

    def violations(self, config: Mapping[str, ParamValue],
                   limits: Mapping[str, Any] | None = None) -> list[str]:
        """Return the constraints ``config`` breaks, as readable reasons (empty = allowed)."""
        env = dict(limits or {})
        env.update(self.cxx_env(config))
        return [f"breaks 'require {c.expr.strip()}'" for c in self.constraints if not c.holds(env)]

    def configs(self, limits: Mapping[str, Any] | None = None) -> Iterator[Config]:
        """Yield every valid config in declaration order (first parameter slowest)."""
        for combo in itertools.product(*(p.values for p in self.params)):
            c = Config(dict(zip(self.names, combo, strict=True)))
            if not self.violations(c, limits):
                yield c

    def default(self, limits: Mapping[str, Any] | None = None) -> Config:
        """Return the first valid config; raise a cell error when none satisfies the constraints."""
        for c in self.configs(limits):
            return c
        raise CellError("no combination of the parameters satisfies the constraints",
                        fix="Relax a 'require' line or widen the value lists.")

    def neighbours(self, config: Mapping[str, ParamValue],
                   limits: Mapping[str, Any] | None = None) -> list[Config]:
        """List valid configs one slider step away (one parameter moved to an adjacent value)."""
        out = []
        for p in self.params:
            i = p.values.index(config[p.name])
            for j in (i - 1, i + 1):
                if 0 <= j < len(p.values):
                    c = Config({**dict(config), p.name: p.values[j]})
                    if not self.violations(c, limits):
                        out.append(c)
        return out


_PY_FLOAT = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")


def _py_value(value: ParamValue) -> Any:
    """Read a directive value as Python does: ``"True"`` -> True, ``"0.5"`` -> 0.5, names as is."""
    if value in ("True", "False"):
        return value == "True"
    if isinstance(value, str) and _PY_FLOAT.match(value):
        return float(value)
    return value


def _coerce(value: Any, p: Param) -> ParamValue:
    """Match a user-given value to one of ``p``'s allowed values ("128" -> 128, 128 -> "128B")."""
    for allowed in p.values:
        if value == allowed or str(value).lower() == str(allowed).lower():
            return allowed
    for allowed in p.values:  # a swizzle given by its byte span: 128 -> "128B", 0 -> "none"
        # isdecimal, not isdigit: '²' is a digit that int() rejects (issue 9)
        if isinstance(allowed, str) and _SWIZZLE_NAME.match(allowed) and str(value).isdecimal() \
                and cxx_value(allowed, p.values) == int(value):
            return allowed
    raise CellError(f"{value!r} is not an allowed value of {p.name}",
                    fix=f"Choose one of {', '.join(map(str, p.values))}.")
