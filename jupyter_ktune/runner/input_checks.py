"""What an input set must be before a kernel runs on it: the checks that need the set itself.

Flags and directives are checked when the cell is parsed; these three can only be checked once
the inputs function has run, in the worker (issue 34), and each comes back as the run's
one-line reason:

* an input named like a tunable: the kernel takes the tunable's value, so the input was
  silently ignored while ``result.config`` reported the tunable;
* an output with no elements: nothing to compare, so the verification passed with
  "max abs err inf";
* an output that shares memory with another argument (``dict(x=x, out=x)``): every argument is
  copied into its own guarded buffer on the device, so the copies break the aliasing and an
  in-place kernel would be tested out of place. ktune refuses it rather than pretend; an
  in-place kernel is tested as one by naming the argument it updates in ``--out`` (its values
  are kept, not poisoned, before the verification run).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from jupyter_ktune.errors import CellError


def check_input_set(spec: Any, args: Mapping[str, Any]) -> None:
    """Raise the CellError of the first problem of ``args`` (see the module's docstring)."""
    for p in spec.space.params:
        if p.name in args:
            raise CellError(f"tunable {p.name} is also an input (the inputs function returns "
                            f"{p.name}): the kernel would get the tunable's value and ignore "
                            "the input's", line=p.line,
                            fix=f"Rename one of them (the tunable or the input {p.name}).")
    for name in spec.outputs:
        size = _size(args.get(name))
        if size == 0:
            raise CellError(f"output {name} from the inputs function has no elements, so there "
                            "is nothing to verify or time", line=1,
                            fix=f"Return a non-empty {name}, e.g. np.empty_like(x).")
    for name in spec.outputs:
        other = next((k for k, v in args.items()
                      if k != name and shares_memory(args.get(name), v)), None)
        if other is not None:
            raise CellError(f"output {name} and {other} are the same memory in the inputs "
                            f"function; ktune copies each argument to the device, so the "
                            f"kernel would not run in place", line=1,
                            fix=f"Return a separate {name} (np.empty_like({other})), or to test "
                                f"an in-place kernel pass the array once and name it in --out.")


def _size(value: Any) -> int | None:
    if value is None or not hasattr(value, "shape"):
        return None
    try:
        return int(np.prod(tuple(value.shape), dtype=np.int64))
    except (TypeError, ValueError):
        return None


def shares_memory(a: Any, b: Any) -> bool:
    """Whether two arguments overlap in memory: the same object, NumPy arrays that share
    elements, tensors over the same storage with overlapping bytes."""
    if a is None or b is None or not hasattr(a, "shape") or not hasattr(b, "shape"):
        return False
    if a is b:
        return True
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        try:
            return bool(np.shares_memory(a, b, max_work=10_000))
        except Exception:  # noqa: BLE001 - numpy's TooHardError: too costly to settle exactly
            return bool(np.may_share_memory(a, b))
    return _tensor_overlap(a, b)


def _tensor_overlap(a: Any, b: Any) -> bool:
    """Byte ranges of two torch tensors over one storage overlap (False for anything else)."""
    try:
        sa, sb = a.untyped_storage(), b.untyped_storage()
        if sa.data_ptr() != sb.data_ptr() or a.numel() == 0 or b.numel() == 0:
            return False
        lo_a, lo_b = a.data_ptr(), b.data_ptr()
        hi_a = lo_a + _extent(a) * a.element_size()
        hi_b = lo_b + _extent(b) * b.element_size()
        return lo_a < hi_b and lo_b < hi_a
    except (AttributeError, RuntimeError, TypeError):
        return False


def _extent(t: Any) -> int:
    """Elements from a tensor's first to one past its last (by its strides)."""
    return 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride(), strict=True))
