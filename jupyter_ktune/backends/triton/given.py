"""Constexprs that describe the problem, given by ``inputs()`` rather than declared as tunables.

A head dimension, a casting mode, an activation name or ``triton.next_power_of_2(n_cols)`` is
fixed by the problem, not tuned: the inputs function returns it beside the arrays, and it is
passed to the kernel as a constexpr (an input named like a tunable is refused when the inputs
are drawn, :mod:`jupyter_ktune.runner.input_checks`, issue 34). A constexpr that
neither a tunable, a default, a ``@triton.heuristics`` dict nor the inputs give is reported with
the fix that fits its kind (``HAVE_BETA`` is not ``in [64, 128]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from jupyter_ktune.errors import CellError


def as_constexpr(value: Any) -> Any:
    """A NumPy scalar as the Python value Triton specializes on; other values as they are."""
    return value.item() if isinstance(value, np.generic) else value


def given_constexprs(variant: Any, host_args: Mapping[str, Any]) -> dict[str, Any]:
    """The kernel's constexprs that the inputs give and the config does not."""
    return {p: as_constexpr(host_args[p]) for p in variant.sig.constexprs
            if p in host_args and p not in variant.constexprs}


def no_value(variant: Any, name: str, host_args: Mapping[str, Any]) -> CellError:
    """The error for a constexpr that nothing gives a value, naming the fixes."""
    got = ", ".join(host_args) or "nothing"
    return CellError(f"constexpr parameter {name} of {variant.spec.name} has no value: it is not "
                     f"a tunable, has no default, and the inputs function returned {got}",
                     line=variant.sig.line,
                     fix=f"Return {name} from the inputs function (e.g. {name}="
                         f"triton.next_power_of_2(n) for a block, True for a flag), or declare "
                         f"it: # ktune: {name} in [...]")


#: what an inputs function may return but a kernel parameter cannot take (issue 34: a Python
#: list for an array, a string for an array, reported with 20 lines of traceback)
NOT_PASSABLE = (list, str, bytes, dict, set)


def not_an_argument(name: str, value: Any) -> CellError:
    """The error for an input Triton cannot pass to runtime parameter ``name`` (a list...)."""
    return CellError(f"input {name} is a {type(value).__name__}; kernel parameter {name} takes "
                     "an array (a pointer) or a number", line=1,
                     fix=f"Return {name} from the inputs function as an array: "
                         f"np.asarray({name}, dtype=np.float32) or a torch tensor.")
