"""What ``require`` lines may read from the inputs: their scalars and their arrays' shapes.

A published kernel's constraint often depends on the problem, not only on the config: a block
must cover a row (``require BLOCK_N >= n_cols``), a tile must divide the sequence length. The
inputs function returns those values; here they join the names a ``require`` line sees, beside
the device limits. The inputs function is called only when a constraint names something that
is neither a tunable nor a limit, once per inputs function (its result is kept, arrays reduced
to :class:`ArrayFacts`), so a cell whose constraints read only tunables never pays for it. It is
called in the worker only (``DeviceWorker.limits`` asks it): an inputs function may allocate on
the GPU, and the notebook process opens no device context (issue 34).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from jupyter_ktune.errors import CellError
from jupyter_ktune.problem_key import inputs_key

_cache: dict[tuple, dict[str, Any]] = {}


@dataclass(frozen=True)
class ArrayFacts:
    """An input array as a constraint sees it: ``x.shape[1]``, ``x.ndim``, ``x.size``,
    ``x.itemsize``, ``x.dtype`` (its name, e.g. ``"bfloat16"``)."""

    shape: tuple[int, ...]
    dtype: str
    itemsize: int

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1


def constraint_names(space: Any) -> set[str]:
    """Names the space's ``require`` lines read that are not its tunables."""
    from jupyter_ktune.expr import free_names

    names: set[str] = set()
    for c in space.constraints:
        names |= free_names(getattr(c, "_code", None))
    return names - set(space.names)


def _fact(value: Any) -> Any:
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, np.generic):
        return value.item()
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "dtype"):
        dtype = str(value.dtype).removeprefix("torch.")
        item = getattr(value, "itemsize", None) or value.element_size()
        return ArrayFacts(tuple(int(s) for s in shape), dtype, int(item))
    return None


def input_facts(spec: Any, limits: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs' values that ``spec``'s constraints name and ``limits`` does not hold ({}
    when none, or when the cell has no inputs function)."""
    wanted = constraint_names(spec.space) - set(limits)
    if not wanted or spec.inputs is None:
        return {}
    # not its id: the function is unpickled afresh for every request the worker serves
    key = (spec.source_hash, inputs_key(spec.inputs))
    facts = _cache.get(key)
    if facts is None:
        facts = {k: f for k, f in ((k, _fact(v)) for k, v in _call(spec.inputs).items())
                 if f is not None}
        _cache.clear()  # one inputs function at a time: a cell's, while it is tuned
        _cache[key] = facts
    return {k: v for k, v in facts.items() if k in wanted}


def _call(fn: Any) -> dict[str, Any]:
    """The inputs function's set; its failure is one line, as when a run draws it."""
    try:
        args = fn()
    except Exception as exc:  # noqa: BLE001 - the user's function: any error is theirs
        raise CellError(f"the inputs function {getattr(fn, '__name__', fn)} failed: "
                        f"{type(exc).__name__}: {exc}", line=1) from None
    if not isinstance(args, dict):
        raise CellError(f"the inputs function returned a {type(args).__name__}, not a dict",
                        line=1, fix="Return dict(x=..., y=..., n=...) keyed by kernel parameter.")
    return args
