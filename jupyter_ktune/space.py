"""The tunable space: parameters, their allowed values, constraints, configs and neighbours.

A :class:`Space` is what the sliders are generated from and what a sweep walks. It knows nothing
about devices: constraints that depend on the device (a shared-memory limit) read named limits
from the environment passed to :meth:`Space.violations`.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import random
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from jupyter_ktune.errors import CellError
from jupyter_ktune.expr import compile_expr as compile_expr
from jupyter_ktune.expr import eval_expr as eval_expr
from jupyter_ktune.tunable_values import NOT_FOR_KERNEL, as_value, coerce_text, value_text

ParamValue = int | str | tuple[str, ...]  # a tuple: a list value (nvcc_flags)

_SWIZZLE_NAME = re.compile(r"^(none|(\d+)B)$", re.IGNORECASE)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

def cxx_value(value: ParamValue, choices: tuple[ParamValue, ...]) -> int:
    """Return the integer a value takes in C++ (template argument or macro).

    Integers pass through. Swizzle names map to their byte span (``none`` -> 0, ``128B`` -> 128), so
    ``template <int SWIZZLE>`` receives the same number ``kt::swizzle<SWIZZLE>`` expects. Any other
    string choice maps to its index in the list of choices.
    """
    if isinstance(value, int):
        return value
    if isinstance(value, tuple):
        return choices.index(value)
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

    # cached: the controls ask once per value, which made a 1000-value slider take 0.25 s
    @functools.cached_property
    def numeric(self) -> bool:
        """True when every value is an integer (a slider rather than a dropdown)."""
        return all(isinstance(v, int) for v in self.values)

    @functools.cached_property
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
        # a list (a JSON store key read back, nvcc_flags) is kept as a tuple: hashable, equal
        self._items = tuple(sorted((k, as_value(v)) for k, v in (values or {}).items()))
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
        return " ".join(f"{k}={value_text(v)}" for k, v in self._items) or "(no parameters)"


@dataclass(frozen=True)
class Constraint:
    """A Python expression over parameters and limits that a valid config makes true."""

    expr: str
    line: int | None = None
    comment: str = "//"  # the cell's directive comment (``#`` in Python cells), for fixes
    _code: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_code", compile_expr(self.expr, self.line, "require"))

    def holds(self, env: Mapping[str, Any]) -> bool:
        """Evaluate the constraint; a name it cannot resolve is a cell error, not False."""
        return bool(eval_expr(self._code, env, self.expr, self.line, self.comment))

    @property
    def broken(self) -> str:
        """What :meth:`Space.violations` says when this line does not hold."""
        return f"breaks 'require {self.expr.strip()}'"


SCAN_CONFIGS = 100_000  # configs a count or a search for the first valid one looks at
COUNT_EXACTLY = 20_000  # a count up to this many configs is exact (about 0.2 s)
ESTIMATE_DRAWS = 4_000  # random configs behind an estimated count (about 1.5% error at 50%)


@dataclass(frozen=True)
class SpaceCount:
    """How many configs of a space are valid: ``n``, and whether it was counted or estimated."""

    n: int
    exact: bool
    size: int

    def text(self) -> str:
        """``120 valid configs`` or ``about 3.2e+11 valid configs (of 1e+12, estimated)``."""
        if self.exact:
            return f"{self.n:,} valid configs"
        return f"about {self.n:.2g} valid configs (of {self.size:.2g}, estimated by sampling)"


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
        """Parameter values as the integers the kernel sees (the compiler controls that no
        kernel sees, ``name_prefix`` and ``nvcc_flags``, left out)."""
        return {p.name: p.cxx(config[p.name]) for p in self.params
                if p.name not in NOT_FOR_KERNEL}

    def py_env(self, config: Mapping[str, ParamValue]) -> dict[str, Any]:
        """Parameter values as a Python kernel (Triton, Pallas) takes them; see ``Param.py``
        (``name_prefix`` and ``nvcc_flags`` left out: no kernel takes them)."""
        return {p.name: p.py(config[p.name]) for p in self.params
                if p.name not in NOT_FOR_KERNEL}

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

    def complete(self, values: Mapping[str, Any],
                 limits: Mapping[str, Any] | None = None) -> Config:
        """The config with ``values`` (some of the tunables, checked) and, for the others, the
        first values in declaration order that satisfy every ``require`` with them: a partial
        ``--config num_warps=4`` runs where the cell allows it, not at the first listed values
        that a ``require BLOCK >= 32 * num_warps`` refuses. Where no completion is allowed (or
        none among the first :data:`SCAN_CONFIGS`), the first listed values: the run then says
        which ``require`` the given values break."""
        fixed = self.config(values)
        free = [p for p in self.params if p.name not in values]
        combos = itertools.product(*(p.values for p in free))
        for combo in itertools.islice(combos, SCAN_CONFIGS):
            c = Config({**dict(fixed), **dict(zip((p.name for p in free), combo, strict=True))})
            if not self.violations(c, limits):
                return Config({n: c[n] for n in self.names})
        return fixed

    def violations(self, config: Mapping[str, ParamValue],
                   limits: Mapping[str, Any] | None = None) -> list[str]:
        """Return the constraints ``config`` breaks, as readable reasons (empty = allowed).

        A panel's move is checked here once: the panel's banner formats the outcome
        (``ui.refusal``) and the worker takes it with the request (``execute.run_variant``)."""
        env = dict(limits or {})
        env.update(self.cxx_env(config))
        return [c.broken for c in self.constraints if not c.holds(env)]

    def configs(self, limits: Mapping[str, Any] | None = None,
                scan: int | None = None) -> Iterator[Config]:
        """Yield the valid configs in declaration order (first parameter slowest), lazily.

        ``scan`` stops after that many configs were looked at, valid or not.
        """
        combos = itertools.product(*(p.values for p in self.params))
        for combo in combos if scan is None else itertools.islice(combos, scan):
            c = Config(dict(zip(self.names, combo, strict=True)))
            if not self.violations(c, limits):
                yield c

    def at(self, index: int) -> Config:
        """Return config number ``index`` of :meth:`configs`'s order, constraints not applied.

        Decoded in mixed radix (the last parameter fastest), so a sampler can draw from a space
        of 10**12 configs without listing it.
        """
        if not 0 <= index < self.size:
            raise IndexError(f"config {index} of a space of {self.size}")
        out: dict[str, ParamValue] = {}
        for p in reversed(self.params):
            index, i = divmod(index, len(p.values))
            out[p.name] = p.values[i]
        return Config(out)

    def sample(self, k: int, limits: Mapping[str, Any] | None = None, seed: int = 0,
               tries: int | None = None) -> list[Config]:
        """Draw up to ``k`` distinct valid configs at random, without listing the space.

        Stops after ``tries`` draws (default ``20 * k``), so a space whose constraints allow
        almost nothing returns fewer than ``k`` instead of drawing forever.
        """
        rng = random.Random(seed)
        seen: set[int] = set()
        out: list[Config] = []
        n = self.size
        for _ in range(20 * k if tries is None else tries):
            if len(out) >= k or len(seen) >= n:
                break
            i = rng.randrange(n)
            if i in seen:
                continue
            seen.add(i)
            c = self.at(i)
            if not self.violations(c, limits):
                out.append(c)
        return out

    def count(self, limits: Mapping[str, Any] | None = None,
              scan: int = COUNT_EXACTLY) -> SpaceCount:
        """Count the valid configs: exactly up to ``scan`` configs, else estimated by sampling.

        The panel shows this count when it starts; listing a space of 10**12 configs to count
        it froze the notebook (issue 15).
        """
        if self.size <= scan:
            return SpaceCount(sum(1 for _ in self.configs(limits)), True, self.size)
        if not self.constraints:
            return SpaceCount(self.size, True, self.size)
        draws = min(scan, ESTIMATE_DRAWS)
        rng = random.Random(0)
        valid = sum(not self.violations(self.at(rng.randrange(self.size)), limits)
                    for _ in range(draws))
        return SpaceCount(round(self.size * valid / draws), False, self.size)

    def default(self, limits: Mapping[str, Any] | None = None) -> Config:
        """Return the first valid config; raise a cell error when none satisfies the constraints.

        Looks at the first :data:`SCAN_CONFIGS` configs in order, then at as many random ones,
        and gives up there: a space of 10**12 configs that allows none must not hang the cell.
        """
        for c in self.configs(limits, scan=SCAN_CONFIGS):
            return c
        if self.size > SCAN_CONFIGS:
            found = self.sample(1, limits, tries=SCAN_CONFIGS)
            if found:
                return found[0]
            raise CellError(f"no valid config among {2 * SCAN_CONFIGS:,} of the space's "
                            f"{self.size:,} (the first ones and random ones)",
                            fix="Relax a 'require' line, or start at one: --config NAME=value.")
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
    """Match a user-given value to one of ``p``'s allowed values ("128" -> 128, 128 -> "128B",
    a list or its JSON text -> the list value)."""
    value = coerce_text(value) if any(isinstance(v, tuple) for v in p.values) else value
    for allowed in p.values:
        if value == allowed or str(value).lower() == str(allowed).lower():
            return allowed
    for allowed in p.values:  # a swizzle given by its byte span: 128 -> "128B", 0 -> "none"
        # isdecimal, not isdigit: '²' is a digit that int() rejects (issue 9)
        if isinstance(allowed, str) and _SWIZZLE_NAME.match(allowed) and str(value).isdecimal() \
                and cxx_value(allowed, p.values) == int(value):
            return allowed
    raise CellError(f"{value!r} is not an allowed value of {p.name}",
                    fix=f"Choose one of {', '.join(map(value_text, p.values))}.")
