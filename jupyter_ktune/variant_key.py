"""Cache keys for what the worker keeps between requests: compiled variants, checked input sets.

A key must cover everything that changes what it caches. Keyed on the source alone, a cell rerun
with ``--out y`` corrected to ``--out out`` kept binding the old outputs (``KeyError: 'y'``)
until the worker restarted (issue 15). The worker (``runner.execute``) and backends that cache
built variants themselves (Pallas) take their keys from here.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec

# Fields that change only what is measured or reported, never what is compiled or bound.
NOT_COMPILED = frozenset({"flops", "bytes", "initial", "options"})


def code_hash(fn: Any) -> str:
    """Identify a notebook function by its code, defaults and closure, not its address.

    Re-running the cell that defines an unchanged function keeps its caches; editing it does not.
    """
    code = getattr(fn, "__code__", None)
    if code is None:
        return repr(fn)
    # a function in the closure (an inputs function bound to a shape) by its code, not its repr
    closure = tuple(code_hash(v) if hasattr(v, "__code__") else v
                    for v in (c.cell_contents for c in (fn.__closure__ or ()) if _cell_filled(c)))
    return f"{_code_text(code)}|{getattr(fn, '__defaults__', None)!r}|{closure!r}"


def _code_text(code: Any) -> str:
    """A code object's bytes, constants and names; nested code (a comprehension, a lambda) by its
    own text: its repr holds its address, which changed with every unpickling in the worker, so
    the key of a reference with a list comprehension changed per request and the worker drew
    inputs and ran the reference again for every config (issue 21)."""
    consts = ", ".join(_code_text(c) if hasattr(c, "co_code") else repr(c)
                       for c in code.co_consts)
    return f"{code.co_code.hex()}|({consts})|{code.co_names!r}"


def _cell_filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def variant_key(spec: KernelSpec, config: Config) -> tuple[str, Config]:
    """Return the key of one compiled, bindable variant: every spec field but those measured only.

    A field added to KernelSpec later is in the key unless listed in ``NOT_COMPILED``; of the
    options only the target architecture counts.
    """
    parts = [spec.options.arch]
    for f in dataclasses.fields(spec):
        if f.name not in NOT_COMPILED:
            value = getattr(spec, f.name)
            parts.append(f"{f.name}={code_hash(value) if callable(value) else repr(value)}")
    digest = hashlib.sha256("\0".join(parts).encode(errors="surrogatepass")).hexdigest()
    return digest[:32], config
