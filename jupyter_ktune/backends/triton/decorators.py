"""``@triton.autotune`` and ``@triton.heuristics`` above ``@triton.jit``, as ktune runs them.

A published kernel is often an ``Autotuner`` wrapping a ``Heuristics`` wrapping the
``JITFunction`` (or a library's subclass of either, such as fla's ``fla_cache_autotune``).
ktune must not let the Autotuner tune inside ktune's own timing, so it launches the innermost
jit function itself, with:

- the config's values (the decorator's config list became the space, see :mod:`.describe`);
- each ``Heuristics`` value computed from the bound arguments, outermost layer first, as
  Triton computes them per call;
- the autotuner's hooks around every launch: ``reset_to_zero`` arguments zeroed and
  ``restore_value`` arguments restored before it (as in Triton's own benchmark, where they are
  part of the timed call), a user ``pre_hook``/``post_hook`` and the matching
  ``triton.Config``'s ``pre_hook`` called with the full argument dict.

The chain is unwrapped by attribute (``.fn`` until a plain Python function is under it), never
by type name, so wrappers from other libraries unwrap the same way.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

LAUNCH_FIELDS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


@dataclass
class KernelChain:
    """The jit function under its decorators, and the decorators that matter at launch."""

    jit: Any
    autotuners: list[Any] = field(default_factory=list)  # outermost first
    heuristics: list[Any] = field(default_factory=list)  # outermost first

    @property
    def heuristic_names(self) -> tuple[str, ...]:
        """The constexprs a heuristics decorator computes."""
        return tuple(n for h in self.heuristics for n in getattr(h, "values", {}))


def unwrap(kernel: Any) -> KernelChain:
    """Walk ``.fn`` from the cell's object down to the jit function (see the docstring)."""
    chain = KernelChain(kernel)
    obj, seen = kernel, set()
    while not inspect.isfunction(getattr(obj, "fn", None)) and id(obj) not in seen:
        seen.add(id(obj))
        if hasattr(obj, "configs") and hasattr(obj, "keys"):
            chain.autotuners.append(obj)
        elif isinstance(getattr(obj, "values", None), dict):
            chain.heuristics.append(obj)
        inner = getattr(obj, "fn", None)
        if inner is None:
            break
        obj = inner
    chain.jit = obj
    return chain


def config_values(config: Any) -> dict[str, Any]:
    """A ``triton.Config`` as one dict: its kwargs and its launch options (None left out)."""
    out = dict(getattr(config, "kwargs", {}))
    for k in LAUNCH_FIELDS:
        v = getattr(config, k, None)
        if v is not None:
            out[k] = v
    return out


def apply_heuristics(chain: KernelChain, args: dict[str, Any]) -> dict[str, Any]:
    """The heuristics' values for these arguments (each layer sees the ones before it)."""
    out: dict[str, Any] = {}
    for layer in chain.heuristics:
        for name, fn in layer.values.items():
            out[name] = fn({**args, **out})
    return out


class Hooks:
    """The autotuner's per-launch work for one bound argument set (see the module docstring)."""

    def __init__(self, chain: KernelChain, values: Mapping[str, Any], args: dict[str, Any]):
        self.args = args
        self.zero: list[str] = []
        self.saved: dict[str, Any] = {}
        self.pre: list[Any] = []
        self.post: list[Any] = []
        for tuner in chain.autotuners:
            self.zero += [n for n in getattr(tuner, "reset_to_zero", []) or [] if n in args]
            for n in getattr(tuner, "restore_value", []) or []:
                if n in args and hasattr(args[n], "clone"):
                    self.saved[n] = args[n].clone()
            if getattr(tuner, "user_defined_pre_hook", False):
                self.pre.append(tuner.pre_hook)
            if getattr(tuner, "user_defined_post_hook", False):
                self.post.append(tuner.post_hook)
            match = _matching_config(tuner.configs, values)
            if match is not None and getattr(match, "pre_hook", None):
                self.pre.append(match.pre_hook)

    def __bool__(self) -> bool:
        return bool(self.zero or self.saved or self.pre or self.post)

    def before(self) -> None:
        """Zero, restore and call the pre hooks."""
        for n in self.zero:
            self.args[n].zero_()
        for n, saved in self.saved.items():
            self.args[n].copy_(saved)
        for hook in self.pre:
            hook(self.args)

    def after(self) -> None:
        """Call the post hooks."""
        for hook in self.post:
            hook(self.args, exception=None)


def _matching_config(configs: list[Any], values: Mapping[str, Any]) -> Any:
    for cfg in configs:
        cv = config_values(cfg)
        if all(values.get(k, v) == v for k, v in cv.items()):
            return cfg
    return None


def param_default(kernel: Any, param: str) -> Any:
    """The default of the jit function's parameter ``param``, or None without one."""
    fn = getattr(kernel, "fn", kernel)
    p = inspect.signature(fn).parameters[param]
    return None if p.default is inspect.Parameter.empty else p.default
