"""Triton backend: a ``@triton.jit`` kernel in a Python cell, run by Triton on the GPU or by its
interpreter on the CPU, with an sm_90 static report compiled ahead of time on any machine.

The cell::

    %%kernel matmul --backend triton --inputs inputs --reference reference --out c
    # ktune: BLOCK_M in pow2(16, 128); BLOCK_N in pow2(16, 128); num_warps in [4, 8]
    # ktune: grid = cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)
    @triton.jit
    def matmul(a, b, c, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr): ...

Tunables are the kernel's ``tl.constexpr`` parameters plus the launch options ``num_warps``,
``num_stages``, ``num_ctas`` and ``maxnreg``, and ``name_prefix``, which renames the kernel in
its module (:mod:`jupyter_ktune.compiler_controls`). The other parameters are matched by name to the
inputs dict (arrays become device tensors, scalars pass as given). ``triton`` and
``triton.language as tl`` are imported for the cell.

This module is imported by the notebook process too (``check``), so it never imports triton at
module level: Triton is imported inside the worker only, after :func:`choose_mode` has decided
whether this machine runs the interpreter (``TRITON_INTERPRET`` must be set before that import).
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any, ClassVar

from jupyter_ktune.backends import context_ahead
from jupyter_ktune.backends.base import COMPILE_ONLY_ENV, DEFAULT_LIMITS, DeviceInfo, Variant
from jupyter_ktune.backends.cache_folder import CacheFolderError
from jupyter_ktune.backends.gpu_ceilings import measure_ceilings
from jupyter_ktune.backends.opening import Opening
from jupyter_ktune.backends.timer_slot import TimerSlot
from jupyter_ktune.backends.torch_interop import start_warming
from jupyter_ktune.backends.triton import direct_launch, jit_warm, timer_ahead, utils_ahead
from jupyter_ktune.backends.triton import static as ts
from jupyter_ktune.backends.triton.argument_types import Hints, argument_types, light
from jupyter_ktune.backends.triton.cell import LAUNCH_OPTIONS, check_cell
from jupyter_ktune.backends.triton.config_arguments import (
    DescriptorPlaceholder,
    is_descriptor,
)
from jupyter_ktune.backends.triton.decorators import apply_heuristics, param_default, unwrap
from jupyter_ktune.backends.triton.describe import expand as expand_autotune
from jupyter_ktune.backends.triton.describe import module_source, read_autotune
from jupyter_ktune.backends.triton.facts import TritonFacts
from jupyter_ktune.backends.triton.given import as_constexpr
from jupyter_ktune.backends.triton.helpers import notebook_helpers
from jupyter_ktune.backends.triton.interpreter import (
    asks_for_target,
    bind_libdevice,
    install_target_driver,
    patch_float_scalars,
)
from jupyter_ktune.backends.triton.jit_warm import ArrayPlaceholder, warm_cache_key
from jupyter_ktune.backends.triton.launch import TritonVariant, call_arguments
from jupyter_ktune.backends.triton.module import (
    choose_mode,
    ensure_allocator,
    fp_fusion,
    import_failure,
    load_module,
    patch_interpreter_dot,
)
from jupyter_ktune.backends.triton.options import check_launch_options
from jupyter_ktune.backends.triton.profile import profile_triton
from jupyter_ktune.backends.triton.timer import TorchTimer, flush_bytes
from jupyter_ktune.compiler_controls import rename_python, with_name_prefix
from jupyter_ktune.errors import CellError, CompileFailure
from jupyter_ktune.lean_import import cell_packages, load_leanly
from jupyter_ktune.measure.breakdown import Breakdown
from jupyter_ktune.measure.timing import HostClock
from jupyter_ktune.problem_key import inputs_key
from jupyter_ktune.requirements import missing_from, missing_reason
from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec
from jupyter_ktune.user_code import any_inputs

INTERPRETER_TIMER = "Triton interpreter, host time (not GPU time)"
_STICKY_WORDS = ("illegal", "misaligned", "launch failed", "unspecified launch")


class TritonBackend(TritonFacts):
    """The ``--backend triton`` implementation."""

    name: ClassVar[str] = "triton"

    def __init__(self) -> None:
        self._aot_lock = threading.Lock()
        self._aot: dict[tuple, Any] = {}
        self._arg_types: dict[tuple, Hints] = {}
        #: Seconds of the last ahead-of-time compile's phases (read by the sweep's pool task).
        self.compile_phases: dict[str, float] = {}
        self._timer_slot = TimerSlot()

    def check(self, spec: KernelSpec) -> None:  # host side, no triton import: check_cell
        check_cell(spec)

    def expand(self, spec: KernelSpec, namespace: Mapping[str, Any],
               describe: Callable[[KernelSpec], dict[str, Any]]) -> KernelSpec:
        """At parse time, on the notebook side: the jit helpers of earlier cells that the cell
        uses (:mod:`.helpers`), and the kernel's ``@triton.autotune`` list as tunables
        (:mod:`.describe`, read by ``describe``: the worker's answer to :meth:`describe`)."""
        helpers = notebook_helpers(spec.source, namespace)
        if helpers:
            spec = dataclasses.replace(spec, helpers=helpers)
        return expand_autotune(spec, describe)

    def describe(self, spec: KernelSpec) -> dict[str, Any]:
        """In the worker, at parse: the module's ``@triton.autotune`` list (:mod:`.describe`)."""
        return read_autotune(self, spec)

    @cached_property
    def interpret(self) -> bool:
        """Whether this worker runs Triton's interpreter (decided before importing triton)."""
        interpret = choose_mode()
        if interpret:
            patch_interpreter_dot()
            patch_float_scalars()
        return interpret

    @cached_property
    def _device(self) -> DeviceInfo:
        opened = Opening()  # the first result's phases: torch's import, triton's, the rest
        if not choose_mode():  # the mode first: triton's import reads TRITON_INTERPRET
            context_ahead.start_in_worker()  # the driver and the context, beside the imports
            utils_ahead.start_in_worker()  # and Triton's driver utilities, on a cold cache
            timer_ahead.start_in_worker()  # and the timer's kernels, on a cold cache
            # and Triton's cache key, which the first config's compile waits for (triton needs
            # no torch; after torch's import it held that compile 0.5-0.8 s, jit_warm's text)
            threading.Thread(target=warm_cache_key, name="ktune-triton-key",
                             daemon=True).start()
        try:
            torch, triton = opened.imports("torch", "triton")
        except ImportError as exc:
            return DeviceInfo(False, "no Triton", reason=missing_reason(exc.name or "triton"))
        # plain str: torch's TorchVersion, unpickled in the notebook, imported torch there
        tools = {"triton": str(triton.__version__), "torch": str(torch.__version__)}
        if self.interpret:  # (the interpreter's patches: part of the device context)
            return DeviceInfo(True, "CPU (Triton interpreter)", toolchain=tools,
                              opening_ms=opened.done())
        from jupyter_ktune.measure.clocks import driver_version

        p = torch.cuda.get_device_properties(torch.cuda.current_device())
        limits = {"SMEM_PER_BLOCK": int(getattr(p, "shared_memory_per_block_optin", 232448)),
                  "SMEM_PER_SM": int(getattr(p, "shared_memory_per_multiprocessor", 233472)),
                  "SM_COUNT": int(p.multi_processor_count),
                  "L2_BYTES": int(getattr(p, "L2_cache_size", 50 << 20)),
                  "MAX_THREADS_PER_BLOCK": int(getattr(p, "max_threads_per_block", 1024)),
                  "REGS_PER_SM": int(getattr(p, "regs_per_multiprocessor", 65536))}
        if not os.environ.get(COMPILE_ONLY_ENV):  # the worker times here; a pool process never
            self._timer_slot.start_ahead(lambda: self._make_timer(limits))
            # the on-device checks' torch kernels load on first use: 0.3 s of the first
            # config's verification in a fresh worker (sweep_profile/2026-12-01-2309)
            start_warming()
        return DeviceInfo(True, p.name, compute_capability=f"{p.major}.{p.minor}", limits=limits,
                          driver=driver_version(),
                          toolchain={**tools, "cuda": torch.version.cuda,
                                     "fp fusion": fp_fusion(triton)},
                          measure_ceilings=measure_ceilings, opening_ms=opened.done())

    def device(self) -> DeviceInfo:
        """Describe the GPU, or the interpreter on a CPU machine."""
        return self._device

    def module(self, spec: KernelSpec) -> Any:
        """The cell's module, loaded once per cell text in this mode (a run, a compile, and the
        parse's ``describe`` share it: the kernel's package is imported once)."""
        interpret = self.interpret  # decide the mode before triton is imported
        try:
            if interpret and asks_for_target(spec.source):
                install_target_driver(spec.options.arch)
            text = module_source(spec)  # packages imported lean: their __init__ on demand
            module = load_leanly(lambda: load_module(text, spec.name, spec.body_line),
                                 cell_packages(text, spec.origin, self.compiler_modules))
        except CacheFolderError:
            raise  # not the cell's fault: "cannot run", with the fix
        except Exception as exc:  # noqa: BLE001 - any import-time error is the cell's
            raise (missing_from(exc) or import_failure(exc, "ktune_triton_")) from None
        if interpret:
            bind_libdevice(module.__dict__)
        return module

    def _aot_compile(self, spec: KernelSpec, config: Config) -> Any:
        """Compile for ``spec.options.arch`` without a GPU; shared by the static report and
        ``compile`` (one compile per variant and argument types).
        """
        key, request = self._aot_request(spec, config)
        clock = time.perf_counter()
        with self._aot_lock:
            if key not in self._aot:
                self._aot[key] = (ts.run_in_subprocess(request) if self.interpret
                                  else request.run())
            out = self._aot[key]
        self.compile_phases["compile"] = time.perf_counter() - clock
        self.compile_phases["of which launcher"] = jit_warm.LAUNCHER_SECONDS.pop("last", 0.0)
        if isinstance(out, CompileFailure):
            raise out
        return out

    def launcher_ahead(self, spec: KernelSpec, config: Config) -> tuple[bool, float]:
        """Compile-pool task: build the kernel's launcher (Triton 3.6) without compiling it, so
        the sweep's first run does not wait for a compile and a launcher build in series
        (:mod:`.launcher_ahead`); (built, seconds)."""
        if self.interpret:
            return False, 0.0
        _key, request = self._aot_request(spec, config)
        return request.launcher_ahead()

    def quick_launch(self) -> bool:
        """Whether a sweep's workers launch compiled kernels before their host launcher is
        built (Triton 3.6's per-signature launcher: :mod:`.direct_launch`), so the sweep does
        not hold its first runs for the launcher task. On by default (``KTUNE_QUICK_LAUNCH=0``
        turns it off): in two interleaved A/Bs on the H200, 5 of 6 short sweeps ended sooner with
        it and every first result came 2-3x sooner (bench/results/corpus_vs_autotune/2026-12-02-
        1420/-1422/-1424, and the arms of 2026-12-03-0638); the high first-pass readings seen
        beside it then were the host-starved timing fixed by the hold (measure/held_runs.py)."""
        return os.environ.get(direct_launch.QUICK_LAUNCH_ENV, "1") != "0" and \
            direct_launch.per_signature_launcher()

    def _aot_request(self, spec: KernelSpec, config: Config) -> tuple[tuple, ts.AotRequest]:
        """The compile of ``config`` as a request a process can run: (its cache key, it); the
        argument types are the cell's, whatever name ``name_prefix`` gives the kernel."""
        original, spec = spec, with_name_prefix(spec, config, rename=rename_python)
        sig = check_cell(spec)
        clock = time.perf_counter()
        module = self.module(spec)
        self.compile_phases = {"module": time.perf_counter() - clock}
        kernel = getattr(module, spec.name)
        if spec.inputs is None:
            raise CellError("the static report needs --inputs to know the argument types",
                            line=1, fix="Add --inputs make_inputs.")
        cxx = spec.space.py_env(config)  # the values, as at run time
        clock = time.perf_counter()
        types, aligned, host = self._argument_types(original, sig, kernel, cxx)
        self.compile_phases["argument types"] = time.perf_counter() - clock
        chain = unwrap(kernel)
        values = {**host, **cxx}
        values.update(apply_heuristics(chain, values))
        constexprs = {p: values[p] if p in values else param_default(chain.jit, p)
                      for p in sig.constexprs}
        options = {k: cxx[k] for k in LAUNCH_OPTIONS if k in cxx}
        key = (spec.source_hash, config, tuple(sorted(types.items())), tuple(sorted(aligned)),
               spec.options.arch)
        request = ts.AotRequest(module.__file__, spec.name, types,
                                {k: as_constexpr(v) for k, v in constexprs.items()},
                                frozenset(aligned), options, spec.options.arch, sig.def_lines,
                                launch=_launch_placeholders(spec, sig, kernel, config, host))
        return key, request

    @staticmethod
    def _arg_types_key(spec: KernelSpec) -> tuple:  # literals, globals, closure too
        return (spec.source_hash, inputs_key(spec.inputs))

    def _argument_types(self, spec: KernelSpec, sig: Any, kernel: Any,
                        cxx: dict[str, int]) -> Hints:
        """Argument types and 16-byte alignment, from ONE call of the inputs function per cell
        (:func:`.argument_types.argument_types`), from the set this process's run drew where
        there is one (``user_code.any_inputs``).

        Calling ``inputs()`` for every config made a sweep of a 4096^3 GEMM spend seconds per
        variant generating arrays only to read their dtypes (bench/results/sweeps-h200).
        The third item is the inputs' values of the kernel's constexprs and of everything a
        heuristic may read.
        """
        key = self._arg_types_key(spec)
        with self._aot_lock:
            cached = self._arg_types.get(key)
        if cached is not None:
            return cached
        host = dict(any_inputs(spec.inputs))  # its failure: the run reports it
        found = light(argument_types(sig, kernel, host, cxx))
        with self._aot_lock:
            self._arg_types[key] = found
        return found

    def preload(self, spec: KernelSpec) -> None:
        """Import the cell's module (and what it imports: the user's package) and Triton's
        compiler, so this compile-pool process's first compile does not pay. The argument
        types are not read here: one process of the pool reads them (:meth:`pool_hints`) and
        every compile receives them, instead of each process calling ``inputs()`` (on the
        H200, 15 processes each drawing a 4096^2 matmul's inputs summed 6.8 s, issue 33)."""
        self.module(spec)  # first: a spec sent at parse has no autotune tunables yet
        import triton.compiler  # noqa: F401 - the compiler's own first import

        check_cell(spec)

    def pool_hints(self, spec: KernelSpec) -> Any:
        """What every compile of ``spec`` shares and costs one ``inputs()`` call to learn:
        the argument types, alignment and the inputs' constexpr values, read once (by one
        compile-pool process) and handed to the others with each compile
        (:meth:`seed_pool_hints`), the arrays as stand-ins (:func:`.argument_types.light`).
        None without ``--inputs``."""
        if spec.inputs is None:
            return None
        sig = check_cell(spec)
        kernel = getattr(self.module(spec), spec.name)
        return self._argument_types(spec, sig, kernel, spec.space.py_env(next(iter(
            spec.space.configs()))))

    def known_pool_hints(self, spec: KernelSpec) -> Any:
        """:meth:`pool_hints` as this process read them already (the device worker's build
        of a first run, from the input set the run drew: ``user_code.call_inputs``); None
        where it read none. Nothing is drawn for them here."""
        with self._aot_lock:
            return self._arg_types.get(self._arg_types_key(spec))

    def seed_pool_hints(self, spec: KernelSpec, hints: Any) -> None:
        """Take :meth:`pool_hints` read by another process: this one calls no ``inputs()``."""
        if hints is not None:
            with self._aot_lock:
                self._arg_types[self._arg_types_key(spec)] = hints

    def static_report(self, spec: KernelSpec, config: Config) -> Any:
        """Triton's own sm_90 compile (no GPU needed): registers, smem, SASS mix."""
        compiled = self._aot_compile(spec, config)
        warps = int(spec.space.cxx_env(config).get("num_warps", compiled.num_warps))
        clock = time.perf_counter()
        report = ts.static_report(compiled, spec.options.arch, 32 * warps)
        self.compile_phases["static report"] = time.perf_counter() - clock
        return report

    def compile(self, spec: KernelSpec, config: Config) -> TritonVariant:
        """Import the cell's module and check it compiles (ahead of time, for the target arch)."""
        # name_prefix: the kernel renamed in its module
        spec = with_name_prefix(spec, config, rename=rename_python)
        sig = check_cell(spec)
        check_launch_options(spec, LAUNCH_OPTIONS)
        try:  # the interpreter runs the Python: its report's compile is the run's business
            if not self.interpret:  # (runner.static_reports.report_later), not a wait
                self._aot_compile(spec, config)
        except CellError:
            pass  # a missing or odd argument: bind() reports it with the fix, as a run error
        kernel = getattr(self.module(spec), spec.name)
        if not self.interpret:
            ensure_allocator()
        return TritonVariant(spec, sig, kernel, config, "cpu" if self.interpret else "cuda",
                             {**DEFAULT_LIMITS, **self.device().limits})

    def timer(self) -> Any:
        """The host timer under the interpreter, torch CUDA events on a GPU (built ahead when
        the device opened, see :class:`TimerSlot`)."""
        return self._timer_slot.get(lambda: self._make_timer(self.device().limits))

    def _make_timer(self, limits: Mapping[str, int]) -> Any:
        if self.interpret:
            return HostClock(INTERPRETER_TIMER, "no GPU: the Triton interpreter runs on the host")
        timer_ahead.wait_built()  # its kernels compiled in a subprocess: found in the cache
        warm_cache_key()  # else their compiles wait for the key thread's hash
        return TorchTimer(flush_bytes(limits.get("L2_BYTES", 0)),
                          limits.get("SM_COUNT", 132)).warmed()

    def is_fatal(self, exc: BaseException) -> bool:
        """Sticky CUDA errors (by message) leave the context unusable."""
        if self.interpret:
            return False
        return any(w in str(exc).lower() for w in _STICKY_WORDS)

    def profile_scopes(self, spec: KernelSpec, config: Config,
                       inputs: Callable[[], dict[str, Any]]) -> Breakdown:
        """Trace one launch under Proton's instrumentation (see :mod:`.profile`)."""
        bound = self.compile(spec, config).bind(inputs())
        return profile_triton(bound, spec.name, math.prod(bound.launch_info()["grid"]))

    def line_file(self, variant: Variant) -> str | None:
        """The cached module file the kernel was imported from (its lines are cell lines)."""
        code = getattr(getattr(getattr(variant, "kernel", None), "fn", None), "__code__", None)
        return code.co_filename if code is not None else None


def _launch_placeholders(spec: KernelSpec, sig: Any, kernel: Any, config: Config,
                         host: Mapping[str, Any]) -> dict[str, Any] | None:
    """The worker's launch arguments for ``config`` with arrays as dtype placeholders, or None
    when they cannot be built or sent (then the compile is ahead of time, see :mod:`.jit_warm`).
    """
    import pickle

    variant = TritonVariant(spec, sig, kernel, config, "cpu")
    try:
        kwargs, _ = call_arguments(variant, host, _placeholder)
        pickle.dumps(kwargs)  # the interpreter's worker sends them to a compile child
    except Exception:  # noqa: BLE001 - a missing value is bind()'s to report, with its fix
        return None
    return kwargs


def _placeholder(_name: str, value: Any, block: list[int] | None) -> Any:
    """What an array (or a tensor descriptor's tensor) stands as in a warm compile."""
    if is_descriptor(value):
        return DescriptorPlaceholder.of(value, ts.dtype_name(value.base), block)
    return ArrayPlaceholder(ts.dtype_name(value))


BACKEND = TritonBackend()
