"""The worker's input sets: one kept per cell with its reference outputs, the next drawn ahead.

A new variant is checked on the current input set; a set serves at most ``REDRAW_EVERY`` new
variants before fresh inputs are drawn, so a sweep does not pay for inputs + reference (seconds
for a large GEMM) on every config. The next set is drawn in a helper process
(:mod:`~jupyter_ktune.runner.inputs_ahead`), with a host reference run there too, and the first
one of a sweep in a request of its own (:func:`prepare_inputs`): no config's timeout pays for
the reference (issue 21). The key of a set (:func:`io_key`) is everything that decides the
inputs and the expected outputs.
"""

from __future__ import annotations

import copy
import inspect
import os
import time
from collections.abc import Callable
from typing import Any

from jupyter_ktune.errors import CellError
from jupyter_ktune.measure.verify import reference_outputs, zero_inputs
from jupyter_ktune.measure.verify_device import DeviceReference
from jupyter_ktune.problem_key import inputs_signature, problem_key
from jupyter_ktune.runner import phases
from jupyter_ktune.runner.device_modules import uses_device_arrays
from jupyter_ktune.runner.input_checks import check_input_set
from jupyter_ktune.runner.inputs_ahead import InputsAhead, helper_reference, host_only
from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec
from jupyter_ktune.user_code import call_inputs, call_user, keep_inputs, name_of

_last_inputs: dict[str, dict[str, Any]] = {}  # one input set kept, with its reference outputs
REDRAW_EVERY = 8  # new variants checked on one random input set before fresh inputs are drawn
AHEAD_MAX_AGE_S = 120.0  # a sweep starts on a set drawn ahead this recently (prepare_inputs)
_ahead = InputsAhead()  # the next input set, drawn in a helper process (see inputs_ahead)
#: "0": a cell's first run draws its own set when the one the helper draws for it is not back
#: yet, instead of waiting for it (to compare, ``bench/first_minute_ab.py --base-env``)
FIRST_SET_WAIT_ENV = "KTUNE_FIRST_SET_WAIT"


def first_set_waits() -> bool:
    """Whether a cell's first run waits for the set the helper is drawing for it.

    The helper began that draw at the cell's start, before the run could (:mod:`.first_set`),
    so it is ahead; a second draw of the same set in the worker only doubles the CPU work while
    both run: Kernel Tuner's vector add's two 10 M fp32 vectors took 0.66-0.79 s in each of
    the two processes drawing them at once, 0.37 s in a process alone (an H100 host,
    bench/results/first_result_floor)."""
    return os.environ.get(FIRST_SET_WAIT_ENV, "1") != "0"


def last_set(io: str) -> dict[str, Any] | None:
    """The input set kept for ``io``, if any."""
    return _last_inputs.get(io)


def forget_sets() -> None:
    """Drop the kept set and the one drawn ahead (after the device context was lost)."""
    _last_inputs.clear()
    _ahead.drop()


def io_key(spec: KernelSpec) -> str:
    """What decides the inputs and the expected outputs: the kernel's source and the problem
    (:func:`~jupyter_ktune.problem_key.problem_key`: inputs, reference, outputs, tolerances)."""
    return f"{spec.source_hash}\0{problem_key(spec)}"


def checked_inputs(spec: KernelSpec, config: Config,
            drawn: dict[str, Any] | None = None) -> dict[str, Any]:
    """Call the inputs function (or take ``drawn``, a set it made ahead) and check the set."""
    if spec.inputs is None:
        raise CellError("no inputs function is given, so the kernel cannot run", line=1,
                        fix="Add --inputs make_inputs, a function returning a dict of arguments.")
    args = drawn if drawn is not None else call_inputs(spec.inputs, keep=True)
    if drawn is not None:
        keep_inputs(spec.inputs, drawn)  # a build beside the run reads its types from it
    if not isinstance(args, dict):
        raise CellError(f"the inputs function returned a {type(args).__name__}, not a dict",
                        line=1, fix="Return dict(x=..., y=..., n=...) keyed by kernel parameter.")
    zeros = zero_inputs(args, spec.outputs)
    if zeros:
        raise CellError(f"input {zeros[0]} is all zeros, which hides unwritten outputs and wrong "
                        "indexing (and can even run faster than real data)", line=1,
                        fix="Fill inputs with random values, e.g. np.random.rand(n).")
    check_input_set(spec, args)
    return args


def draw_inputs(spec: KernelSpec, config: Config, io: str, wait: bool = True
                ) -> dict[str, Any]:
    """A fresh input set: the one drawn ahead for ``io`` if there is one (unless ``wait`` is
    False and it is not back yet: a cell's first set with :func:`first_set_waits` off), else
    drawn now. When the set is host-only, the next one is started in the helper process at
    once, with the reference run there too unless it uses a device array API (issue 21).

    Returns {"args", "expected" (None: not computed yet), "uses", "reference_ms"}."""
    drawn = _ahead.take_set(io) if wait or _ahead.ready(io) else None
    if drawn is None and not uses_device_arrays(spec.inputs):
        _ahead.warm()  # the next set's helper starts while this one is drawn
    args = checked_inputs(spec, config, drawn.args if drawn is not None else None)
    draw_next(spec, io, args)
    expected = drawn.expected if drawn is not None else None
    return {"args": args, "expected": expected, "uses": 0,
            "reference_ms": drawn.reference_ms if drawn is not None else None}


def draw_first(key: str, job: bytes) -> bool:
    """Worker side of a cell's start: the helper draws the set the cell's first run will take
    (:mod:`.first_set`; ``job`` forwarded unread)."""
    _ahead.start_job(key, job)
    return True


def first_set_is(key: str, spec: KernelSpec) -> bool:
    """Worker side, before the cell's first run: the set drawn at the cell's start (``key``) is
    ``spec``'s problem's. Back already, it is checked and kept now, before the run starts its
    build, which reads the argument types from it (``user_code.any_inputs``); still being
    drawn, the run takes it if it is back by its draw (``draw_inputs``)."""
    io = io_key(spec)
    if not _ahead.rename(key, io, AHEAD_MAX_AGE_S):  # an older one: a cell that never ran
        return False
    if _ahead.ready(io) and io not in _last_inputs:
        drawn = _ahead.take_set(io)
        if drawn is not None:
            args = checked_inputs(spec, Config({}), drawn.args)
            _last_inputs.clear()
            _last_inputs[io] = {"args": args, "expected": drawn.expected, "uses": 0,
                                "reference_ms": drawn.reference_ms}
            draw_next(spec, io, args)
    return True


def draw_next(spec: KernelSpec, io: str, args: dict[str, Any]) -> None:
    """Start the helper on the next set for ``io`` when ``args`` is host-only, with the
    reference run there too unless it uses a device array API (issue 21)."""
    if host_only(args):
        _ahead.start(io, spec.inputs, helper_reference(spec.reference, spec.options.verify),
                     spec.outputs)


def current_set(spec: KernelSpec, config: Config, io: str, reused: bool) -> dict[str, Any]:
    """The input set this variant is checked on, with its reference outputs.

    A set serves REDRAW_EVERY new variants; then the set drawn ahead is taken, unless the helper
    is still drawing it (or running a slow reference on it): the current set then serves on, up
    to 4x as long, so no config waits for the helper.
    """
    current = _last_inputs.get(io)
    stale = current is not None and not reused and current["uses"] >= REDRAW_EVERY
    if stale and _ahead.waiting(io) and current["uses"] < 4 * REDRAW_EVERY:
        stale = False
    if current is None or stale:
        phases.enter(phases.inputs(spec.inputs))
        current = draw_inputs(spec, config, io, wait=current is not None or first_set_waits())
        _last_inputs.clear()
        _last_inputs[io] = current
    return current


def takes_config(reference: Any) -> bool:
    """Whether the reference names a ``config`` parameter: outputs whose layout depends on the
    config (partial sums per block, a chunked scan) need it; ``**kwargs`` alone does not ask."""
    try:
        params = inspect.signature(reference).parameters
    except (TypeError, ValueError):
        return False
    p = params.get("config")
    return p is not None and p.kind is not inspect.Parameter.VAR_KEYWORD


def ensure_expected(spec: KernelSpec, current: dict[str, Any],
                    config: Config | None = None) -> None:
    """Run the reference in the worker when the helper did not (the first set, a device array
    reference, a set drawn in place), once per set, or once per config for a reference that
    takes the config; upload it for on-device comparison."""
    per_config = (config is not None and spec.reference is not None
                  and takes_config(spec.reference))
    if per_config and current.get("config") != config:
        current["expected"] = None  # the helper ran it without the config
        current.pop("on_device", None)
    if current["expected"] is None and spec.reference is not None and spec.options.verify:
        phases.enter(phases.reference(spec.reference, current["args"]))
        current["config"] = config
        current["expected"] = _expected(spec, current["args"], config if per_config else None)
    if "on_device" not in current:
        current["on_device"] = (DeviceReference(current["expected"])
                                if current["expected"] is not None else None)


class SetBesideBuild:
    """A new variant's input set and its reference, made while the variant's build runs beside.

    A run starts the variant's static report first, in its thread, and for every built-in
    backend that is the very build the run loads (nvcc's cubin, Triton's compile for the
    target, the Pallas lowering), so the run's compile only waits for it. Drawn after that
    wait, the inputs and the reference ran serially behind the build: on the H200 a CUDA C++
    cell's first result waited 1.6-1.9 s for nvcc, then 0.75-1.6 s for a torch reference
    (bench/results/first_minute/2026-12-04-1612). Made first, they overlap the build.

    What they raise is held, and :meth:`raise_held` raises it where it was raised before: a
    compile error is still reported first, an inputs error before the binding, a reference
    error after it (a missing argument names the kernel's parameter first). Neither function
    is called a second time for it. A sticky device fault (``is_fatal``) is :attr:`fatal`: the
    run compiles nothing in the broken context and raises it first, and the worker restarts.
    """

    def __init__(self, spec: KernelSpec, config: Config, io: str,
                 tick: Callable[[str], None],
                 is_fatal: Callable[[BaseException], bool] = lambda exc: False) -> None:
        self.failed: tuple[str, Exception] | None = None
        try:
            current = current_set(spec, config, io, reused=False)
        except Exception as exc:  # noqa: BLE001 - raised again after the compile
            self.failed = ("inputs", exc)
        tick("inputs")
        if self.failed is None:
            try:
                ensure_expected(spec, current, config)
            except Exception as exc:  # noqa: BLE001 - raised again after the binding
                self.failed = ("reference", exc)
            tick("reference")
        self.fatal = self.failed is not None and is_fatal(self.failed[1])

    def raise_held(self, stage: str) -> None:
        """Raise what ``stage`` ("inputs", "reference") raised, if it did; a fatal fault at the
        first call, whichever stage raised it."""
        if self.failed is not None and (self.failed[0] == stage or self.fatal):
            raise self.failed[1]


def prepare_inputs(spec: KernelSpec) -> dict[str, float]:
    """Worker-side, before a sweep's first config: draw the input set and run the reference on
    it, in a request of its own (its own time limit), so no config's timeout pays for them.

    The set is drawn now, never the set a run kept: the sweep compares its shapes with the
    stored rows' (seen_inputs), and an inputs function may read what its code does not show (a
    file, the environment) and draw another size now (issue 34). Its reference is the costly
    half (a NumPy 4096^3 product: 0.4-0.5 s of fla's matmul sweep's 1.1 s wait before its first
    run on an H100 host, "drawn now" in aad7023:bench/results/first_minute/2026-12-06-0903,
    where a set holding None was never drawn ahead); so where the helper drew a set for this
    very cell (``io_key``) at most ``AHEAD_MAX_AGE_S`` ago, with the reference run on it, and
    that set has the shapes, dtypes and scalars of the one drawn now (what the store keys
    results by), the sweep starts on the helper's set and its reference outputs instead; a set
    of another size is left, and the one drawn now is used as before.

    The inputs function is called first and the helper's set taken after it: the helper,
    drawing since the cell's run, has had the draw's time to finish, so the two waits overlap.

    Returns the phase times in ms ({"inputs": ..., "reference": ...}; "inputs" includes any
    wait for the helper) and "drawn ahead" (1.0 when the helper's set served, else 0.0).
    """
    t0 = time.perf_counter()
    io = io_key(spec)
    _last_inputs.clear()
    if not uses_device_arrays(spec.inputs):
        _ahead.warm()  # no helper yet (a worker restarted): it starts while the set is drawn
    now = checked_inputs(spec, Config({}))  # what the inputs function returns now
    ahead = _ahead.take_recent(io, AHEAD_MAX_AGE_S)
    _ahead.drop()
    served = ahead is not None and ahead.expected is not None \
        and inputs_signature(ahead.args) == inputs_signature(now)
    if served:
        assert ahead is not None  # for the type checker
        current = {"args": checked_inputs(spec, Config({}), ahead.args),
                   "expected": ahead.expected, "uses": 0, "reference_ms": ahead.reference_ms}
    else:
        current = {"args": now, "expected": None, "uses": 0, "reference_ms": None}
    draw_next(spec, io, current["args"])
    _last_inputs[io] = current
    t1 = time.perf_counter()
    ensure_expected(spec, current)
    return {"inputs": (t1 - t0) * 1e3, "reference": (time.perf_counter() - t1) * 1e3,
            "drawn ahead": float(served)}


def seen_inputs(spec: KernelSpec) -> str | None:
    """The shapes, dtypes and scalars of the input set kept for ``spec`` (None: none drawn)."""
    current = _last_inputs.get(io_key(spec))
    return None if current is None else inputs_signature(current["args"])


def _expected(spec: KernelSpec, host_args: dict[str, Any],
              config: Config | None = None) -> dict[str, Any] | None:
    """The reference's outputs for these inputs (computed on a copy: kernels write in place);
    a reference that takes ``config`` gets the config's values as the kernel sees them."""
    if spec.reference is None or not spec.options.verify:
        return None
    originals = copy.deepcopy(host_args)
    if config is not None:
        originals["config"] = spec.space.py_env(config)
    return reference_outputs(call_user("reference", spec.reference, **originals), spec.outputs,
                             name_of(spec.reference))
