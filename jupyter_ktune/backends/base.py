"""The one protocol every backend implements, and the device description it reports.

A backend owns the whole life of a variant: it checks the cell, compiles a (KernelSpec, Config)
into a :class:`Variant`, reports what its compiler says about it (``static_report``), binds the
variant to arguments on the device (:class:`Bound`), names the timer the timing protocol uses,
describes its device, and, optionally, profiles the variant (named scopes, and which source
file ncu's per-line samples belong to). Everything generic - constraints, verification, the
timing protocol, provenance - lives in :mod:`jupyter_ktune.runner.execute` and
:mod:`jupyter_ktune.measure`, which never import a backend. ``README.md`` beside this file walks
through adding one.

Only ``DeviceInfo``, :func:`limits_for` and :class:`BackendBase` (the facts and optional hooks,
with the defaults a backend that leaves them out gets) are used at run time; the Protocols are
the contract, checked by the type checker and by ``tests/test_backend_protocol.py``.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

#: Set in the compile pool's processes (and the ahead-of-time child): compile, never launch,
#: never open a GPU.
COMPILE_ONLY_ENV = "KTUNE_COMPILE_ONLY"
#: Set in a compile-pool process while it compiles for a sweep that builds the kernel's host
#: launcher in a task of its own (``launcher_ahead``): the compile skips its own build.
LAUNCHER_AHEAD_ENV = "KTUNE_LAUNCHER_AHEAD"
#: True while the worker binds a sweep's first-pass run sent before the kernel's host launcher
#: was built: a backend may then launch without it (Triton 3.6: ``triton.direct_launch``).
QUICK_LAUNCH: contextvars.ContextVar[bool] = contextvars.ContextVar("ktune_quick_launch",
                                                                     default=False)

if TYPE_CHECKING:  # annotations only: the registry must not import spec.py (it imports us)
    import numpy as np

    from jupyter_ktune.measure.breakdown import Breakdown
    from jupyter_ktune.measure.timing import DeviceTimer
    from jupyter_ktune.space import Config
    from jupyter_ktune.spec import KernelSpec

#: sm_90 (H100/H200) values used in ``require`` lines where no device is here.
DEFAULT_LIMITS: Mapping[str, int] = {
    "SMEM_PER_BLOCK": 232448, "SMEM_PER_SM": 233472, "SM_COUNT": 132, "L2_BYTES": 50 << 20,
    "MAX_THREADS_PER_BLOCK": 1024, "REGS_PER_SM": 65536}


@dataclass(frozen=True)
class DeviceInfo:
    """What the worker found: a device that can run this backend, or why not."""

    available: bool
    name: str
    reason: str = ""
    compute_capability: str | None = None
    limits: Mapping[str, int] = field(default_factory=dict)
    driver: str | None = None
    toolchain: Mapping[str, str] = field(default_factory=dict)
    #: How the roofline's ceilings of this device are measured, run in the worker by
    #: :mod:`jupyter_ktune.measure.ceilings` (a module-level function: it travels by
    #: reference); None: none (CPU, interpreter), and the roofline says so.
    measure_ceilings: Callable[[], Mapping[str, Any] | None] | None = None
    #: What opening the device cost in the worker, ms per part (``"torch import"``, ``"device
    #: context"``: :class:`.opening.Opening`): the first result's phases name what it cost
    #: (``runner.describe.cold_phases``) instead of one lumped "imports and device" time.
    #: Empty where the backend does not time it, and in the reply to a request that did not
    #: open the device (the worker's ``device`` request); not part of the device's identity.
    opening_ms: Mapping[str, float] = field(default_factory=dict, compare=False, repr=False)


def device_limits(device: DeviceInfo) -> dict[str, int]:
    """The device's limits, the sm_90 values where it has none (no device here)."""
    return {**DEFAULT_LIMITS, **device.limits}


def nvidia_gpu_visible() -> bool:
    """Whether this machine shows an NVIDIA GPU to this process (its device node or the
    driver's list), asked without importing a CUDA library: what decides whether installing a
    GPU runtime (CuPy) could let a kernel run here at all."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    gpus = Path("/proc/driver/nvidia/gpus")
    return Path("/dev/nvidia0").exists() or (gpus.is_dir() and any(gpus.iterdir()))


def limits_for(spec: KernelSpec, device: DeviceInfo) -> dict[str, Any]:
    """What ``require`` lines read besides the tunables: the device limits (the sm_90 values
    when no device is here) and the inputs' values they name (:mod:`..input_values`).

    Calls the inputs function when a line names an input: only in the worker (the notebook asks
    it, ``DeviceWorker.limits``), never in the notebook process, which holds no device context.
    """
    from jupyter_ktune.input_values import input_facts

    limits = device_limits(device)
    return {**input_facts(spec, limits), **limits}


class Bound(Protocol):
    """A compiled variant bound to one set of arguments on the device."""

    def launch(self) -> None:
        """Enqueue one launch; never synchronizes."""

    def poison_outputs(self) -> None:
        """Fill the outputs with the poison value (NaN / sentinel) on the device."""

    def read_outputs(self) -> dict[str, np.ndarray]:
        """Copy the outputs back to the host (synchronizes)."""

    def launch_info(self) -> Mapping[str, Any]:
        """Grid, block, shared memory and registers of this launch, for the report."""

    # Optional (looked up with getattr by the generic code):
    #   device_outputs() -> {name: (tensor, np.dtype)}  outputs compared where they are
    #   to_device(array) -> tensor                       the reference beside them
    #   launch_and_wait() -> None                        one call, waited for (host timers)


class Variant(Protocol):
    """A compiled kernel for one config."""

    def bind(self, host_args: Mapping[str, Any]) -> Bound:
        """Copy arguments to the device and resolve the launch geometry."""


class Backend(Protocol):
    """One backend, from the cell to the profile. Implemented once per package.

    Required: ``name``, ``check``, ``device``, ``static_report``, ``compile``, ``timer``,
    ``is_fatal``. The optional hooks (the profiler, the compile pool's and the sweep's) are
    declared on :class:`BackendBase` with defaults that mean "not offered here".
    """

    name: ClassVar[str]

    def check(self, spec: KernelSpec) -> None:
        """Validate the cell on the host (raise CellError with the line and the fix).

        Runs in the notebook process: must not import the backend's runtime (CUDA, Triton, JAX).
        """

    def device(self) -> DeviceInfo:
        """Describe the device this backend would run on (called in the worker)."""

    def static_report(self, spec: KernelSpec, config: Config) -> Any:
        """Compiler resource report and SASS mix for the variant, on any machine (or None)."""

    def compile(self, spec: KernelSpec, config: Config) -> Variant:
        """Compile the variant for the device; raise CompileFailure with cell-line diagnostics."""

    def timer(self) -> DeviceTimer:
        """Return the DeviceTimer the timing protocol uses (or one with its own ``time``)."""

    def is_fatal(self, exc: BaseException) -> bool:
        """Return True when ``exc`` leaves the device context unusable (the worker must restart)."""


class ScopeProfiler(Protocol):
    """The optional profiling half of a backend (worker side, on the device)."""

    def profile_scopes(self, spec: KernelSpec, config: Config,
                       inputs: Callable[[], dict[str, Any]]) -> Breakdown:
        """Trace one launch and return its named scopes as a Breakdown.

        ``inputs()`` draws a checked input set; call it only once the backend knows it can
        profile this cell here (raise CannotRun with the reason otherwise).
        """

    def line_file(self, variant: Variant) -> str | None:
        """The source file whose lines are cell lines in ncu's per-line samples.

        None: any file with ``ktune`` in its name (the cached module of a Python cell).
        """


class BackendBase:
    """The facts and optional hooks a backend may leave out, declared once with their defaults.

    Every backend subclasses this, so the code outside ``backends/`` reads ``backend.comment``
    instead of asking whether the name is ``"cuda"``, and calls ``backend.preload(spec)``
    instead of asking whether it has one: a new backend changes a default here by overriding
    it in its own class, and no other file.
    """

    #: The comment that starts a ``ktune:`` directive line in this backend's cells.
    comment: ClassVar[str] = "#"
    #: Whether the cell may carry the CUDA C++ directives (``include``, ``pipeline``,
    #: ``T = float``): the model (:mod:`jupyter_ktune.spec`) refuses them elsewhere.
    cxx_directives: ClassVar[bool] = False
    #: The cell's language as messages name it ("CUDA C++", "Triton").
    language: ClassVar[str] = ""
    #: The compiler controls (:mod:`jupyter_ktune.compiler_controls`) it takes, any other
    #: refused on its cell line; None: not checked (to it they are tunables like any other).
    compiler_controls: ClassVar[frozenset[str] | None] = None
    #: Whether the cell is Python source, so ``--from module:kernel`` can read it from a module.
    python_cells: ClassVar[bool] = True
    #: The editor grammar of its cells, as a JupyterLab mime type: the labextension reads it
    #: from the server (``GET ktune/backends``, :mod:`jupyter_ktune.server`), so a new backend's
    #: cells are highlighted right without a TypeScript change. Declared, not derived from
    #: ``python_cells``: a cell that is not Python may be any language JupyterLab knows.
    editor_mime: ClassVar[str] = "text/x-ipython"
    #: Whether verification fills the outputs with a poison value before a run: off where
    #: outputs are returned, never written in place (Pallas: fresh JAX buffers it cannot
    #: pre-fill, so there a NaN is "never written, or written as NaN").
    poisons_outputs: ClassVar[bool] = True
    #: What a sweep's CPU pool compiles ahead, in words for the report; None: no compile pool.
    precompile: ClassVar[str | None] = None
    #: Whether the pool's compile of a config lands in a cache the worker's own compile of it
    #: hits (Triton's on-disk cache), so a live run finds it: then the panel's session leaves
    #: the configs compiled ahead to the pool. False: the worker would compile it again (the
    #: CUDA backend's nvcc build is kept per process), so the session prefetches as before.
    pool_builds_cached: ClassVar[bool] = False
    #: Modules a compile-pool process imports before its first compile (only the compiler).
    compiler_modules: ClassVar[tuple[str, ...]] = ()
    #: Whether an exhaustive sweep hands the pool its costliest compiles first
    #: (:mod:`jupyter_ktune.tuning.compile_order`: tile elements per thread, Triton's ptxas time).
    compile_cost_order: ClassVar[bool] = False
    #: The compute capability the scope profiler needs (Pallas: Mosaic GPU, Hopper); 0: any GPU.
    profile_min_capability: ClassVar[float] = 0.0
    #: Whether a sweep sends one compile-pool process to read :meth:`pool_hints` for all the
    #: others (Triton: the argument types); False: no such task is sent.
    shares_pool_hints: ClassVar[bool] = False
    #: Whether a sweep builds the kernel's host launcher in a pool task of its own
    #: (:meth:`launcher_ahead`, Triton 3.6) beside its first compiles; False: no such task.
    builds_launcher_ahead: ClassVar[bool] = False
    #: The export formats that fit this backend's sweeps (names in
    #: :data:`jupyter_ktune.tuning.export.EXPORTERS`), the one ``report.export()`` writes
    #: first; any result can be written as Kernel Tuner's T4 JSON, so that is the default.
    export_formats: ClassVar[tuple[str, ...]] = ("kernel_tuner",)
    #: Seconds of the phases of the last compile in this compile-pool process (Triton: the
    #: module, the argument types, the compile), added to the pool task's own; empty: none.
    compile_phases: Mapping[str, float] = MappingProxyType({})

    def warm_compiler(self) -> None:
        """In a compile-pool process, before its first compile: import ``compiler_modules``."""
        import importlib

        for name in self.compiler_modules:
            importlib.import_module(name)

    def static_capability(self, device: DeviceInfo) -> tuple[str, str]:
        """How this backend makes its static report here (the ``ktune device`` column) and a
        note on what is missing; ``("none", "")``: it makes none."""
        return "none", ""

    def preload(self, spec: KernelSpec) -> None:
        """In a compile-pool process and the worker, before the first compile: import what
        compiling and running the cell needs (its module, the user's packages), so the first
        config does not pay it; a failure is left to that config's run. Default: nothing."""

    def pool_hints(self, spec: KernelSpec) -> Any:
        """In one compile-pool process (where :attr:`shares_pool_hints`): what every compile
        of ``spec`` shares and costs an ``inputs()`` call to learn, as picklable data handed
        to each compile (:meth:`seed_pool_hints`). Default None: each compile learns it."""
        return None

    def seed_pool_hints(self, spec: KernelSpec, hints: Any) -> None:
        """Before a pool compile: take the :meth:`pool_hints` another process read, so this
        one calls no ``inputs()``. Default: nothing to take."""

    def known_pool_hints(self, spec: KernelSpec) -> Any:
        """In the device worker: the :meth:`pool_hints` it read already, from an input set a
        run drew (sent to the pool, so no pool process draws one); None where it has none.
        Nothing is drawn for them. Default None."""
        return None

    def launcher_ahead(self, spec: KernelSpec, config: Config) -> tuple[bool, float]:
        """Pool task (where :attr:`builds_launcher_ahead`): build the kernel's host launcher
        without compiling it, so the first run does not wait for a compile and a launcher
        build in series; (built, seconds). Default: nothing built."""
        return False, 0.0

    def quick_launch(self) -> bool:
        """Whether the worker may launch a sweep's first runs before :meth:`launcher_ahead` is
        done (Triton 3.6's per-signature launcher). Default False: they wait for it."""
        return False

    def runs_report_build(self, spec: KernelSpec) -> bool:
        """Whether a run of ``spec`` loads its static report's own build, made in a subprocess
        (CUDA: nvcc's cubin): then the worker's prefetch of a neighbour only starts the report
        and leaves the worker free, instead of waiting in the request loop for the build.
        Default False: the prefetch compiles in the worker, as the run would."""
        return False

    def load_prebuilt(self, spec: KernelSpec, config: Config, report: Any) -> Variant | None:
        """In the worker: the variant from a static report a sweep's pool built ahead (CUDA
        loads its cubin), so the run does not compile again. Default None: compile it."""
        return None

    def profile_scopes(self, spec: KernelSpec, config: Config,
                       inputs: Callable[[], dict[str, Any]]) -> Breakdown:
        """The scope profiler (:class:`ScopeProfiler`). Default: none, said to the user."""
        from jupyter_ktune.errors import CannotRun

        raise CannotRun(f"[ktune] no scope profiler wired for --backend {spec.backend}: scopes "
                        "exist for cuda (KT_SCOPE), triton (Proton) and pallas on Mosaic GPU")

    def line_file(self, variant: Variant) -> str | None:
        """The file of cell lines in ncu's per-line samples (:class:`ScopeProfiler`).
        Default None: any file with ``ktune`` in its name."""
        return None

    def expand(self, spec: KernelSpec, namespace: Mapping[str, Any],
               describe: Callable[[KernelSpec], dict[str, Any]]) -> KernelSpec:
        """At parse, in the notebook: the spec with what the kernel itself says folded in.

        ``describe(spec)`` is this backend's own ``describe``, answered by the device worker
        (handed in by the API layer, so the backend never calls the runner). The default: the
        cell says everything itself.
        """
        return spec


BackendFactory = Callable[[], Backend]
