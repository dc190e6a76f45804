"""One variant, end to end, inside the worker: constraints, static report, compile, verify, time.

Every outcome is a :class:`RunResult` with a status, never an exception the notebook has to
catch: a compile error carries cell-line diagnostics, a fault carries the CUDA error, a
constraint violation is "not allowed" and is never launched. Each phase (device start, compile,
inputs, bind, reference, the kernel's runs) is announced to the client as it starts
(:mod:`.phases`), so a timeout names the phase that ran out of time.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import time
import traceback
from concurrent.futures import Future
from typing import Any

from jupyter_ktune.backends import get_backend
from jupyter_ktune.backends.base import QUICK_LAUNCH, Backend, DeviceInfo, limits_for
from jupyter_ktune.backends.uploads import Uploads, for_input_set
from jupyter_ktune.errors import CannotRun, CellError, CompileFailure, OutOfResources
from jupyter_ktune.failure_cause import by_cause
from jupyter_ktune.measure.clocks import read_clocks
from jupyter_ktune.measure.integrity import changed_inputs
from jupyter_ktune.measure.tolerance import judged, rule_for
from jupyter_ktune.measure.verify import compare
from jupyter_ktune.measure.verify_device import DeviceReference, compare_tensor, device_comparable
from jupyter_ktune.results import Measurement, Provenance, RunResult, Status, Verification
from jupyter_ktune.runner import phases, timed
from jupyter_ktune.runner.input_sets import (  # noqa: F401 - REDRAW_EVERY, checked_inputs: API
    REDRAW_EVERY,
    SetBesideBuild,
    checked_inputs,
    current_set,
    ensure_expected,
    forget_sets,
    io_key,
    last_set,
    prepare_inputs,
)
from jupyter_ktune.runner.static_reports import (  # noqa: F401 - seed_static: API
    report_future,
    report_later,
    seed_static,
    with_block,
)
from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec
from jupyter_ktune.variant_key import variant_key

_variants: dict[tuple[str, Config], Any] = {}
_verified: dict[tuple[str, tuple[str, Config]], Verification] = {}
_races: dict[tuple[str, Config], float] = {}  # (source hash, config) -> incumbent ms, one-shot
_quick: dict[tuple[str, Config], bool] = {}  # (source hash, config) -> QUICK_LAUNCH, one-shot


class FatalDeviceError(Exception):
    """Raised after a result is built when the device context is lost; the worker exits."""

    def __init__(self, result: RunResult):
        super().__init__(result.reason)
        self.result = result


def _poisoned(spec: KernelSpec, bound: Any) -> bool:
    """Whether the outputs hold the poison sentinel before the run: the backend says so
    (``BackendBase.poisons_outputs``): Pallas outputs are fresh JAX buffers it cannot pre-fill
    (interpret mode fills them with plain NaN), so there a NaN is "never written, or written as
    NaN"."""
    return bool(get_backend(spec.backend).poisons_outputs)


def _verify(spec: KernelSpec, bound: Any, expected: dict[str, Any] | None,
            on_device: DeviceReference | None = None, inputs: dict[str, Any] | None = None,
            flops: float | None = None) -> Verification | None:
    """Poison the outputs, run once, compare with the reference.

    A backend whose outputs are tensors on a GPU (``device_outputs``) has its floating outputs
    compared there against ``on_device`` (the reference uploaded once per input set); only
    scalars come back. Everything else is copied to the host and compared there. A
    ``--compare`` function judges host copies. ``inputs`` (the host originals) are checked
    against what the kernel left in its inputs, where the bound can read them back.
    """
    if expected is None:
        return None
    bound.poison_outputs()
    bound.launch()
    changed, notes = changed_inputs(bound, inputs or {}, spec.outputs)
    breaches = tuple(bound.guard_breaches()) if hasattr(bound, "guard_breaches") else ()
    opt, poisoned = spec.options, _poisoned(spec, bound)
    tol = rule_for(opt.rtol, opt.atol, opt.reduction, flops,
                   sum(v.size for v in expected.values()))
    judge_fn = getattr(spec, "compare", None)
    in_place = bound.device_outputs() if on_device is not None and judge_fn is None and hasattr(
        bound, "device_outputs") else {}
    host: dict[str, Any] | None = None
    checks = []
    for name in spec.outputs:
        # on a GPU only: for tensors in host memory the sliced NumPy compare is faster
        if (name in in_place and getattr(in_place[name][0], "is_cuda", False)
                and device_comparable(in_place[name][1])):
            tensor, dtype = in_place[name]
            checks.append(compare_tensor(name, tensor, on_device.tensor(name, bound.to_device),
                                         tol(dtype), dtype, poisoned))
            continue
        host = host if host is not None else bound.read_outputs()
        check = compare(name, host[name], expected[name], tol(host[name].dtype), poisoned)
        if judge_fn is not None:
            check = judged(check, judge_fn, host[name], expected[name])
        checks.append(check)
    return Verification(checks=tuple(checks), trials=1, guard_breaches=breaches,
                        changed_inputs=changed, notes=notes)


def _work(spec: KernelSpec, host_args: dict[str, Any], cxx: dict[str, int],
          what: str) -> float | None:
    expr = getattr(spec, what)
    if expr is None:
        return None
    env = dict(host_args)
    env.update(cxx)
    return float(expr(env))


def _flops(spec: KernelSpec, host_args: dict[str, Any], cxx: dict[str, int]) -> float | None:
    """The flops directive's value for the tolerance's K; a broken one is reported by timing."""
    try:
        return _work(spec, host_args, cxx, "flops")
    except Exception:  # noqa: BLE001
        return None


def run_variant(spec: KernelSpec, config: Config, violations: list[str] | None = None) -> RunResult:
    """Run one variant; called in the worker. Raises FatalDeviceError after a sticky fault.
    ``violations``: the caller's check of the ``require`` lines (a panel's), taken as it is."""
    backend = get_backend(spec.backend)
    base = dict(name=spec.name, backend=spec.backend, config=dict(config))
    phases_ms: dict[str, float] = {}  # where the time went: every cold cost is a phase
    mark = [time.perf_counter()]

    def tick(name: str) -> None:
        now = time.perf_counter()
        phases_ms[name] = phases_ms.get(name, 0.0) + (now - mark[0]) * 1e3
        mark[0] = now

    try:
        backend.check(spec)
        phases.enter(phases.device(spec.backend))
        device = backend.device()
        tick("device")
        reasons = violations if violations is not None else spec.space.violations(
            config, limits_for(spec, device))  # once: where the request came from, or here
    except CellError as exc:
        return RunResult(**base, status=Status.COMPILE_ERROR, reason=str(exc))
    if reasons:
        return RunResult(**base, status=Status.NOT_ALLOWED, reason="; ".join(reasons))
    static_future = report_future(backend, spec, config)  # one per variant, kept

    def finish(status: Status, reason: str = "", runtime_failure: CompileFailure | None = None,
               **kw: Any) -> RunResult:
        late = report_later(spec, static_future, status)
        if not late and not static_future.done():
            phases.enter(phases.static_report())
        static, failure = (None, None) if late else static_future.result()
        tick("static report")  # ~0 unless the run waited for the report's compile
        failure = None if isinstance(failure, CellError) else failure  # the run says it
        if host_time(device) and failure is not None and failure.diagnostics and status in (
                Status.OK, Status.WRONG, Status.RUNTIME_ERROR):  # the interpreter ran code
            status, reason = Status.COMPILE_ERROR, str(failure)  # that does not compile
        static = with_block(static, kw.get("launch", {}))
        # the runtime compiler's messages win: they are about the code that would have run
        source = runtime_failure if runtime_failure and runtime_failure.diagnostics else failure
        diagnostics = tuple(source.diagnostics) if source else ()
        if failure and status is not Status.COMPILE_ERROR:  # never drop why there is no report
            why = str(failure) if failure.diagnostics else failure.log
            reason = f"{reason}; {why}" if reason else why
        return by_cause(RunResult(**base, status=status, reason=reason, static=static,
                                  diagnostics=diagnostics, device=device.name,
                                  static_pending=late, **kw))

    if not device.available or spec.options.static_only:
        static, failure = static_future.result()
        if isinstance(failure, CellError) or failure is not None and failure.diagnostics:
            return finish(Status.COMPILE_ERROR, str(failure))
        why = "static report only (--static-only)" if device.available else device.reason
        return finish(Status.CANNOT_RUN, why)
    key, io = variant_key(spec, config), io_key(spec)
    # A variant is verified once per worker on fresh inputs; revisited (a slider moved back), it
    # is re-timed on them. A set serves REDRAW_EVERY new variants before fresh inputs are drawn,
    # so a sweep does not pay for inputs + reference (seconds for a large GEMM) on every config.
    verification = _verified.get((io, key))
    reused = verification is not None and last_set(io) is not None
    early = SetBesideBuild(spec, config, io, tick, backend.is_fatal) if not (  # the build
        reused or key in _variants or static_future.done()) else None  # runs beside
    try:
        if early is None or not early.fatal:  # a sticky fault while drawing: raised below
            if key not in _variants:
                phases.enter(phases.compiling(spec.backend, config))
            variant = _variants.get(key) or _prebuilt(backend, spec, config, static_future) \
                or backend.compile(spec, config)
            _variants[key] = variant
    except CompileFailure as exc:
        return finish(Status.COMPILE_ERROR, str(exc), runtime_failure=exc)
    except CannotRun as exc:  # e.g. a Mosaic GPU cell on a machine without a Hopper GPU
        return finish(Status.CANNOT_RUN, str(exc))
    tick("compile")
    try:
        cxx = spec.space.cxx_env(config)
        if early is not None:
            early.raise_held("inputs")
        current = current_set(spec, config, io, reused)
        host_args = current["args"]
        tick("inputs")
        phases.enter(phases.bind(host_args))
        quick = QUICK_LAUNCH.set(_quick.pop((spec.source_hash, config), False))
        try:
            with for_input_set(current.setdefault("uploads", Uploads())):  # one upload per set
                bound = variant.bind(host_args)  # first: its errors name the kernel's parameter
        finally:
            QUICK_LAUNCH.reset(quick)
        tick("bind")
        if early is not None:
            early.raise_held("reference")
        if not reused:
            ensure_expected(spec, current, config)
        tick("reference")  # ~0 when the helper (or prepare_inputs) ran it ahead
        if not reused:
            current["uses"] += 1
            phases.enter(phases.run("the verification run"))
            verification = _verify(spec, bound, current["expected"], current.get("on_device"),
                                   inputs=host_args, flops=_flops(spec, host_args, cxx))
            if verification is not None:
                _verified[(io, key)] = verification
        tick("verify")
        measurement = None
        around: dict[str, float] = {}  # the "time" phase's parts outside the protocol's stages
        if spec.options.time:
            timing, clk0, around = timed.take(spec, bound, backend.timer, static_future,
                                              _races.pop((spec.source_hash, config), None))
            clk1 = read_clocks()
            prov = Provenance(
                device=device.name, method=timing.method, source_hash=spec.source_hash,
                compute_capability=device.compute_capability,
                sm_clock_mhz=(clk0.sm_mhz, clk1.sm_mhz) if clk0 and clk1 else None,
                sm_clock_max_mhz=clk1.sm_max_mhz if clk1 else None,
                mem_clock_mhz=clk1.mem_mhz if clk1 else None, driver=device.driver,
                toolchain=dict(device.toolchain), host=platform.node(), timestamp=time.time())
            measurement = Measurement(timing, prov, flops=_work(spec, host_args, cxx, "flops"),
                                      bytes=_work(spec, host_args, cxx, "bytes"))
        tick("time")
        if measurement is not None and measurement.timing.stages_ms:  # "time", stage by stage
            phases_ms.update(phases.split_phase(phases_ms.pop("time"),
                                               {**around, **measurement.timing.stages_ms}))
        status = Status.OK if verification is None or verification.passed else Status.WRONG
        reason = verification.summary() if verification else ""
        if reused:
            reason += " [verified on this variant's first run in this session]"
        return finish(status, reason, verification=verification, measurement=measurement,
                      launch=bound.launch_info(), phases_ms=phases_ms)
    except CellError as exc:
        return finish(Status.RUNTIME_ERROR, str(exc))
    except OutOfResources as exc:
        return finish(Status.OUT_OF_RESOURCES, f"[ktune] {exc}")
    except Exception as exc:  # noqa: BLE001 - a kernel fault is a result, not a crash
        result = finish(Status.RUNTIME_ERROR, f"[ktune] {type(exc).__name__}: {exc}")
        if backend.is_fatal(exc):
            _variants.clear()
            forget_sets()
            raise FatalDeviceError(result) from exc
        if os.environ.get("KTUNE_DEBUG"):
            traceback.print_exc()
        return result


def loaded_variant(spec: KernelSpec, config: Config) -> Any:
    """The compiled variant of ``config``: this worker's kept one, else compiled now and kept
    (a compile failure raises :class:`CompileFailure`)."""
    key = variant_key(spec, config)
    if key not in _variants:
        phases.enter(phases.compiling(spec.backend, config))
        _variants[key] = get_backend(spec.backend).compile(spec, config)
    return _variants[key]


def compile_variant(spec: KernelSpec, config: Config) -> RunResult:
    """Compile (and cache) a variant without running it.

    Where a device is present the kernel is loaded, so a later run of the same config starts
    at once; where the run loads the static report's own build (``runs_report_build``: CUDA's
    cubin) that build is only started, and the run loads it.
    """
    backend = get_backend(spec.backend)
    device = backend.device()
    if not device.available:
        return run_variant(spec.with_options(static_only=True), config)
    # On a device the static report is only started (nvcc runs in the thread pool, cached for the
    # later run); the worker's time goes to loading the runtime variant, which the run needs.
    # Under an interpreter a panel's prefetch starts none: its run fetches it after the result.
    if not (spec.options.static_later and host_time(device)):
        report_future(backend, spec, config)
    result = RunResult(name=spec.name, backend=spec.backend, config=dict(config),
                       status=Status.CANNOT_RUN, device=device.name)
    key = variant_key(spec, config)
    if key not in _variants and backend.runs_report_build(spec):  # a prefetch: the worker
        # stays free for the panel's next move (nvcc held it 1.6-1.9 s); the run loads the build
        return dataclasses.replace(result, status=Status.OK, reason="building (not run)")
    try:
        if key not in _variants:
            phases.enter(phases.compiling(spec.backend, config))
        _variants[key] = _variants.get(key) or backend.compile(spec, config)
    except CompileFailure as exc:
        return dataclasses.replace(result, status=Status.COMPILE_ERROR, reason=str(exc),
                                   diagnostics=tuple(exc.diagnostics))
    except CannotRun as exc:
        return dataclasses.replace(result, reason=str(exc))
    return dataclasses.replace(result, status=Status.OK, reason="compiled (not run)")


def _prebuilt(backend: Backend, spec: KernelSpec, config: Config, static: Future) -> Any:
    """The variant loaded from a static report that is already here (a sweep's pool built it
    ahead, ``seed_static``), where the backend can load its binary (``load_prebuilt``); else
    None and the backend compiles. A report still being built is not waited for: the run
    compiles beside it, as a single run always does."""
    report, failure = static.result() if static.done() else (None, None)
    ok = report is not None and failure is None
    return backend.load_prebuilt(spec, config, report) if ok else None


def host_time(device: DeviceInfo) -> bool:
    """Whether the device runs kernels on the host (Triton's interpreter, Pallas interpret)."""
    return device.compute_capability is None


def race_against(source_hash: str, config: Config, incumbent_ms: float | None) -> None:
    """Worker-side: time the next run of ``config`` as a race against ``incumbent_ms`` (the
    sweep's best median so far): it stops once clearly slower (``TimingPlan.race_ms``). One-shot,
    so a later panel run of the same variant is timed in full."""
    if incumbent_ms is None:
        _races.pop((source_hash, config), None)
    else:
        _races[(source_hash, config)] = float(incumbent_ms)


def quick_launch(source_hash: str, config: Config, quick: bool) -> None:
    """Worker-side: bind the next run of ``config`` with ``QUICK_LAUNCH`` set (a sweep's
    first-pass run sent before the kernel's host launcher was built). One-shot, like a race."""
    if quick:
        _quick[(source_hash, config)] = True
    else:
        _quick.pop((source_hash, config), None)


def device_info(backend_name: str) -> DeviceInfo:
    """Return the backend's device description (worker side)."""
    return get_backend(backend_name).device()
