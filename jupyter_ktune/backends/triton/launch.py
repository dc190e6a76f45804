"""A Triton variant (the imported kernel, its constexprs and launch options) and its binding.

Arguments become torch tensors on the GPU, or on the CPU under the interpreter; the outputs are
kept where they are so verification can compare them in place. Every array argument is a copy
inside a guarded buffer (:mod:`jupyter_ktune.measure.integrity`, issue 15 items 5 and 6): the
kernel gets the inner view, so a write past either end lands in a guard and is reported, and an
in-place kernel changes the copy, never the worker's host inputs (on the CPU, ``torch.from_numpy``
alone would hand the kernel the host array itself). A non-contiguous torch tensor from the inputs
function is cloned as it is (its strides kept), without guards.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from jupyter_ktune.backends.base import QUICK_LAUNCH
from jupyter_ktune.backends.torch_interop import (
    differing_elements,
    guards_touched,
    to_numpy,
    to_torch,
)
from jupyter_ktune.backends.triton import direct_launch
from jupyter_ktune.backends.triton.cell import LAUNCH_OPTIONS, TritonSignature
from jupyter_ktune.backends.triton.config_arguments import (
    block_shape,
    is_descriptor,
    not_a_descriptor,
    rebind,
    sized_output,
)
from jupyter_ktune.backends.triton.decorators import Hooks, apply_heuristics, unwrap
from jupyter_ktune.backends.triton.given import (
    NOT_PASSABLE,
    given_constexprs,
    no_value,
    not_an_argument,
)
from jupyter_ktune.backends.uploads import pristine
from jupyter_ktune.errors import CellError
from jupyter_ktune.launch_geometry import dims
from jupyter_ktune.measure.integrity import GUARD_BYTE, guard_breach, guard_layout
from jupyter_ktune.measure.verify import poison, poison_bits
from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec


class Guarded:
    """A copy of one array argument on ``device`` inside a buffer with guards on both sides.

    A host array is uploaded once per input set (:mod:`jupyter_ktune.backends.uploads`) and
    copied from that pristine copy on the device, which is also what :meth:`changed` compares
    against; a tensor from the inputs function is copied from itself (no pristine copy).
    """

    def __init__(self, value: Any, device: str):
        import torch

        if isinstance(value, np.ndarray):
            src = self.pristine = pristine(value, lambda v: to_torch(v, device), f"torch {device}")
        else:
            src, self.pristine = value.detach(), None
        self.item, self.size = src.element_size(), src.numel()
        self.before, after = guard_layout(np.dtype((np.void, self.item)), self.size)
        self.whole = torch.empty(self.before + self.size + after, dtype=src.dtype, device=device)
        raw = self.whole.view(torch.uint8)
        raw[: self.before * self.item].fill_(GUARD_BYTE)
        raw[(self.before + self.size) * self.item:].fill_(GUARD_BYTE)
        self.inner = self.whole[self.before: self.before + self.size].view(src.shape)
        self.inner.copy_(src)

    def changed(self) -> int | None:
        """Elements of the copy whose bits differ from the pristine upload (on the device);
        None without a pristine copy."""
        if self.pristine is None:
            return None
        import torch

        return differing_elements(torch, self.inner.reshape(-1).view(torch.uint8),
                                  self.pristine.reshape(-1).view(torch.uint8), self.item)

    def breach(self, name: str) -> Any:
        """What the kernel wrote into the guards (a GuardBreach), or None. Checked on the device
        first; only a touched guard is copied to the host to say where."""
        import torch

        raw = self.whole.view(torch.uint8)
        cut, end = self.before * self.item, (self.before + self.size) * self.item
        if not guards_touched(torch, raw[:cut], raw[end:]):
            return None
        elem = np.dtype((np.void, self.item))
        return guard_breach(name, raw[:cut].cpu().numpy().view(elem),
                            raw[end:].cpu().numpy().view(elem))


def _guarded(value: Any, device: str) -> tuple[Any, Guarded | None]:
    """``(tensor the kernel gets, its guards or None)`` for an array argument."""
    if isinstance(value, np.ndarray) or value.is_contiguous():
        g = Guarded(value, device)
        return g.inner, g
    return value.to(device).clone(), None


class TritonBound:
    """The kernel with its arguments as tensors (CUDA or CPU) and its grid resolved."""

    def __init__(self, variant: TritonVariant, host_args: Mapping[str, Any]):
        spec, cfg = variant.spec, variant.values
        self.variant = variant
        self.outputs: dict[str, tuple[Any, np.dtype]] = {}
        self.inputs: dict[str, tuple[Any, np.dtype]] = {}
        self._guards: dict[str, Guarded] = {}
        self.kwargs, self.constexprs = call_arguments(variant, host_args, self._array)
        env: dict[str, Any] = {**variant.limits, **host_args, **self.constexprs, **cfg}
        # checked before the launch: 'abc', 2.5, 0 or BLOCK * 10**30 is one line (issue 34)
        self.grid = dims(spec.grid(env), spec.grid, "grid")  # type: ignore[misc]
        self._hooks = Hooks(variant.chain, cfg, self.kwargs)
        self._launcher = variant.chain.jit[self.grid]
        #: appended to the timing's method: how the kernel is launched, when not Triton's way
        self.launch_note = direct_launch.prepare(variant.chain.jit, self.grid, self.kwargs,
                                                 QUICK_LAUNCH.get()) \
            if variant.device != "cpu" and direct_launch.per_signature_launcher() else ""

    def _array(self, name: str, value: Any, block: list[int] | None) -> Any:
        """The guarded device copy of one array argument (outputs and inputs recorded); for a
        tensor descriptor, a new descriptor over the copy of its tensor with ``block``."""
        desc, value = (value, value.base) if is_descriptor(value) else (None, value)
        if not isinstance(value, np.ndarray) and not hasattr(value, "data_ptr"):
            value = np.asarray(value)
        dtype = value.dtype if isinstance(value, np.ndarray) else _np_dtype(value)
        tensor, guards = _guarded(value, self.variant.device)
        if guards is not None:
            self._guards[name] = guards
        (self.outputs if name in self.variant.spec.outputs else self.inputs)[name] = (tensor, dtype)
        return tensor if desc is None else rebind(desc, tensor, block)

    def launch(self) -> None:
        """Enqueue the kernel (the interpreter runs it right away), with the autotuner's
        hooks around it when the kernel has some (:class:`.decorators.Hooks`)."""
        if self._hooks:
            self._hooks.before()
            self._launcher(**self.kwargs)
            self._hooks.after()
            return
        self._launcher(**self.kwargs)

    def poison_outputs(self) -> None:
        """Fill the outputs with NaN / the integer sentinel: a fill through an integer view on
        the device; a host array copied over only where no such view exists."""
        import torch

        ints = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
        for name, (dev, dtype) in self.outputs.items():
            if name in self.variant.inplace:
                continue  # the kernel reads it too: it keeps its input values (see TritonVariant)
            bits = poison_bits(dtype)
            if bits and dev.element_size() == bits[0] and dev.is_contiguous():
                dev.view(ints[bits[0]]).fill_(bits[1])
                continue
            host = np.empty(tuple(dev.shape), dtype=dtype)
            poison(host)
            dev.copy_(to_torch(host, self.variant.device))

    def read_outputs(self) -> dict[str, np.ndarray]:
        """Copy the outputs back to the host."""
        return {k: to_numpy(dev, dtype) for k, (dev, dtype) in self.outputs.items()}

    def read_inputs(self, names: Any) -> dict[str, np.ndarray]:
        """Fresh host copies of the bound inputs among ``names`` (what the kernel left there)."""
        return {n: np.array(to_numpy(*self.inputs[n]), copy=True) for n in names
                if n in self.inputs}

    def count_changed_inputs(self, names: Any) -> dict[str, tuple[int, int]]:
        """``{name: (elements changed, size)}`` for the inputs among ``names`` that have a
        pristine copy on the device, compared there (the others are read back by the caller)."""
        out = {}
        for n in names:
            g = self._guards.get(n)
            if n in self.inputs and g is not None and g.pristine is not None:
                out[n] = (g.changed(), g.size)
        return out

    def guard_breaches(self) -> list[Any]:
        """Writes the kernel made into the guards around any array argument."""
        found = (g.breach(name) for name, g in self._guards.items())
        return [b for b in found if b is not None]

    def device_outputs(self) -> dict[str, tuple[Any, np.dtype]]:
        """The output tensors where they are, with their declared dtypes (compared in place)."""
        return dict(self.outputs)

    def to_device(self, value: np.ndarray) -> Any:
        """A host array as a tensor beside the outputs (for the reference)."""
        return to_torch(value, self.variant.device)

    def launch_info(self) -> dict[str, Any]:
        """Grid, threads per program and options of this launch."""
        warps = int(self.variant.options.get("num_warps", 4))
        return {"grid": self.grid, "block": (32 * warps, 1, 1), "kernel": self.variant.spec.name,
                "options": dict(self.variant.options), "constexprs": dict(self.constexprs),
                **({"launcher": "cuLaunchKernel (Triton's launcher not built yet)"}
                   if self.launch_note else {})}


def call_arguments(variant: TritonVariant, host_args: Mapping[str, Any],
                   array: Callable[[str, Any, list[int] | None], Any]
                   ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(keyword arguments of the launch, constexpr values)`` for one config.

    ``array(name, value, block)`` turns each array argument into what the kernel gets: a
    guarded device tensor at launch (a descriptor over one, with the config's ``block``, for a
    host TensorDescriptor), a dtype placeholder when the compile pool warms Triton's cache
    (:mod:`.static`). Both sides build their arguments here, so the pool compiles exactly the
    specialisation the worker's first launch looks up (issue 21).
    """
    sig, cfg = variant.sig, variant.values
    kwargs: dict[str, Any] = {}
    for p in sig.runtime:
        if p in host_args:
            value = host_args[p]
        elif p in cfg:
            value = cfg[p]
        elif p in sig.defaults:
            continue
        else:
            raise CellError(f"kernel parameter '{p}' has no value", line=sig.line,
                            fix=f"Return '{p}' from the inputs function (it returned "
                                f"{', '.join(host_args) or 'nothing'}).")
        if p in variant.spec.output_shapes:  # an output sized by the config: allocated so
            value = sized_output(variant.spec, p, value, {**variant.limits, **host_args, **cfg})
        if p in sig.descriptors and not is_descriptor(value):
            raise not_a_descriptor(p, sig.descriptors[p], value)
        if is_descriptor(value):  # a host TensorDescriptor: its tensor, the config's block
            env = {**variant.limits, **host_args, **cfg}
            value = array(p, value, block_shape(variant.spec, p, env))
        elif isinstance(value, np.ndarray) or hasattr(value, "data_ptr"):
            value = array(p, value, None)  # a NumPy array or a torch tensor from the inputs
        elif isinstance(value, NOT_PASSABLE):
            raise not_an_argument(p, value)
        kwargs[p] = value
    kwargs.update(variant.constexprs)
    constexprs = {**variant.constexprs, **given_constexprs(variant, host_args)}
    kwargs.update(constexprs)
    kwargs.update(variant.options)
    heuristic = apply_heuristics(variant.chain, kwargs)
    kwargs.update(heuristic)
    constexprs.update(heuristic)
    missing = [p for p in sig.constexprs if p not in kwargs and p not in sig.defaults]
    if missing:
        raise no_value(variant, missing[0], host_args)
    return kwargs, constexprs


def _np_dtype(tensor: Any) -> np.dtype:
    name = str(tensor.dtype).removeprefix("torch.")
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


class TritonVariant:
    """One config: the imported kernel plus its constexpr values and launch options."""

    def __init__(self, spec: KernelSpec, sig: TritonSignature, kernel: Any, config: Config,
                 device: str, limits: Mapping[str, int] | None = None):
        self.spec, self.sig, self.device = spec, sig, device
        self.chain = unwrap(kernel)  # @triton.autotune / @triton.heuristics / @triton.jit
        self.kernel = self.chain.jit
        self.values = spec.space.py_env(config)  # "leaky_relu", not its index (issue 15)
        self.constexprs = {p: self.values[p] for p in sig.constexprs if p in self.values}
        self.options = {k: self.values[k] for k in LAUNCH_OPTIONS if k in self.values}
        # what the grid may read besides parameters and inputs (persistent kernels: NUM_SMS)
        self.limits = dict(limits or {})
        self.limits.setdefault("NUM_SMS", self.limits.get("SM_COUNT", 132))
        # An output the kernel also reads (q rotated where it is, x += y) is updated in place:
        # poisoning it would destroy the input, so it keeps its input values before the
        # verification launch; a kernel that never writes it still fails the comparison.
        self.inplace = frozenset(spec.outputs) & sig.loaded

    def bind(self, host_args: Mapping[str, Any]) -> TritonBound:
        """Move the arguments to the device and resolve the grid."""
        return TritonBound(self, host_args)

