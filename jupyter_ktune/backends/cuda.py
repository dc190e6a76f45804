"""CUDA C++ backend: NVRTC through CuPy to run, nvcc for the static report on any machine.

Runtime compilation always passes ``-lineinfo`` (so ncu and the per-line stall view can map SASS
back to cell lines) and ``-I`` to the folder holding ``ktune.cuh``. The grid, block and dynamic
shared memory come from the cell's expressions evaluated over the config and the inputs.
CuPy is imported only inside the worker process: the notebook never creates a CUDA context.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from jupyter_ktune.backends.base import DeviceInfo
from jupyter_ktune.backends.cuda_source import (
    KernelSignature,
    device_source,
    include_dir,
    macro_defines,
    name_expression,
    parse_diagnostics,
    parse_signature,
    static_source,
)
from jupyter_ktune.errors import CellError, CompileFailure, OutOfResources
from jupyter_ktune.measure.verify import poison, poison_bits
from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec

# CUDA errors after which the context is unusable (sticky): the worker must restart.
_STICKY = {700, 702, 710, 714, 715, 716, 717, 718, 719, 999}
_FALLBACK_BLOCK_NAMES = ("BLOCK", "BLOCK_SIZE", "THREADS")


def _dim3(value: Any, what: str, spec: KernelSpec) -> tuple[int, int, int]:
    expr = getattr(spec, what)
    vals = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    try:
        ints = tuple(int(v) for v in vals)
    except (TypeError, ValueError):
        raise CellError(f"{what} = {expr.text} gave {value!r}, not integers", line=expr.line,
                        fix=f"Make {what} an int or a tuple of up to 3 ints.") from None
    if not 1 <= len(ints) <= 3 or min(ints) < 1:
        raise CellError(f"{what} = {expr.text} gave {ints}; each of up to 3 sizes must be >= 1",
                        line=expr.line, fix="Check the expression for this config.")
    return ints + (1,) * (3 - len(ints))  # type: ignore[return-value]


# The flush READS a buffer much larger than L2. Writing it instead (do_bench's ``zero_``) leaves
# L2 full of dirty lines whose write-back then lands inside the timed kernel: on the H200 that
# made a 48 us copy read 54 us (bench/results/foundation-timing.md). A read leaves clean lines.
_FLUSH_SRC = r"""
extern "C" __global__ void ktune_l2_flush(const int4* __restrict__ buf, long long n, int* sink) {
  int acc = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    int4 v = buf[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x7fffffff) sink[0] = acc;  // never true (the buffer is zero); keeps the loads
}
extern "C" __global__ void ktune_empty() {}
"""


def _static_block(spec: KernelSpec, cxx: dict[str, int]) -> int | None:
    """Block size from the config alone, when it does not depend on the inputs (for occupancy)."""
    try:
        if spec.block is None:
            return next((cxx[n] for n in _FALLBACK_BLOCK_NAMES if n in cxx), None)
        return int(np.prod(_dim3(spec.block(cxx), "block", spec)))
    except CellError:
        return None


class CupyTimer:
    """DeviceTimer over CuPy events on the current stream, with a read-only L2 flush."""

    name = "CUDA"

    def __init__(self, flush_bytes: int = 256 << 20, sm_count: int = 132):
        import cupy

        self._cupy = cupy
        self.l2_flush_bytes = flush_bytes
        self._flush = cupy.zeros(flush_bytes // 16 * 4, dtype=cupy.int32)
        self._sink = cupy.zeros(1, dtype=cupy.int32)
        module = cupy.RawModule(code=_FLUSH_SRC)
        self._flush_kernel = module.get_function("ktune_l2_flush")
        self._empty_kernel = module.get_function("ktune_empty")
        self._flush_grid = (sm_count * 4,)

    def synchronize(self) -> None:
        """Wait for all work queued on the current stream."""
        self._cupy.cuda.get_current_stream().synchronize()

    def new_event(self) -> Any:
        """Return a fresh CUDA event (not yet recorded)."""
        return self._cupy.cuda.Event()

    def record(self, event: Any) -> None:
        """Record ``event`` on the current stream."""
        event.record()

    def elapsed_ms(self, start: Any, end: Any) -> float:
        """Return the device time between two recorded, completed events."""
        return float(self._cupy.cuda.get_elapsed_time(start, end))

    def empty_launch(self) -> None:
        """Enqueue the empty kernel, to measure what the events add."""
        self._empty_kernel((1,), (32,), ())

    def kernel_clock(self) -> str | None:
        """Return None when CUPTI kernel records work, else the reason they don't."""
        from jupyter_ktune.measure.cupti import cupti_status

        return cupti_status()

    def flush_l2(self) -> None:
        """Enqueue the flush kernel over a buffer larger than the L2 cache."""
        n = self._flush.size // 4
        self._flush_kernel(self._flush_grid, (512,), (self._flush, np.int64(n), self._sink))

    def graph_ms(self, launch: Any, launches: int) -> float | None:
        """Return the per-launch time of a captured graph, or None if unsupported."""
        cp = self._cupy
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            stream.begin_capture()
            for _ in range(launches):
                launch()
            graph = stream.end_capture()
            graph.launch()
            stream.synchronize()
            reps = []
            for _ in range(5):
                s, e = cp.cuda.Event(), cp.cuda.Event()
                s.record()
                graph.launch()
                e.record()
                e.synchronize()
                reps.append(cp.cuda.get_elapsed_time(s, e) / launches)
        return float(np.median(reps))


class CudaBound:
    """A compiled kernel with its arguments on the device and its geometry resolved."""

    def __init__(self, variant: CudaVariant, host_args: Mapping[str, Any]):
        import cupy

        self._cupy = cupy
        self.variant = variant
        spec, sig = variant.spec, variant.sig
        env: dict[str, Any] = dict(host_args)
        env.update(variant.cxx)
        self.grid = _dim3(spec.grid(env), "grid", spec)  # type: ignore[misc]
        self.block = _dim3(spec.block(env), "block", spec) if spec.block else variant.default_block
        self.smem = int(spec.smem(env)) if spec.smem else 0
        self._check_resources()
        self.outputs: dict[str, tuple[Any, np.dtype]] = {}
        args = []
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
                dev = self._to_device(value)
                if p.name in spec.outputs:
                    self.outputs[p.name] = (dev, value.dtype)
                args.append(dev)
            else:
                t = p.scalar_type
                if t is None:
                    raise CellError(f"kernel parameter '{p.name}' has type '{p.ctype}', which "
                                    "cannot be passed by value from Python", line=sig.line,
                                    fix="Use int, unsigned, long long, size_t, float or double.")
                args.append(t(value))
        missing = [o for o in spec.outputs if o not in self.outputs]
        if missing:
            raise CellError(f"--out names '{missing[0]}', which is not a pointer parameter of "
                            f"{spec.name}", line=1, fix="Name the kernel's output arrays in --out.")
        self.args = tuple(args)

    def _to_device(self, a: np.ndarray) -> Any:
        try:
            return self._cupy.asarray(a)
        except (TypeError, ValueError):  # bfloat16 / fp8: move the raw bytes
            return self._cupy.asarray(a.view(f"u{a.dtype.itemsize}"))

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
        for dev, dtype in self.outputs.values():
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

    def launch_info(self) -> dict[str, Any]:
        """Return grid, block, shared memory and registers of this launch."""
        fn = self.variant.fn
        return {"grid": self.grid, "block": self.block, "dynamic_smem": self.smem,
                "registers": fn.num_regs, "static_smem": fn.shared_size_bytes,
                "local_bytes": fn.local_size_bytes, "kernel": self.variant.expr}


class CudaVariant:
    """One config compiled by NVRTC and loaded on the device."""

    def __init__(self, spec: KernelSpec, sig: KernelSignature, cxx: dict[str, int], fn: Any,
                 expr: str, limits: Mapping[str, int]):
        self.spec, self.sig, self.cxx, self.fn, self.expr = spec, sig, cxx, fn, expr
        self.limits = limits
        block_param = next((n for n in _FALLBACK_BLOCK_NAMES if n in cxx), None)
        self.default_block = (cxx[block_param], 1, 1) if block_param else (256, 1, 1)

    def bind(self, host_args: Mapping[str, Any]) -> CudaBound:
        """Copy the arguments to the device and resolve the launch geometry."""
        return CudaBound(self, host_args)


class CudaBackend:
    """The ``--backend cuda`` implementation."""

    name: ClassVar[str] = "cuda"

    def check(self, spec: KernelSpec) -> None:
        """Host-side checks: the kernel exists, its template parameters are tunables, a grid."""
        parse_signature(spec)
        if spec.grid is None:
            raise CellError("the launch grid is not given", line=1,
                            fix="Add: // ktune: grid = cdiv(n, BLOCK)  "
                                "(or --grid on the magic line)")
        if spec.block is None and not any(n in spec.space.names for n in _FALLBACK_BLOCK_NAMES):
            raise CellError("the block size is not given", line=1,
                            fix="Add: // ktune: block = BLOCK  (or --block on the magic line)")

    @cached_property
    def _device(self) -> DeviceInfo:
        try:
            import cupy
        except ImportError:
            return DeviceInfo(False, "no CuPy", reason="CuPy is not installed, so CUDA C++ cannot "
                              "run here (pip install cupy-cuda13x); the static report still works")
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:  # noqa: BLE001 - no driver / no device
            count, why = 0, str(exc)
        else:
            why = "no CUDA device"
        if count == 0:
            return DeviceInfo(False, "CPU only", reason="no CUDA GPU here: CUDA C++ compiles "
                              f"and shows its static report, but cannot run (CuPy: {why})")
        from jupyter_ktune.measure.clocks import driver_version

        dev = cupy.cuda.Device()
        props = cupy.cuda.runtime.getDeviceProperties(dev.id)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        limits = {"SMEM_PER_BLOCK": int(props["sharedMemPerBlockOptin"]),
                  "SMEM_PER_SM": int(props["sharedMemPerMultiprocessor"]),
                  "SM_COUNT": int(props["multiProcessorCount"]),
                  "L2_BYTES": int(props["l2CacheSize"]),
                  "MAX_THREADS_PER_BLOCK": int(props["maxThreadsPerBlock"]),
                  "REGS_PER_SM": int(props["regsPerMultiprocessor"])}
        return DeviceInfo(True, name, compute_capability=f"{props['major']}.{props['minor']}",
                          limits=limits, driver=driver_version(),
                          toolchain={"cupy": cupy.__version__,
                                     "cuda_runtime": str(cupy.cuda.runtime.runtimeGetVersion()),
                                     "nvrtc": ".".join(map(str, cupy.cuda.nvrtc.getVersion()))})

    def device(self) -> DeviceInfo:
        """Describe the CUDA device (queried once, then cached)."""
        return self._device

    def static_report(self, spec: KernelSpec, config: Config) -> Any:
        """Build the nvcc + ptxas + cuobjdump report for the variant (any machine with nvcc)."""
        from jupyter_ktune.measure.static import CompileError, compile_static

        sig = parse_signature(spec)
        cxx = spec.space.cxx_env(config)
        src = static_source(spec, sig, cxx)
        key = hashlib.sha256((src + repr(sorted(cxx.items()))).encode()).hexdigest()[:16]
        folder = Path(os.environ.get("KTUNE_CACHE_DIR", Path(tempfile.gettempdir()) / "ktune"))
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{spec.name}-{key}.cu"
        path.write_text(src)
        try:
            return compile_static(path, arch=spec.options.arch,
                                  defines=macro_defines(spec, sig, cxx),
                                  include_dirs=[include_dir()], extra_flags=("-std=c++17",),
                                  threads_per_block=_static_block(spec, cxx))
        except CompileError as exc:
            raise CompileFailure("cuda (nvcc)", exc.log, parse_diagnostics(exc.log)) from None

    def compile(self, spec: KernelSpec, config: Config) -> CudaVariant:
        """NVRTC-compile and load the variant (worker only)."""
        import cupy

        sig = parse_signature(spec)
        cxx = spec.space.cxx_env(config)
        expr = name_expression(spec, sig, cxx)
        options = ("-lineinfo", "-std=c++17", f"-I{include_dir()}",
                   *(f"-D{k}={v}" for k, v in macro_defines(spec, sig, cxx).items()))
        try:
            module = cupy.RawModule(code=device_source(spec), options=options,
                                    name_expressions=[expr])
            fn = module.get_function(expr)
            fn.num_regs  # forces the compile and load now, not at the first launch  # noqa: B018
        except cupy.cuda.compiler.CompileException as exc:
            log = exc.get_message()
            raise CompileFailure("cuda (NVRTC)", log, parse_diagnostics(log)) from None
        return CudaVariant(spec, sig, cxx, fn, expr, self.device().limits)

    def timer(self) -> CupyTimer:
        """Return the CuPy timer (created once, with a flush buffer sized to the L2)."""
        return self._timer

    @cached_property
    def _timer(self) -> CupyTimer:
        l2 = self.device().limits.get("L2_BYTES", 0)
        return CupyTimer(max(256 << 20, 4 * l2), self.device().limits.get("SM_COUNT", 132))

    def is_fatal(self, exc: BaseException) -> bool:
        """Return True for sticky CUDA errors (by status or message): the context is unusable."""
        status = getattr(exc, "status", None)
        if status in _STICKY:
            return True
        text = str(exc).lower()
        return any(w in text
                   for w in ("illegal", "misaligned", "launch failed", "unspecified launch"))


BACKEND = CudaBackend()
