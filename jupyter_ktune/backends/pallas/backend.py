"""Pallas backend (JAX): the cell is Python that builds a Pallas kernel for one config.

The cell contract
-----------------
The body of ``%%kernel NAME --backend pallas ...`` is a Python module. It defines a function
``NAME`` that takes the config's tunables as keyword arguments (block shapes, ``num_warps``,
``num_stages``, a swizzle, ``max_concurrent_steps`` ... whatever its ``# ktune:`` lines declare;
swizzle names arrive as their byte span, other names as strings: ``Space.py_env``) and returns a
callable over the input arrays::

    %%kernel add --backend pallas --inputs inputs --reference reference --out z
    # ktune: BLOCK in pow2(128, 1024)
    import jax
    from jax.experimental import pallas as pl

    def add(BLOCK):
        def body(x_ref, y_ref, z_ref):
            z_ref[...] = x_ref[...] + y_ref[...]
        def run(x, y):
            spec = pl.BlockSpec((BLOCK,), lambda i: (i,))
            return pl.pallas_call(body, grid=(x.size // BLOCK,), in_specs=[spec, spec],
                                  out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                                  interpret=INTERPRET)(x, y)
        return run

* **Or the op itself.** ``NAME`` may be the op as its authors wrote it, e.g. a
  ``@functools.partial(jax.jit, static_argnames=["block_q", "num_warps"])`` function over the
  arrays whose keyword arguments are the tunables: when ``NAME`` has required parameters that
  are not tunables, it is called with the inputs and the config's tunables as keywords. Such
  ops pass no ``interpret=``; in interpret mode every ``pallas_call`` is traced under JAX's
  interpret switch (:func:`.launch.interpret_everywhere`).
* **Inputs.** The callable's parameters are looked up by name in the dict the inputs function
  returns: NumPy arrays become JAX arrays on the device, other values (sizes) are passed as Python
  values, fixed at trace time. A callable that takes only ``*args`` (a bare ``pl.pallas_call``)
  gets the dict's arrays in order, leaving out the ``--out`` names.
* **Outputs.** What the callable returns (one array, or a tuple in ``--out`` order) is what is
  checked against the reference. The inputs dict may hold the outputs too (the CUDA convention);
  they are simply not passed.
* **Injected names.** ``INTERPRET`` (True when Pallas runs in interpret mode, i.e. on a CPU) and
  ``LOWERING`` (``"triton"``, ``"mosaic_gpu"``, ``"tpu"`` or ``"interpret"``) are defined before
  the cell runs, so one cell runs everywhere: pass ``interpret=INTERPRET`` and choose compiler
  params by ``LOWERING`` (``triton.CompilerParams(num_warps=..., num_stages=...)`` for Triton).
* **Lowerings.** A cell may say which lowerings it is written for, as a top-level literal
  ``LOWERINGS = ["mosaic_gpu"]`` (default: ``["triton", "tpu", "interpret"]``, a plain
  ``pl.pallas_call``). ``LOWERING`` is the first of these that the device offers: a CPU offers
  interpret mode, a TPU Mosaic TPU, an NVIDIA GPU Triton and, from compute capability 9.0 (Hopper),
  Mosaic GPU (``plgpu.kernel``). A cell whose lowerings the device does not offer is "cannot run
  here" with what it needs, e.g. "needs an NVIDIA Hopper GPU (Mosaic GPU)"; its code never runs.

The cell is written to a cached file keyed by its source hash, padded so that file line numbers
are cell line numbers (the ``%%kernel`` line is line 1); tracebacks therefore point at the cell,
and a tracing or lowering error is a compile error on the line of the innermost cell frame.

Timing: on a GPU, CUPTI kernel records through ``jax.experimental.mosaic.gpu.profiler.measure``
with an L2 flush before each call; in interpret mode the host clock, labelled as such (see
:mod:`.timing`). JAX is imported only in the worker.
"""
from __future__ import annotations

import ast
import functools
import threading
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from jupyter_ktune.backends.base import BackendBase, DeviceInfo, Variant
from jupyter_ktune.backends.gpu_ceilings import measure_ceilings
from jupyter_ktune.backends.opening import Opening
from jupyter_ktune.backends.pallas.cell import (
    Target,
    cell_failure,
    cell_lowerings,
    choose_lowering,
    detect_target,
    failure_at,
    load_cell,
    native_lowering,
    parse_cell_source,
    takes_arrays,
    without_lowerings,
    written_for,
)
from jupyter_ktune.backends.pallas.launch import PallasVariant
from jupyter_ktune.backends.pallas.profile import mosaic_lowering, profile_pallas
from jupyter_ktune.backends.pallas.timing import PallasStatic, host_timer, make_gpu_timer
from jupyter_ktune.errors import CannotRun, CellError, CompileFailure
from jupyter_ktune.measure.breakdown import Breakdown
from jupyter_ktune.requirements import missing_reason
from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec
from jupyter_ktune.variant_key import variant_key


class PallasBackend(BackendBase):
    """The ``--backend pallas`` implementation."""

    name: ClassVar[str] = "pallas"
    language: ClassVar[str] = "Pallas"
    compiler_controls: ClassVar[frozenset[str] | None] = frozenset()  # none: each is refused
    poisons_outputs: ClassVar[bool] = False  # fresh JAX buffers, never pre-filled
    profile_min_capability: ClassVar[float] = 9.0  # Mosaic GPU, its only profiled lowering
    export_formats: ClassVar[tuple[str, ...]] = ("pallas", "kernel_tuner")  # a block-size table

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: dict[tuple, threading.Lock] = {}
        self._built: dict[tuple, PallasVariant | BaseException] = {}

    def check(self, spec: KernelSpec) -> None:
        """Host-side checks: LOWERINGS is valid and the cell defines the kernel's function.

        A syntax error passes here: compiling reports it with its cell line as a diagnostic.
        """
        try:
            tree = parse_cell_source(spec)
        except CellError:
            return
        try:
            cell_lowerings(spec, tree)
        except CompileFailure as exc:
            d = exc.diagnostics[0]
            raise CellError(d.message, line=d.line) from None
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assigned = {t.id for n in tree.body if isinstance(n, ast.Assign)
                    for t in n.targets if isinstance(t, ast.Name)}
        if spec.name not in defined | assigned:
            raise CellError(f"the cell defines no function '{spec.name}'", line=2,
                            fix=f"Define def {spec.name}(**tunables): ... returning a callable "
                            "over the input arrays.")

    @cached_property
    def target(self) -> Target:
        """The worker's JAX device (detected once)."""
        import jax

        return detect_target(jax.devices())

    def device(self) -> DeviceInfo:
        """Describe the device; Pallas can always run (interpret mode on a CPU)."""
        return self._device

    @cached_property
    def _device(self) -> DeviceInfo:
        """Once per worker, as every backend's: the opening's parts (``opening_ms``) are what
        the first request paid; a description made again would carry parts of its own."""
        opened = Opening()  # the first result's phases: jax's import, then the target
        try:
            (jax,) = opened.imports("jax")
        except ImportError:
            return DeviceInfo(False, "no JAX", reason=missing_reason("jax"))
        t = self.target
        limits = {"SM_COUNT": t.sm_count} if t.sm_count else {}
        toolchain = {"jax": jax.__version__, "lowerings": ", ".join(t.offers)}
        try:
            import jaxlib

            toolchain["jaxlib"] = jaxlib.__version__
        except (ImportError, AttributeError):
            pass
        driver = None
        if t.platform == "gpu":
            from jupyter_ktune.measure.clocks import driver_version

            driver = driver_version()
        return DeviceInfo(True, t.name, compute_capability=t.compute_capability, limits=limits,
                          driver=driver, toolchain=toolchain, measure_ceilings=measure_ceilings,
                          opening_ms=opened.done())

    def static_capability(self, device: DeviceInfo) -> tuple[str, str]:
        """The lowered program's sizes, on a GPU only."""
        if device.compute_capability:
            return "yes (program sizes)", ""
        return "on a GPU only", ""

    def _variant(self, spec: KernelSpec, config: Config) -> PallasVariant:
        """Build (once per variant key and config, shared by compile and the static thread)."""
        key = variant_key(spec, config)  # not the source alone: the variant binds spec.outputs
        with self._lock:
            lock = self._keys.setdefault(key, threading.Lock())
        with lock:
            if key not in self._built:
                try:
                    self._built[key] = self._build(spec, config)
                except (CompileFailure, CannotRun) as exc:
                    self._built[key] = exc
            built = self._built[key]
        if isinstance(built, BaseException):
            raise built
        return built

    def _build(self, spec: KernelSpec, config: Config) -> PallasVariant:
        try:
            tree = parse_cell_source(spec)
        except CellError as exc:
            raise failure_at(exc.line, exc.message) from None
        lowering = choose_lowering(cell_lowerings(spec, tree), self.target)
        try:
            return self._build_with(spec, config, lowering)
        except CompileFailure as exc:
            found = written_for(tree)
            if found is None or lowering == native_lowering(found):
                raise
            raise without_lowerings(exc, found, lowering) from None

    def _build_with(self, spec: KernelSpec, config: Config, lowering: str) -> PallasVariant:
        module = load_cell(spec, lowering)
        path = Path(module.__file__ or "")
        factory = module.__dict__.get(spec.name)
        if not callable(factory):
            raise failure_at(2, f"the cell defines no function '{spec.name}'",
                              f"Define def {spec.name}(**tunables) returning a callable.")
        tunables = spec.space.py_env(config)
        if takes_arrays(factory, tunables):  # the op itself: tunables are its keywords
            fn: Any = functools.partial(factory, **tunables)
        else:
            try:
                fn = factory(**tunables)
            except Exception as exc:  # noqa: BLE001 - the cell's own error, on its line
                raise cell_failure(exc, path) from None
        if not callable(fn):
            raise failure_at(2, f"{spec.name}(...) returned a {type(fn).__name__}, not a "
                              "callable", "Return the pallas_call (or a function calling it).")
        variant = PallasVariant(spec, lowering, fn, path)
        if spec.inputs is not None:  # trace and lower now, so errors are compile errors
            try:
                host_args = spec.inputs()
            except Exception:  # noqa: BLE001 - the run reports the inputs function's failure
                return variant
            if isinstance(host_args, dict):
                try:
                    variant.prepare(host_args)
                except CellError as exc:
                    raise failure_at(exc.line, exc.message, exc.fix or "") from None
        return variant

    def static_report(self, spec: KernelSpec, config: Config) -> PallasStatic | None:
        """Sizes of the lowered and compiled programs on a GPU/TPU; None in interpret mode."""
        if self.target.platform == "cpu":
            return None  # interpret mode: the program is a CPU scan, nothing to report on
        variant = self._variant(spec, config)
        if variant.lowered is None:
            return None
        return PallasStatic.from_lowered(variant.lowering, variant.lowered,
                                         next(iter(variant.compiled.values())))

    def compile(self, spec: KernelSpec, config: Config) -> PallasVariant:
        """Import the cell, build the callable for the config, trace, lower and compile it."""
        return self._variant(spec, config)

    def timer(self) -> Any:
        """CUPTI on a GPU; the host clock in interpret mode and on a TPU, labelled as such."""
        return self._timer

    @cached_property
    def _timer(self) -> Any:
        t = self.target
        if t.platform == "gpu":
            return make_gpu_timer(t.name)
        if t.platform == "tpu":
            return host_timer("Pallas on TPU, host time around block_until_ready (includes "
                              "dispatch; not device time)")
        return host_timer("Pallas interpret mode, host time (not GPU time)")

    def is_fatal(self, exc: BaseException) -> bool:
        """Return True when the GPU context is lost (illegal address and friends)."""
        text = str(exc).lower()
        return self.target.platform == "gpu" and any(
            w in text for w in ("illegal address", "illegal memory", "misaligned",
                                "unspecified launch failure", "cuda_error_launch_failed"))


    def profile_scopes(self, spec: KernelSpec, config: Config,
                       inputs: Callable[[], dict[str, Any]]) -> Breakdown:
        """Mosaic GPU's on-device profiler; other lowerings raise CannotRun saying why."""
        lowering = mosaic_lowering(self.target, spec)  # before drawing inputs: it may refuse
        return profile_pallas(self, spec, config, inputs(), lowering)

    def line_file(self, variant: Variant) -> str | None:
        """None: ncu's lines are those of the cached cell module (``ktune`` in its name)."""
        return None


BACKEND = PallasBackend()
