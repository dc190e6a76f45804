"""A Triton variant (the imported kernel, its constexprs and launch options) and its binding.

Arguments become torch tensors on the GPU, or on the CPU under the interpreter; the outputs are
kept where they are so verification can compare them in place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from jupyter_ktune.backends.triton.cell import LAUNCH_OPTIONS, TritonSignature
from jupyter_ktune.backends.triton.decorators import Hooks, apply_heuristics, unwrap
from jupyter_ktune.backends.triton.given import given_constexprs, no_value
from jupyter_ktune.errors import CellError
from jupyter_ktune.measure.verify import poison, poison_bits
from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec


def _torch_dtype(torch: Any, np_dtype: np.dtype) -> Any:
    return getattr(torch, np_dtype.name)


def to_torch(value: np.ndarray, device: str) -> Any:
    """A NumPy array (ml_dtypes bfloat16/fp8 included) as a torch tensor on ``device``."""
    import torch

    if value.dtype.kind == "V" or value.dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        raw = torch.from_numpy(np.ascontiguousarray(value).view(f"u{value.dtype.itemsize}"))
        return raw.view(_torch_dtype(torch, value.dtype)).to(device)
    return torch.from_numpy(np.ascontiguousarray(value)).to(device)


def to_numpy(tensor: Any, dtype: np.dtype) -> np.ndarray:
    """Copy a torch tensor back to the host, viewed as the NumPy dtype it came in as."""
    import torch

    host = tensor.detach().cpu()
    if host.dtype in (torch.bfloat16, getattr(torch, "float8_e4m3fn", None),
                      getattr(torch, "float8_e5m2", None)):
        raw = host.view(torch.uint8 if host.element_size() == 1 else torch.int16).numpy()
        return raw.view(dtype)
    return host.numpy().astype(dtype, copy=False)


class TritonBound:
    """The kernel with its arguments as tensors (CUDA or CPU) and its grid resolved."""

    def __init__(self, variant: TritonVariant, host_args: Mapping[str, Any]):
        spec, sig, cfg = variant.spec, variant.sig, variant.values
        self.variant = variant
        self.outputs: dict[str, tuple[Any, np.dtype]] = {}
        self.kwargs: dict[str, Any] = {}
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
            if isinstance(value, np.ndarray):
                dev = to_torch(value, variant.device)
                if p in spec.outputs:
                    self.outputs[p] = (dev, value.dtype)
                value = dev
            elif hasattr(value, "data_ptr"):  # a torch tensor from the inputs function
                value = value.to(variant.device).clone()
                if p in spec.outputs:
                    self.outputs[p] = (value, _np_dtype(value))
            self.kwargs[p] = value
        self.kwargs.update(variant.constexprs)
        self.constexprs = {**variant.constexprs, **given_constexprs(variant, host_args)}
        self.kwargs.update(self.constexprs)
        self.kwargs.update(variant.options)
        heuristic = apply_heuristics(variant.chain, self.kwargs)
        self.kwargs.update(heuristic)
        self.constexprs.update(heuristic)
        missing = [p for p in sig.constexprs if p not in self.kwargs and p not in sig.defaults]
        if missing:
            raise no_value(variant, missing[0], host_args)
        env: dict[str, Any] = {**variant.limits, **host_args, **self.constexprs, **cfg}
        grid = spec.grid(env)  # type: ignore[misc]
        self.grid = tuple(int(g) for g in (grid if isinstance(grid, tuple | list) else (grid,)))
        self._hooks = Hooks(variant.chain, cfg, self.kwargs)
        self._launcher = variant.chain.jit[self.grid]

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
                "options": dict(self.variant.options), "constexprs": dict(self.constexprs)}


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
