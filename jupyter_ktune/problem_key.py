"""What a result was measured on besides the kernel: the problem, as one key (issue 34).

A timing or a verdict belongs to the kernel's source AND to the problem it ran on: the inputs
function (what it draws: sizes, dtypes, scalars), the reference (what counts as correct), the
comparator, the outputs checked and the tolerances. Keyed by the kernel alone, a sweep after
``inputs()`` went from n=256 to n=65,536 served the old size's times, and a sweep after a buggy
reference was fixed served its failures (issue 34). The inputs function used to be keyed four
ways in six places (issue 37); every cache and the store now take its identity from here.

A function's identity (:func:`function_identity`) is its source where Python can find it, its
compiled code (bytecode, constants, names, nested code: the source of a cell that Python cannot
find, and what actually runs), its defaults, and the values of the closure cells and globals it
reads, each reduced to text that is the same in every process (no object addresses). Arrays it
reads are keyed by shape and dtype, not content (inputs are random by design, DESIGN.md), and
lists, dicts and sets by their type (it may fill them as it runs: a call log, a memo).

What the inputs function *returns* is known only once it has run, in the worker; so the worker
also reports the shapes, dtypes and scalars of the first input set (:func:`inputs_signature`),
the store keeps that beside each row, and a row is served only when it matches the current
one. That catches what no static key can see (an environment variable, a file the function
reads).
"""

from __future__ import annotations

import hashlib
import inspect
import re
import types
from collections.abc import Mapping
from typing import Any

import numpy as np

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_PLAIN = (int, float, complex, str, bytes, bool, type(None))
# containers a function may fill as it runs (a call log, a memo of drawn arrays): keyed by their
# type, or the key would change with every call and the worker redraw inputs for every config
# (issue 21); what they decide shows in the input set's shapes (inputs_signature)
_MUTABLE = (list, dict, set, bytearray)
_MAX_ITEMS = 64  # items of a container written out one by one; longer ones by type and length


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode(errors="surrogatepass")).hexdigest()[:16]


def function_identity(fn: Any) -> str:
    """Identify a notebook function by what decides its result, never by its address.

    Re-running the cell that defines an unchanged function keeps every cache and stored row;
    changing its code, a literal in it, a default, or a global or closure value it reads does
    not (``n = 4096`` and ``n = 8192`` are two identities).
    """
    return _identity(fn, set())


def _identity(fn: Any, seen: set[int]) -> str:
    code = getattr(fn, "__code__", None)
    if code is None:
        return _value_text(fn, seen)
    if id(fn) in seen:  # a recursive function, or two that call each other
        return f"<function {code.co_name}>"
    seen = seen | {id(fn)}
    closure = [_value_text(c.cell_contents, seen) for c in (fn.__closure__ or ())
               if _filled(c)]
    glb = getattr(fn, "__globals__", {})
    used = sorted(n for n in names_read(code) if n in glb)
    globals_text = [f"{n}={_value_text(glb[n], seen)}" for n in used]
    kwdefaults = sorted((getattr(fn, "__kwdefaults__", None) or {}).items())
    return "\x1f".join((_source(fn), _code_text(code),
                        _value_text(getattr(fn, "__defaults__", None), seen),
                        _value_text(kwdefaults, seen), *closure, *globals_text))


def names_read(code: Any) -> set[str]:
    """Every global (or attribute) name a code object and the code nested in it reads."""
    names: set[str] = set()
    stack = [code]
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack.extend(k for k in c.co_consts if hasattr(k, "co_code"))
    return names


def _source(fn: Any) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):  # defined by exec, or unpickled where its file is not
        return ""


def _code_text(code: Any) -> str:
    """A code object's bytes, constants and names; nested code (a comprehension, a lambda) by its
    own text: its repr holds its address, which changed with every unpickling in the worker, so
    the key of a reference with a list comprehension changed per request and the worker drew
    inputs and ran the reference again for every config (issue 21)."""
    consts = ", ".join(_code_text(c) if hasattr(c, "co_code") else repr(c)
                       for c in code.co_consts)
    return f"{code.co_code.hex()}|({consts})|{code.co_names!r}"


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def _value_text(v: Any, seen: set[int]) -> str:
    """A value as text that is the same in every process and changes when the value does."""
    if isinstance(v, _PLAIN):
        return repr(v)
    if isinstance(v, np.generic):  # a NumPy scalar: its value, not only its dtype
        return f"{v.dtype}({v.item()!r})"
    if isinstance(v, types.ModuleType):
        return f"<module {v.__name__}>"
    if isinstance(v, type):
        return f"<class {v.__module__}.{v.__qualname__}>"
    if hasattr(v, "__code__"):
        return _identity(v, seen)
    if isinstance(v, _MUTABLE):  # by type: its contents may change as the function runs
        return f"<{type(v).__name__}>"
    if isinstance(v, (tuple, frozenset)):
        items = sorted(v, key=repr) if isinstance(v, frozenset) else list(v)
        if len(items) > _MAX_ITEMS:
            return f"<{type(v).__name__} of {len(items)}: {_digest(repr(items))}>"
        return f"{type(v).__name__}({', '.join(_value_text(x, seen) for x in items)})"
    if isinstance(v, Mapping):
        items = sorted(((repr(k), x) for k, x in v.items()), key=lambda kv: kv[0])
        if len(items) > _MAX_ITEMS:
            return f"<mapping of {len(items)}: {_digest(repr(items))}>"
        return "{" + ", ".join(f"{k}: {_value_text(x, seen)}" for k, x in items) + "}"
    shape, dtype = getattr(v, "shape", None), getattr(v, "dtype", None)
    if shape is not None and dtype is not None:  # content is random by design: shape and dtype
        return f"<{type(v).__name__} {dtype} {tuple(shape)}>"
    func = getattr(v, "func", None)  # functools.partial
    if func is not None and hasattr(v, "args"):
        return (f"partial({_value_text(func, seen)}, {_value_text(v.args, seen)}, "
                f"{_value_text(getattr(v, 'keywords', {}), seen)})")
    try:
        text = repr(v)
    except Exception:  # noqa: BLE001 - an object whose repr fails: its type is all we know
        text = ""
    return f"<{type(v).__module__}.{type(v).__qualname__} {_digest(_ADDRESS.sub('', text))}>"


def problem_key(spec: Any) -> str:
    """One key for everything besides the kernel that decides a result: the inputs function,
    the reference, the comparator, the outputs checked, the tolerances and verification."""
    o = spec.options
    parts = (function_identity(spec.inputs), function_identity(spec.reference),
             function_identity(getattr(spec, "compare", None)), ",".join(spec.outputs),
             f"rtol={o.rtol!r} atol={o.atol!r} reduction={o.reduction!r} verify={o.verify!r}")
    return _digest("\x1e".join(parts))


def inputs_key(fn: Any) -> str:
    """The key of an inputs function alone (caches of what it returns: argument types)."""
    return _digest(function_identity(fn))


def inputs_signature(args: Mapping[str, Any]) -> str:
    """The shapes and dtypes of an input set's arrays and the values of its scalars, as a short
    hash: what the worker reports of the set a sweep's results were measured on."""
    parts = []
    for name in sorted(args):
        v = args[name]
        if isinstance(v, np.generic):
            v = v.item()
        shape, dtype = getattr(v, "shape", None), getattr(v, "dtype", None)
        if shape is not None and dtype is not None:
            parts.append(f"{name}:{dtype}{tuple(int(s) for s in shape)}")
        elif isinstance(v, _PLAIN):
            parts.append(f"{name}={v!r}")
        else:
            parts.append(f"{name}:{type(v).__qualname__}")
    return _digest(";".join(parts))
