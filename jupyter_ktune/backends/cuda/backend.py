"""CUDA C++ backend: nvcc builds each variant once, for its static report and for the run.

The run loads the static report's own cubin wherever nvcc is found (:mod:`.archcubin`): the
binary timed is the one described, with the host headers and macros nvcc gives (``M_PI``,
``INFINITY``, ``<cmath>``). Without nvcc the run is NVRTC's build through CuPy, given the same
macros and stand-ins for the headers (:mod:`.nvrtc`). In a sweep the compile pool's nvcc build
is loaded in the worker (:meth:`CudaBackend.load_prebuilt`), so configs compile in parallel on
the CPU cores.

Compilation always passes ``-lineinfo`` (so ncu and the per-line stall view can map SASS
back to cell lines) and ``-I`` to the folder holding ``ktune.cuh``. The package: :mod:`.source`
(the cell as C++), :mod:`.launch` (variant and binding), :mod:`.timer` (CuPy events, L2 flush),
:mod:`.profile` (KT_SCOPE traces). CuPy is imported only inside the worker process: the notebook
never creates a CUDA context.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from functools import cached_property
from typing import Any, ClassVar

from jupyter_ktune.backends import Registered, context_ahead
from jupyter_ktune.backends.base import (
    COMPILE_ONLY_ENV,
    BackendBase,
    DeviceInfo,
    Variant,
    device_limits,
    nvidia_gpu_visible,
)
from jupyter_ktune.backends.cache_folder import cache_dir, cached_text
from jupyter_ktune.backends.cuda.archcubin import (
    cell_variant,
    compile_with_nvcc,
    load_prebuilt,
    nvcc_runs,
)
from jupyter_ktune.backends.cuda.constants import check_names
from jupyter_ktune.backends.cuda.flags import nvcc_flags, nvrtc_flags
from jupyter_ktune.backends.cuda.includes import include_dirs
from jupyter_ktune.backends.cuda.launch import (
    FALLBACK_BLOCK_NAMES,
    CudaVariant,
    static_block,
    static_smem,
)
from jupyter_ktune.backends.cuda.nvrtc import nvrtc_options
from jupyter_ktune.backends.cuda.pipeline import (
    PipelineVariant,
    kernels,
    macro_signature,
    stage_constants,
)
from jupyter_ktune.backends.cuda.profile import profile_cuda
from jupyter_ktune.backends.cuda.source import (
    CELL_FILE,
    cell_constants,
    device_source,
    include_dir,
    instantiation,
    macro_defines,
    name_expression,
    parse_diagnostics,
)
from jupyter_ktune.backends.cuda.templates import input_kinds, type_arguments
from jupyter_ktune.backends.cuda.timer import CupyTimer
from jupyter_ktune.backends.gpu_ceilings import measure_ceilings
from jupyter_ktune.backends.opening import Opening
from jupyter_ktune.backends.timer_slot import TimerSlot
from jupyter_ktune.backends.torch_interop import warm_when_idle
from jupyter_ktune.compiler_controls import check_controls, rename_cxx, with_name_prefix
from jupyter_ktune.errors import CellError, CompileFailure, Diagnostic
from jupyter_ktune.measure.breakdown import Breakdown
from jupyter_ktune.requirements import install_hint
from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec

# CUDA errors after which the context is unusable (sticky): the worker must restart.
_STICKY = {700, 702, 710, 714, 715, 716, 717, 718, 719, 999}
#: Why a CUDA C++ cell does not run on a machine without an NVIDIA GPU: what would let it run.
NO_GPU = ("no NVIDIA GPU here: a CUDA C++ kernel runs only on a machine with one (and CuPy "
          "there); this machine compiles it and shows its static report")
#: nvcc builds kept per worker (a cubin, and its report with the SASS): the run and the report
#: thread share one
_BUILDS_KEPT = 128


class CudaBackend(BackendBase):
    """The ``--backend cuda`` implementation."""

    name: ClassVar[str] = "cuda"
    comment: ClassVar[str] = "//"
    cxx_directives: ClassVar[bool] = True
    python_cells: ClassVar[bool] = False
    editor_mime: ClassVar[str] = "text/x-c++src"  # JupyterLab's C++ grammar (lang-cpp)
    language: ClassVar[str] = "CUDA C++"
    compiler_controls: ClassVar[frozenset[str] | None] = frozenset({"name_prefix", "nvcc_flags",
                                                             "maxnreg"})
    precompile: ClassVar[str | None] = (
        "the static nvcc compile (nvcc -cubin -lineinfo + ptxas -v) of each config; its "
        "report is handed to the device worker, which loads its cubin where it is for the "
        "device's architecture (else NVRTC-compiles the variant) and times it")
    export_formats: ClassVar[tuple[str, ...]] = ("cpp", "kernel_tuner")  # constexpr header

    def check(self, spec: KernelSpec) -> None:
        """Host-side checks: the kernel exists, its template parameters are tunables, a grid."""
        check_controls(spec, Registered())
        for one, sig in kernels(spec):
            type_arguments(one, sig)
        include_dirs(spec)
        if symbols := cell_constants(spec):  # a symbol nobody fills reads zeros: say so now
            check_names(spec, symbols, input_kinds(spec, symbols[0].line, "the inputs' names "
                                                   "for __constant__ memory"))
        if spec.grid is None and spec.pipeline is None:
            raise CellError("the launch grid is not given", line=1,
                            fix="Add: // ktune: grid = cdiv(n, BLOCK)  "
                                "(or --grid on the magic line)")
        named_block = any(n in spec.space.names for n in FALLBACK_BLOCK_NAMES)
        if spec.block is None and spec.pipeline is None and not named_block:
            raise CellError("the block size is not given", line=1,
                            fix="Add: // ktune: block = BLOCK  (or --block on the magic line)")

    def static_capability(self, device: DeviceInfo) -> tuple[str, str]:
        """nvcc's report, wherever nvcc is found (no GPU needed)."""
        from jupyter_ktune.toolchain import ToolNotFound, find_tool

        try:
            find_tool("nvcc")
        except ToolNotFound as exc:
            return "no", f"no static report: {exc}"
        return "yes (nvcc, sm_90)", ""

    @cached_property
    def _device(self) -> DeviceInfo:
        opened = Opening()  # the first result's phases: cupy's import, then the device
        context_ahead.start_in_worker()  # the driver and the context, beside cupy's import
        try:
            (cupy,) = opened.imports("cupy")
        except ImportError:
            if not nvidia_gpu_visible():  # installing CuPy could not help on this machine
                return DeviceInfo(False, "CPU only", reason=NO_GPU)
            return DeviceInfo(False, "no CuPy", reason="CUDA C++ runs on this machine's GPU "
                              "through CuPy, which is not installed; the static report works "
                              "without it. " + install_hint("cupy"))
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:  # noqa: BLE001 - no driver / no device
            count, why = 0, str(exc)
        else:
            why = "no CUDA device"
        if count == 0:
            return DeviceInfo(False, "CPU only", reason=f"{NO_GPU} (CuPy: {why})",
                              opening_ms=opened.done())
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
        # Outputs, inputs and guards are checked on the GPU with torch where it is installed
        # (CudaBound): torch's CUDA starts in the background once per worker, when the cell
        # needs torch or the worker is idle (runner.torch_warm), not beside a first run that
        # never imports it; compile-only pool processes (which ask for the limits) never do.
        if not os.environ.get(COMPILE_ONLY_ENV):
            warm_when_idle()
            # the timer's kernels compile (NVRTC, and CuPy's fill kernel on a cold cache)
            # beside the first run's compile and inputs, not on its timing's path
            self._timer_slot.start_ahead(lambda: self._make_timer(limits, dev.id))
        return DeviceInfo(True, name, compute_capability=f"{props['major']}.{props['minor']}",
                          limits=limits, driver=driver_version(),
                          measure_ceilings=measure_ceilings,
                          toolchain={"cupy": cupy.__version__,
                                     "cuda_runtime": str(cupy.cuda.runtime.runtimeGetVersion()),
                                     "nvrtc": ".".join(map(str, cupy.cuda.nvrtc.getVersion()))},
                          opening_ms=opened.done())

    def device(self) -> DeviceInfo:
        """Describe the CUDA device (queried once, then cached)."""
        return self._device

    def static_report(self, spec: KernelSpec, config: Config) -> Any:
        """Build the nvcc + ptxas + cuobjdump report for the variant (any machine with nvcc)."""
        return self.nvcc_report(spec, config)

    def nvcc_report(self, spec: KernelSpec, config: Config,
                    extra_defines: Mapping[str, str] | None = None,
                    cubin_only: bool = False) -> Any:
        """:meth:`static_report` with more ``-D`` macros: the scope trace's build of an sm_90a
        cell (``KT_PROFILE`` and its sampling, :mod:`.profile`) is this build with them.
        ``cubin_only``: the build before its SASS is read (what a run loads), the same nvcc."""
        from jupyter_ktune.backends.cuda.static import CompileError, compile_static
        from jupyter_ktune.measure.sass import with_sass
        from jupyter_ktune.measure.static import in_sweep_pool

        # name_prefix: the kernel renamed in the source
        spec = with_name_prefix(spec, config, rename=rename_cxx)
        flags = ("-std=c++17", *nvcc_flags(spec, config))
        stages = kernels(spec)
        cxx = spec.space.cxx_env(config)
        types: dict[str, str] = {}
        for one, one_sig in stages:
            self._check_block(one, static_block(one, cxx))
            types.update(type_arguments(one, one_sig))
        first, first_sig = stages[0]
        sig = macro_signature([s for _, s in stages])
        defines = {**macro_defines(spec, sig, cxx), **(extra_defines or {})}
        src = device_source(spec, defines, types,
                            stage_constants(stages, cxx)) + "".join(
            instantiation(one, one_sig, cxx, type_arguments(one, one_sig))
            for one, one_sig in stages)
        # in the private cache folder, by content hash, never written through a link (issue 15)
        path, _ = cached_text(cache_dir(), spec.name, ".cu", src)
        folders = [include_dir(), *include_dirs(spec)]
        threads = static_block(first, cxx)

        def build() -> Any:  # the SASS is read apart: a run loads the cubin without it
            try:
                rep = compile_static(path, arch=spec.options.arch, defines=defines,
                                     include_dirs=folders, extra_flags=flags,
                                     threads_per_block=threads, sass=False)
                return dataclasses.replace(rep, dynamic_smem=static_smem(first, cxx))
            except CompileError as exc:
                raise CompileFailure("cuda (nvcc)", exc.log, parse_diagnostics(
                    exc.log, first_sig.line, defines)) from None

        key = (str(path), spec.options.arch, tuple(defines.items()), tuple(map(str, folders)),
               threads, static_smem(first, cxx), in_sweep_pool(), flags)
        built = self._once(("cubin", *key), build)
        if cubin_only or in_sweep_pool():  # a sweep's pool never disassembles (issue 35)
            return built
        return self._once(key, lambda: with_sass(built))

    def _once(self, key: tuple, build: Callable[[], Any]) -> Any:
        """``build()``'s result, built once per key in this process: the report thread and the
        run ask for the same variant at once, and the second waits for the first's nvcc."""
        with self._builds_lock:
            future = self._builds.get(key)
            mine = future is None
            if mine:
                future = self._builds[key] = Future()
                while len(self._builds) > _BUILDS_KEPT:
                    self._builds.popitem(last=False)
        if mine:
            try:
                future.set_result(build())
            except BaseException as exc:  # noqa: BLE001 - handed to every waiter, then raised
                future.set_exception(exc)
        return future.result()

    @cached_property
    def _builds(self) -> OrderedDict[tuple, Future]:
        return OrderedDict()

    @cached_property
    def _builds_lock(self) -> threading.Lock:
        return threading.Lock()

    def _check_block(self, spec: KernelSpec, threads: int | None) -> None:
        """A block over the device's threads-per-block limit never launches, with or without a
        ``require`` line: say so on the ``block`` line (the run path checks it again at bind,
        against the compiled variant's own limit)."""
        limit = device_limits(self.device())["MAX_THREADS_PER_BLOCK"]
        if threads is None or threads <= limit:
            return
        line = spec.block.line if spec.block is not None else 1
        text = (f"a block of {threads} threads; a CUDA block has at most {limit} "
                f"(MAX_THREADS_PER_BLOCK). Narrow the values, or add: // ktune: require "
                f"{spec.block.text if spec.block else 'BLOCK'} <= MAX_THREADS_PER_BLOCK")
        raise CompileFailure("cuda", text, [Diagnostic(line, "error", text)])

    def compile(self, spec: KernelSpec, config: Config) -> CudaVariant | PipelineVariant:
        """Load the variant, or every stage of a pipeline (worker only): nvcc's cubin, the
        static report's own build, wherever nvcc is found (:mod:`.archcubin`); else NVRTC."""
        spec = with_name_prefix(spec, config, rename=rename_cxx)
        if nvcc_runs(spec.options.arch):
            return compile_with_nvcc(self, spec, config)
        import cupy

        stages = kernels(spec)
        cxx = spec.space.cxx_env(config)
        typed = [(one, sig, type_arguments(one, sig)) for one, sig in stages]
        exprs = [name_expression(one, sig, cxx, types) for one, sig, types in typed]
        all_types = {k: v for _, _, types in typed for k, v in types.items()}
        sig = macro_signature([s for _, s in stages])
        try:
            module = cupy.RawModule(
                code=device_source(spec, macro_defines(spec, sig, cxx), all_types,
                                   stage_constants(stages, cxx)),
                options=(*nvrtc_options(spec, sig, cxx), *nvrtc_flags(spec, config)),
                name_expressions=exprs)
            fns = [module.get_function(e) for e in exprs]
            for fn in fns:
                fn.num_regs  # forces the compile and load now, not at the first launch  # noqa: B018
        except cupy.cuda.compiler.CompileException as exc:
            log = exc.get_message()
            raise CompileFailure("cuda (NVRTC)", log, parse_diagnostics(
                log, stages[0][1].line, macro_defines(spec, sig, cxx))) from None
        return cell_variant(self, spec, cxx, module, [
            (one, one_sig, types, expr, fn)
            for (one, one_sig, types), fn, expr in zip(typed, fns, exprs, strict=True)])

    def runs_report_build(self, spec: KernelSpec) -> bool:
        """Where nvcc is found, the run loads the report's cubin (:mod:`.archcubin`)."""
        return nvcc_runs(spec.options.arch)

    def load_prebuilt(self, spec: KernelSpec, config: Config, report: Any) -> CudaVariant | None:
        """The variant from a static report built ahead by a sweep's pool (its nvcc cubin),
        or None to compile it (:func:`.archcubin.load_prebuilt` says when it cannot be used)."""
        named = with_name_prefix(spec, config, rename=rename_cxx)
        return load_prebuilt(self, named, config, report)

    def timer(self) -> CupyTimer:
        """Return the CuPy timer (built once, ahead as the device opened, with a flush buffer
        sized to the L2); a build still running is waited for."""
        return self._timer_slot.get(lambda: self._make_timer(self.device().limits))

    @cached_property
    def _timer_slot(self) -> TimerSlot:
        return TimerSlot()

    @staticmethod
    def _make_timer(limits: Mapping[str, int], device_id: int | None = None) -> CupyTimer:
        import cupy

        flush = max(256 << 20, 4 * limits.get("L2_BYTES", 0))
        with cupy.cuda.Device(device_id) if device_id is not None else contextlib.nullcontext():
            return CupyTimer(flush, limits.get("SM_COUNT", 132))

    def is_fatal(self, exc: BaseException) -> bool:
        """Return True for sticky CUDA errors (by status or message): the context is unusable."""
        status = getattr(exc, "status", None)
        if status in _STICKY:
            return True
        text = str(exc).lower()
        return any(w in text
                   for w in ("illegal", "misaligned", "launch failed", "unspecified launch"))

    def profile_scopes(self, spec: KernelSpec, config: Config,
                       inputs: Callable[[], dict[str, Any]]) -> Breakdown:
        """Trace one launch of the KT_SCOPE-instrumented variant (see :mod:`.profile`)."""
        named = with_name_prefix(spec, config, rename=rename_cxx)
        return profile_cuda(self, named, config, inputs())[0]

    def line_file(self, variant: Variant) -> str | None:
        """The cell is compiled behind ``#line N "cell"``: ncu names its lines' file so."""
        return CELL_FILE


BACKEND = CudaBackend()
