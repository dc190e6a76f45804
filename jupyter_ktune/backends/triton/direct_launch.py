"""Launch a compiled Triton kernel with one driver call while Triton 3.6 still builds its launcher.

Triton 3.6 (the H200's) builds a C launcher per kernel signature with gcc before a kernel's first
launch. A sweep builds it in a pool task beside the first compiles (:mod:`.launcher_ahead`), yet
a short sweep's first run still waited for it: on the H200 the compiles were back at 0.06-0.08 s
and the launcher at 0.21-0.24 s, a third of a 0.46 s sweep of fla's softmax
(bench/results/corpus_vs_autotune/2026-12-02-0344). The launcher does nothing the kernel needs
that Python cannot do: it packs the non-constexpr arguments in signature order, appends the two
scratch pointers and calls ``cuLaunchKernelEx``. :class:`DirectLauncher` does that through
ctypes on the cubin Triton compiled, loaded by Triton's own ``load_binary``, and the sweep's
first-pass runs sent before the launcher is built use it (the contextvar
``backends.base.QUICK_LAUNCH``). The kernel, grid, block, shared memory and stream are the
ones Triton's path would use, so the GPU runs the same thing; only the host's enqueue differs,
and the timing's method says so.

It is used only where it is provably the same launch: the argument sizes packed here must equal
the parameter sizes the driver reports for the function (``cuFuncGetParamInfo``), and a kernel
with tuples, tensor descriptors, clusters (``num_ctas`` > 1), PDL, cooperative launch, scratch
memory keeps Triton's launcher (the reason is returned, not raised).

A sweep uses it unless ``KTUNE_QUICK_LAUNCH=0``. On the H200 the launches matched Triton's bit
for bit (bench/results/direct_launch_check/2026-12-02-1357). In two interleaved A/Bs of three
short sweeps (off, on, off: bench/results/corpus_vs_autotune/2026-12-02-1420, -1422, -1424; off,
on: the arms of 2026-12-03-0638) 5 of the 6 sweeps ended sooner with it (fla's cumsum in 0638
took 0.63 s against 0.59 s), and every first result came sooner: 0.10-0.50 s against
0.23-0.71 s. The first-pass timings that read high
in those runs, with it and without it, were host-starved events, since fixed by the hold
(``measure.held_runs``).
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import re
import struct
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: ``(ctypes storage type, conversion from the Python value)`` per scalar signature type, as
#: Triton 3.6's launcher stores them (``ty_to_cpp`` and ``FLOAT_STORAGE_TYPE``).
_INTS: dict[str, Any] = {
    "i1": ctypes.c_int8, "i8": ctypes.c_int8, "i16": ctypes.c_int16, "i32": ctypes.c_int32,
    "i64": ctypes.c_int64, "u1": ctypes.c_uint8, "u8": ctypes.c_uint8, "u16": ctypes.c_uint16,
    "u32": ctypes.c_uint32, "u64": ctypes.c_uint64}


def _fp16_bits(value: float) -> int:
    """IEEE half bits, round to nearest even (``PyFloat_Pack2``, as the launcher's pack_fp16)."""
    return struct.unpack("<H", struct.pack("<e", value))[0]


def _bf16_bits(value: float) -> int:
    """bfloat16 bits as Triton 3.6 packs them: the float32's upper half (truncated, not rounded)."""
    return ctypes.c_uint32.from_buffer(ctypes.c_float(value)).value >> 16


def _pointer(value: Any) -> int:
    """A pointer argument as the launcher's ``getPointer`` reads it: an int, None or
    ``data_ptr()``."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    return int(value.data_ptr())


def slot_for(ty: Any) -> tuple[Any, Callable[[Any], Any]] | None:
    """``(ctypes type, value -> stored value)`` for one signature type; None for a constexpr;
    raises :class:`Unsupported` for a type this launcher does not pack (Triton's will)."""
    if ty == "constexpr":
        return None
    if not isinstance(ty, str):
        raise Unsupported(f"tuple argument {ty!r}")
    if ty.startswith("*"):
        return ctypes.c_uint64, _pointer
    if ty in _INTS:
        return _INTS[ty], int
    if ty in ("fp32", "f32"):
        return ctypes.c_float, float
    if ty == "fp64":
        return ctypes.c_double, float
    if ty == "fp16":
        return ctypes.c_uint16, lambda v: _fp16_bits(float(v))
    if ty == "bf16":
        return ctypes.c_uint16, lambda v: _bf16_bits(float(v))
    raise Unsupported(f"argument type {ty}")


class Unsupported(Exception):
    """This kernel keeps Triton's launcher; the message says why."""


def unsupported_metadata(metadata: Any) -> str | None:
    """Why a kernel with this compiled metadata needs Triton's launcher, or None."""
    checks = (("num_ctas", 1, "a cluster launch (num_ctas > 1)"),
              ("launch_cooperative_grid", False, "a cooperative launch"),
              ("launch_pdl", False, "programmatic dependent launch"),
              ("global_scratch_size", 0, "global scratch memory"),
              ("profile_scratch_size", 0, "profile scratch memory"))
    for name, plain, why in checks:
        if (getattr(metadata, name, plain) or plain) != plain:
            return why
    if getattr(metadata, "tensordesc_meta", None):
        return "tensor descriptors"
    if getattr(metadata, "tmem_size", None):
        return "tensor memory"
    return None


class DirectLauncher:
    """Stands in for Triton 3.6's ``CudaLauncher`` on one compiled kernel: called with the same
    arguments (grid, stream, function, packed metadata, launch metadata, hooks, every bound
    argument), it enqueues the kernel with ``cuLaunchKernel``.

    The argument storage is made once; a call only writes the values and launches (under a
    lock, so two threads cannot interleave their values before the driver copies them).
    """

    def __init__(self, signature: Sequence[Any], driver: Any, scratch_pointers: int = 2):
        slots = [(i, slot_for(ty)) for i, ty in enumerate(signature)]
        kept = [(i, s) for i, s in slots if s is not None]  # constexprs are not parameters
        self._fill = [(i, conv) for i, (_, conv) in kept]  # (index in the bound args, conversion)
        self._store = [ctype() for _, (ctype, _) in kept]
        self._store += [ctypes.c_uint64(0) for _ in range(scratch_pointers)]  # null scratch
        self.sizes = [ctypes.sizeof(v) for v in self._store]
        self._params = (ctypes.c_void_p * max(len(self._store), 1))(
            *[ctypes.addressof(v) for v in self._store])
        self._driver = driver
        self._lock = threading.Lock()

    def __call__(self, grid_x: int, grid_y: int, grid_z: int, stream: int, function: int,
                 kernel_metadata: Sequence[int], launch_metadata: Any, enter_hook: Any,
                 exit_hook: Any, *args: Any) -> None:
        num_warps, num_ctas, shared = kernel_metadata[:3]
        if enter_hook is not None:
            enter_hook(launch_metadata)
        with self._lock:
            for (i, conv), store in zip(self._fill, self._store, strict=False):
                store.value = conv(args[i])
            if grid_x * grid_y * grid_z > 0:
                self._driver.launch(function, (grid_x * num_ctas, grid_y, grid_z),
                                    (32 * num_warps, 1, 1), shared, stream, self._params)
        if exit_hook is not None:
            exit_hook(launch_metadata)


class CudaDriverCalls:
    """The three driver entry points used here, through ctypes on ``libcuda.so.1``."""

    def __init__(self) -> None:
        lib = ctypes.CDLL("libcuda.so.1")
        self._launch = lib.cuLaunchKernel
        self._launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self._param_info = getattr(lib, "cuFuncGetParamInfo", None)
        self._ctx_current = lib.cuCtxGetCurrent
        self._error_name = lib.cuGetErrorName
        self._error_name.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]

    def _check(self, code: int, what: str) -> None:
        if code != 0:
            name = ctypes.c_char_p()
            self._error_name(code, ctypes.byref(name))
            label = name.value.decode() if name.value else str(code)
            raise RuntimeError(f"Triton Error [CUDA]: {what}: {label}")

    def launch(self, function: int, grid: tuple[int, int, int], block: tuple[int, int, int],
               shared: int, stream: int, params: Any) -> None:
        self._check(self._launch(function, *grid, *block, shared, stream, params, None),
                    "cuLaunchKernel")

    def param_sizes(self, function: int) -> list[int] | None:
        """The function's parameter sizes in bytes (``cuFuncGetParamInfo``, CUDA 12.4+); None
        where the driver cannot say."""
        if self._param_info is None:
            return None
        sizes, offset, size = [], ctypes.c_size_t(), ctypes.c_size_t()
        while True:
            code = self._param_info(ctypes.c_void_p(function), ctypes.c_size_t(len(sizes)),
                                    ctypes.byref(offset), ctypes.byref(size))
            if code != 0:
                return sizes if code == 1 else None  # 1: CUDA_ERROR_INVALID_VALUE, past the end
            sizes.append(size.value)

    def has_context(self) -> bool:
        ctx = ctypes.c_void_p()
        return self._ctx_current(ctypes.byref(ctx)) == 0 and bool(ctx.value)


_driver: list[CudaDriverCalls] = []


def driver_calls() -> CudaDriverCalls:
    """This process's :class:`CudaDriverCalls`, made on first use."""
    if not _driver:
        _driver.append(CudaDriverCalls())
    return _driver[0]


@functools.cache
def per_signature_launcher() -> bool:
    """True where this Triton builds a C launcher per kernel signature (3.6's ``make_launcher``),
    which a first launch waits for; False for the generic launcher of newer Tritons or no Triton.

    Read from the NVIDIA driver module's source where Triton is not imported yet: a sweep asks in
    the notebook's process, which need not import Triton (the device worker and the compile pool
    do), and the import put 1.25 s on the first Autotune's path on the CPU machine."""
    if "triton" not in sys.modules:
        found = importlib.util.find_spec("triton")
        if found is None or not found.submodule_search_locations:
            return False
        for folder in found.submodule_search_locations:
            source = Path(folder) / "backends" / "nvidia" / "driver.py"
            if source.is_file():
                return re.search(r"^def make_launcher\b", source.read_text(errors="replace"),
                                 re.MULTILINE) is not None
    try:
        from triton.backends.nvidia import driver
    except Exception:  # noqa: BLE001 - no Triton, or no NVIDIA backend: nothing to wait for
        return False
    return hasattr(driver, "make_launcher")


def install(kernel: Any, driver: Any = None, active: Any = None) -> str | None:
    """Load ``kernel`` (a CompiledKernel not yet loaded) and give it a :class:`DirectLauncher`
    in place of Triton's; None when done, else why Triton's launcher stays (nothing changed).
    ``driver``: the :class:`CudaDriverCalls`; ``active``: Triton's active driver (its
    ``utils.load_binary``); both are this process's unless given."""
    if isinstance(getattr(kernel, "_run", None), DirectLauncher):
        return None
    if kernel.module is not None or kernel._run is not None:
        return "already loaded with Triton's launcher"
    why = unsupported_metadata(kernel.metadata)
    if why is not None:
        return why
    from triton import knobs

    driver = driver or driver_calls()
    try:
        launcher = DirectLauncher(list(kernel.src.signature.values()), driver)
    except (Unsupported, AttributeError) as exc:
        return str(exc)
    if active is None:
        from triton.runtime import driver as triton_driver

        active = triton_driver.active
    device = active.get_current_device()
    if kernel.metadata.shared > active.utils.get_device_properties(device)["max_shared_mem"]:
        return "more shared memory than the device has (Triton reports it)"
    hooks = knobs.runtime  # the load hooks, called as Triton's _init_handles calls them
    if hooks.kernel_load_start_hook is not None:
        hooks.kernel_load_start_hook(None, None, kernel.name, kernel.metadata_group, kernel.hash)
    loaded = active.utils.load_binary(kernel.name, kernel.kernel, kernel.metadata.shared, device)
    module, function, n_regs, n_spills = loaded[:4]
    n_max_threads = loaded[4] if len(loaded) > 4 else None
    warp = getattr(kernel.metadata, "warp_size", 32)
    if n_max_threads is not None and kernel.metadata.num_warps * warp > n_max_threads:
        return "more threads than the function allows (Triton reports it)"
    expected = driver.param_sizes(function)
    if expected != launcher.sizes:
        return f"parameter sizes {launcher.sizes} differ from the function's {expected}"
    kernel.module, kernel.function, kernel.n_regs, kernel.n_spills = module, function, n_regs, \
        n_spills
    if n_max_threads is not None:
        kernel.n_max_threads = n_max_threads
    kernel._run = launcher
    if hooks.kernel_load_end_hook is not None:
        hooks.kernel_load_end_hook(module, function, kernel.name, kernel.metadata_group,
                                   kernel.hash)
    return None


def reinstate(kernel: Any) -> bool:
    """Give a kernel that has a :class:`DirectLauncher` back to Triton's own path (its next
    launch loads it again and builds or finds Triton's launcher); True if it had one."""
    if not isinstance(getattr(kernel, "_run", None), DirectLauncher):
        return False
    kernel._run, kernel.module, kernel.function = None, None, None
    return True


_installed: set[int] = set()  # id() of the kernels given a DirectLauncher in this process


def prepare(jit: Any, grid: tuple[int, ...], kwargs: Mapping[str, Any], quick: bool) -> str:
    """Before a bound launch of ``jit``: with ``quick``, give its compiled kernel a
    :class:`DirectLauncher` unless it already has Triton's; without, give a kernel that had one
    back to Triton's launcher. Returns the note for the timing's method ("" for Triton's own
    launch). Any failure here leaves the launch to Triton, which reports it as it would."""
    if not quick and not _installed:
        return ""
    try:
        kernel = jit.warmup(grid=grid, **kwargs)  # the binder and cache lookup of the launch
    except Exception:  # noqa: BLE001 - the launch itself raises it, in its usual place
        return ""
    if kernel is None or not hasattr(kernel, "_run"):
        return ""
    if not quick:
        if reinstate(kernel):
            _installed.discard(id(kernel))
        return ""
    try:
        why = install(kernel)
    except Exception:  # noqa: BLE001 - Triton's path loads it and reports any error itself
        return ""
    if why is not None:
        return ""
    _installed.add(id(kernel))
    return DIRECT_NOTE


#: Set to 0 to keep a sweep from launching this way (``TritonBackend.quick_launch``); on by default.
QUICK_LAUNCH_ENV = "KTUNE_QUICK_LAUNCH"

DIRECT_NOTE = ("; launched with cuLaunchKernel on Triton's cubin while Triton's launcher was "
               "being built (same kernel, grid, block and shared memory; the host's enqueue "
               "differs)")
