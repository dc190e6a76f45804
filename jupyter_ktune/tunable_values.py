"""Values of a tunable beyond numbers and names: quoted strings and lists of strings.

``name_prefix in ["", "cutlass_"]`` needs the empty string as a value, and
``nvcc_flags in [[], ["--use_fast_math"], ["-maxrregcount=128"]]`` a list per value. A list value
is kept as a tuple of strings, so a :class:`~jupyter_ktune.space.Config` holding it stays
hashable; its store key is JSON (``["--use_fast_math"]``), which reads back as a list and becomes
the same tuple again (:func:`as_value`).

The compiler controls (:data:`COMPILER_CONTROLS`) are tunables with reserved names: they steer
the compiler, and never reach the kernel as a macro, template argument or constexpr
(:data:`NOT_FOR_KERNEL`; ``maxnreg`` is a Triton launch option, and a flag for nvcc).
"""

from __future__ import annotations

import json
import re
from typing import Any

from jupyter_ktune.errors import CellError

#: Reserved tunable names: what the compiler is told, not what the kernel computes.
COMPILER_CONTROLS = ("name_prefix", "nvcc_flags", "maxnreg")
#: Reserved names no kernel ever sees (``maxnreg`` stays a Triton launch option).
NOT_FOR_KERNEL = ("name_prefix", "nvcc_flags")


def as_value(value: Any) -> Any:
    """A value as a config holds it: a list (from JSON or the user) as a tuple of its items."""
    if isinstance(value, list | tuple):
        return tuple(as_value(v) for v in value)
    return value


def value_text(value: Any) -> str:
    """A value as a label shows it: ``128``, ``64B``, ``""`` for the empty string, a list as
    ``[--use_fast_math]`` (``[]`` when empty)."""
    if isinstance(value, tuple | list):  # a list: a saved panel's JSON read back
        return "[" + ", ".join(value_text(v) for v in value) + "]"
    if value == "":
        return '""'
    return str(value)


def split_items(text: str) -> list[str]:
    """Split a list's inside on commas outside brackets and quotes."""
    out, cur, depth, quote = [], [], 0, ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    out.append("".join(cur).strip())
    return out


_QUOTED = re.compile(r"""^(?P<q>['"])(?P<s>.*)(?P=q)$""", re.S)


def parse_item(item: str, line: int | None, name: str) -> Any:
    """One listed value: an integer, a quoted string (``""`` too), a bare name, or a list of
    strings (``["--use_fast_math", "-lineinfo"]``)."""
    if item.startswith("["):
        if not item.endswith("]"):
            raise CellError(f"cannot read the list value {item} of {name}", line=line,
                            fix=f'Write {name} in [[], ["--use_fast_math"]].')
        inner = [p for p in split_items(item[1:-1]) if p]
        values = tuple(parse_item(p, line, name) for p in inner)
        if any(not isinstance(v, str) for v in values):
            raise CellError(f"a list value of {name} holds strings only: {item}", line=line,
                            fix=f'Quote each flag: {name} in [[], ["-maxrregcount=128"]].')
        return values
    m = _QUOTED.match(item)
    if m and not m.group("s"):
        return ""  # name_prefix in ["", "cutlass_"]: the empty string is a value
    item = m.group("s") if m else item  # '128' reads as 128, as it always did
    try:
        return int(item, 0)
    except ValueError:
        return item


def parse_list(text: str, line: int | None, name: str) -> tuple[Any, ...]:
    """``[64, 128]``, ``[none, 64B]``, ``["", "cutlass_"]``, ``[[], ["-O3"]]`` as values (an
    empty item, as after a trailing comma, is skipped; a quoted empty string is a value)."""
    return tuple(parse_item(p, line, name) for p in split_items(text[1:-1]) if p)


def coerce_text(value: Any) -> Any:
    """A value given as text (``--config nvcc_flags=["-O3"]``, a JSON list) as a value."""
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            return as_value(json.loads(value))
        except ValueError:
            try:
                return parse_item(value.strip(), None, "the value")
            except CellError:
                return value
    return as_value(value)
