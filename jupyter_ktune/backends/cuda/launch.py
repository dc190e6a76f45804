"""A CUDA C++ variant loaded on the device, and its binding to one set of arguments.

The grid, block and dynamic shared memory come from the cell's expressions evaluated over the
config and the inputs; resource limits are checked before a launch, so a variant that cannot
launch is "out of resources" with the numbers, not a CUDA error.

Every pointer argument is a copy inside a guarded device buffer (issue 15 items 5 and 6, layout
in :mod:`jupyter_ktune.measure.integrity`): the kernel gets the inner view, so a write past
either end lands in a guard and is reported after the verification run, and the inputs are read
back from the device to find an in-place kernel.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from jupyter_ktune.backends.cuda.constants import ConstantSymbol, fill
from jupyter_ktune.backends.cuda.source import SCALAR_TYPES, KernelSignature, outputs_read_in_place
from jupyter_ktune.backends.cuda.templates import NUMPY_OF_CTYPE
from jupyter_ktune.backends.cuda.tensormap import (
    LibcudaEncoder,
    is_tensormap_param,
    tensormap_value,
)
from jupyter_ktune.backends.torch_interop import (
    differing_elements,
    from_cupy,
    guards_touched,
    to_torch,
    warmed_torch,
)
from jupyter_ktune.backends.uploads import pristine
from jupyter_ktune.errors import CellError, OutOfResources
from jupyter_ktune.launch_geometry import dims, smem_bytes
from jupyter_ktune.measure.integrity import GuardBreach, guard_bits, guard_breach, guard_layout
from jupyter_ktune.measure.verify import poison, poison_bits
from jupyter_ktune.spec import KernelSpec

#: Tunables taken as the block size when the cell gives no ``block =`` line.
FALLBACK_BLOCK_NAMES = ("BLOCK", "BLOCK_SIZE", "THREADS")


def dim3(value: Any, what: str, spec: KernelSpec) -> tuple[int, int, int]:
    """``grid``/``block`` as CUDA's three sizes, checked (:func:`launch_geometry.dims`)."""
    ints = dims(value, getattr(spec, what), what)
    return ints + (1,) * (3 - len(ints))  # type: ignore[return-value]

def static_block(spec: KernelSpec, cxx: dict[str, int]) -> int | None:
    """Block size from the config alone, when it does not depend on the inputs (for occupancy)."""
    try:
        if spec.block is None:
            return next((cxx[n] for n in FALLBACK_BLOCK_NAMES if n in cxx), None)
        value = spec.block(cxx)
        sizes = value if isinstance(value, (tuple, list)) else (value,)
        # the product as written, not checked against the 1,024-thread limit here: the caller
        # (CudaBackend._check_block) says what is over it, on the block line
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 0
               for v in sizes):
            return int(np.prod([int(v) for v in sizes]))
        return int(np.prod(dim3(value, "block", spec)))
    except (CellError, KeyError, NameError, TypeError):
        return None

def static_smem(spec: KernelSpec, cxx: dict[str, int]) -> int | None:
    """Dynamic shared memory from the config alone (the cell's ``smem =`` line), or None when
    it has none or it depends on the inputs: the static report's occupancy counts it."""
    if not spec.smem:
        return None
    try:
        return int(spec.smem(cxx))
    except (CellError, KeyError, NameError, TypeError, ValueError):
        return None


class GuardedArray:
    """A copy of a host array on the device, inside a buffer with guards on both sides.

    ``xp`` is the array module (CuPy in the worker; tests pass a stand-in). Dtypes CuPy has no
    type for (bfloat16, fp8) travel as raw unsigned integers of their size. The host array is
    uploaded once per input set (:mod:`jupyter_ktune.backends.uploads`); the guarded copy is
    made from that pristine copy on the device, and :meth:`changed` compares against it there.
    """

    def __init__(self, xp: Any, host: np.ndarray):
        self.dtype = host.dtype
        raw = _device_dtype(xp, host.dtype)
        self.size = host.size
        self.before, after = guard_layout(raw, self.size)
        self.whole = xp.empty(self.before + self.size + after, dtype=raw)
        # a device fill through an integer view, as the poison (bytewise for 16-byte types)
        width, value = guard_bits(raw) or guard_bits(np.int8)  # type: ignore[misc]
        ints = self.whole.view(f"i{width}")
        scale = raw.itemsize // width
        ints[: self.before * scale].fill(value)
        ints[(self.before + self.size) * scale:].fill(value)
        self.inner = self.whole[self.before: self.before + self.size].reshape(host.shape)
        self.pristine = pristine(host, lambda h: _upload(xp, h, raw), f"cupy {raw}")
        self.inner[...] = self.pristine

    def read(self) -> np.ndarray:
        """A fresh host copy of the inner buffer, viewed as the host dtype."""
        return self.inner.get().view(self.dtype)

    def changed(self, torch: Any) -> int:
        """Elements of the copy whose bits differ from the pristine upload, counted on the
        device through torch over the same memory (DLPack)."""
        def raw(a: Any) -> Any:
            return torch.from_dlpack(a.reshape(-1).view(np.uint8))

        return differing_elements(torch, raw(self.inner), raw(self.pristine),
                                  self.inner.dtype.itemsize)

    def breach(self, name: str, torch: Any = None) -> GuardBreach | None:
        """What the kernel wrote into the guards, or None. With ``torch`` the guards are
        checked on the device first, and only a touched guard is copied to the host."""
        lo, hi = self.whole[: self.before], self.whole[self.before + self.size:]
        if torch is not None and not guards_touched(
                torch, *(torch.from_dlpack(g.view(np.uint8)) for g in (lo, hi))):
            return None
        return guard_breach(name, lo.get(), hi.get())


def _upload(xp: Any, host: np.ndarray, raw: np.dtype) -> Any:
    """``host`` on the device as ``raw`` (its own dtype, or its bits for bfloat16 / fp8)."""
    dev = xp.empty(host.shape, dtype=raw)
    dev.set(np.ascontiguousarray(host).view(raw))
    return dev


def _device_dtype(xp: Any, dtype: np.dtype) -> np.dtype:
    if dtype.kind != "V" and dtype.name not in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        try:
            xp.empty(0, dtype=dtype)
            return dtype
        except (TypeError, ValueError):
            pass
    return np.dtype(f"u{dtype.itemsize}")


class CudaBound:
    """A compiled kernel with its arguments on the device and its geometry resolved."""

    def __init__(self, variant: CudaVariant, host_args: Mapping[str, Any],
                 shared: Mapping[str, Any] | None = None):
        import cupy

        self._cupy = cupy
        self.variant = variant
        spec, sig = variant.spec, variant.sig
        # device limits (SM_COUNT for a persistent grid), then the inputs, then the tunables
        env: dict[str, Any] = dict(variant.limits)
        env.update(host_args)
        env.update(variant.cxx)
        self.grid = dim3(spec.grid(env), "grid", spec)  # type: ignore[misc]
        self.block = dim3(spec.block(env), "block", spec) if spec.block else variant.default_block
        self.smem = smem_bytes(spec.smem(env), spec.smem) if spec.smem else 0
        self._check_resources()
        self.outputs: dict[str, tuple[Any, np.dtype]] = {}
        self.device_args: dict[str, Any] = {}  # pointer name -> device array (a pipeline's
        shared = shared or {}  # later stages take the arrays its earlier stages uploaded)
        args: list[Any] = []
        devices = self.device_args
        self._guarded: dict[str, GuardedArray] = {}
        tensormaps: dict[int, str] = {}  # built once every array is on the device
        for p in sig.params:
            if p.name not in host_args:
                raise CellError(f"kernel parameter '{p.name}' has no value", line=sig.line,
                                fix=f"Return '{p.name}' from the inputs function (it returned "
                                f"{', '.join(host_args) or 'nothing'}).")
            value = host_args[p.name]
            if p.pointer:
                if not isinstance(value, np.ndarray):
                    raise CellError(f"kernel parameter '{p.name}' is a pointer but the inputs "
                                    f"give a {type(value).__name__}", line=sig.line,
                                    fix=f"Return a NumPy array for '{p.name}'.")
                if p.name in shared:  # a pipeline's earlier stage uploaded (and guards) it
                    dev = shared[p.name]
                else:
                    self._guarded[p.name] = g = GuardedArray(cupy, value)
                    dev = g.inner
                devices[p.name] = dev
                if p.name in spec.outputs:
                    self.outputs[p.name] = (dev, value.dtype)
                args.append(dev)
            elif is_tensormap_param(p.ctype):
                tensormaps[len(args)] = p.name
                args.append(None)
            else:
                ctype = variant.types.get(p.ctype, p.ctype)  # a by-value T of the template
                t = SCALAR_TYPES.get(ctype) or NUMPY_OF_CTYPE.get(ctype)
                if t is None:
                    raise CellError(f"kernel parameter '{p.name}' has type '{p.ctype}', which "
                                    "cannot be passed by value from Python", line=sig.line,
                                    fix="Use int, unsigned, long long, size_t, float or double.")
                try:  # '4096' or [1, 2] for an int: one line, not NumPy's error (issue 34)
                    if not isinstance(value, numbers.Real | np.number | np.bool_):
                        raise TypeError(p.name)
                    args.append(t(value))
                except (TypeError, ValueError, OverflowError):
                    raise CellError(f"input {p.name} is {type(value).__name__} {value!r:.40}; "
                                    f"kernel parameter {p.name} takes a {p.ctype}", line=1,
                                    fix=f"Return {p.name} from the inputs function as a number "
                                        f"that fits a {p.ctype}.") from None
        if tensormaps:
            encoder = LibcudaEncoder()
            for i, name in tensormaps.items():
                args[i] = tensormap_value(name, host_args[name], host_args, devices, env, encoder,
                                          sig.line)
        missing = [o for o in spec.outputs if o not in self.outputs]
        if missing:
            raise CellError(f"--out names '{missing[0]}', which is not a pointer parameter of "
                            f"{spec.name}", line=1, fix="Name the kernel's output arrays in --out.")
        self.args = tuple(args)
        fill(variant.module, spec, variant.constants, host_args)  # __constant__ from the inputs

    def _check_resources(self) -> None:
        fn = self.variant.fn
        threads = self.block[0] * self.block[1] * self.block[2]
        cap = fn.max_threads_per_block
        if threads > cap:
            raise OutOfResources(f"block of {threads} threads, but this variant can launch at most "
                                 f"{cap} ({fn.num_regs} registers per thread)")
        if self.smem > 48 * 1024:
            limit = self.variant.limits.get("SMEM_PER_BLOCK", 0)
            if self.smem + fn.shared_size_bytes > limit:
                raise OutOfResources(f"{self.smem + fn.shared_size_bytes} bytes of shared memory "
                                     f"per block; the device allows {limit}")
            fn.max_dynamic_shared_size_bytes = self.smem

    def launch(self) -> None:
        """Enqueue the kernel with this binding's grid, block and shared memory."""
        self.variant.fn(self.grid, self.block, self.args, shared_mem=self.smem)

    def poison_outputs(self) -> None:
        """Fill the device outputs with the poison value of their dtype: a fill through an
        integer view on the device; a host array copied over only where no such view exists."""
        in_place = outputs_read_in_place(self.variant.spec)
        for name, (dev, dtype) in self.outputs.items():
            if name in in_place:  # read by the kernel: it keeps its input values
                continue
            bits = poison_bits(dtype)
            if bits and dev.dtype.itemsize == bits[0] and dev.flags.c_contiguous:
                dev.view(f"i{bits[0]}").fill(bits[1])
                continue
            host = np.empty(dev.shape, dtype=dtype)
            poison(host)
            dev.set(host.view(dev.dtype))

    def read_outputs(self) -> dict[str, np.ndarray]:
        """Copy the outputs back to the host, viewed as their declared dtypes."""
        return {k: dev.get().view(dtype) for k, (dev, dtype) in self.outputs.items()}

    def read_inputs(self, names: Any) -> dict[str, np.ndarray]:
        """Fresh host copies of the pointer inputs among ``names``, read from the device."""
        return {n: self._guarded[n].read() for n in names
                if n in self._guarded and n not in self.outputs}

    def count_changed_inputs(self, names: Any) -> dict[str, tuple[int, int]]:
        """``{name: (elements changed, size)}`` for the pointer inputs among ``names``,
        compared with their pristine device copies through torch (nothing is read back);
        {} until torch's CUDA is started (then the caller reads them back)."""
        torch = warmed_torch()
        if torch is None:
            return {}
        return {n: (self._guarded[n].changed(torch), self._guarded[n].size) for n in names
                if n in self._guarded and n not in self.outputs}

    def device_outputs(self) -> dict[str, tuple[Any, np.dtype]]:
        """The outputs as torch tensors over the same device memory (DLPack), with their
        declared dtypes, for the on-device compare; {} until torch's CUDA is started, or where
        torch is not installed (then the outputs are compared on the host)."""
        torch = warmed_torch()
        if torch is None:
            return {}
        return {k: (from_cupy(torch, dev, dtype), dtype)
                for k, (dev, dtype) in self.outputs.items()}

    def to_device(self, value: np.ndarray) -> Any:
        """A host array as a torch tensor on this variant's GPU (for the reference)."""
        return to_torch(value, f"cuda:{self._cupy.cuda.Device().id}")

    def guard_breaches(self) -> list[GuardBreach]:
        """Writes the kernel made into the guards around any pointer argument."""
        torch = warmed_torch()
        found = (g.breach(name, torch) for name, g in self._guarded.items())
        return [b for b in found if b is not None]

    def launch_info(self) -> dict[str, Any]:
        """Return grid, block, shared memory and registers of this launch."""
        fn = self.variant.fn
        return {"grid": self.grid, "block": self.block, "dynamic_smem": self.smem,
                "registers": fn.num_regs, "static_smem": fn.shared_size_bytes,
                "local_bytes": fn.local_size_bytes, "kernel": self.variant.expr}

class CudaVariant:
    """One config compiled by NVRTC and loaded on the device."""

    def __init__(self, spec: KernelSpec, sig: KernelSignature, cxx: dict[str, int], fn: Any,
                 expr: str, limits: Mapping[str, int], types: Mapping[str, str] | None = None):
        self.spec, self.sig, self.cxx, self.fn, self.expr = spec, sig, cxx, fn, expr
        self.limits, self.types = limits, dict(types or {})
        self.module: Any = None  # the loaded CuPy module (also where it came from a cubin
        # file): its __constant__ symbols get inputs
        self.constants: tuple[ConstantSymbol, ...] = ()
        block_param = next((n for n in FALLBACK_BLOCK_NAMES if n in cxx), None)
        self.default_block = (cxx[block_param], 1, 1) if block_param else (256, 1, 1)

    def bind(self, host_args: Mapping[str, Any],
             shared: Mapping[str, Any] | None = None) -> CudaBound:
        """Copy the arguments to the device (those not in ``shared`` already) and resolve the
        launch geometry."""
        return CudaBound(self, host_args, shared)
