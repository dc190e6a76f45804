"""A Pallas variant (the cell's callable for one config, jitted and compiled) and its binding.

JAX is imported in the worker only, when a variant is prepared or bound.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from jupyter_ktune.backends.pallas.cell import call_names, cell_failure
from jupyter_ktune.errors import CellError, CompileFailure
from jupyter_ktune.spec import KernelSpec

#: SMs of the GPU that interpret mode stands in for (an H100/H200), for ops that ask.
INTERPRET_SM_COUNT = 132


@contextmanager
def interpret_everywhere(on: bool) -> Iterator[None]:
    """Trace every ``pallas_call`` in interpret mode, also those without an ``interpret=``.

    Published ops call ``pl.pallas_call`` (or their library's wrapper of it) with no
    ``interpret`` argument, so the cell cannot pass ``INTERPRET``. JAX's own switch,
    ``pallas_tpu_interpret_mode_context_manager`` (what ``pltpu.force_tpu_interpret_mode`` and
    ``plgpu.force_gpu_interpret_mode`` set), is read by every ``pallas_call`` at trace time;
    ``True`` selects the HLO interpreter that ``interpret=True`` selects. Thread-local, restored.

    Meanwhile a CPU device answers ``core_count`` with the SM count of the GPU the cell is
    written for (:data:`INTERPRET_SM_COUNT`, an H100/H200), as GPU ops read it to shape their
    grids (tokamax: ``jax.devices()[0].core_count``); without it they raise a bare
    ``AttributeError()``.
    """
    if not on:
        yield
        return
    import jax
    from jax._src import config

    state = config.pallas_tpu_interpret_mode_context_manager
    previous = state.swap_local(True)
    device_type = type(jax.devices()[0])
    lent = not hasattr(jax.devices()[0], "core_count")
    if lent:
        device_type.core_count = property(lambda _: INTERPRET_SM_COUNT)
    try:
        yield
    finally:
        state.set_local(previous)
        if lent:
            del device_type.core_count


class PallasVariant:
    """The cell's callable for one config, jitted, and (when inputs are known) compiled."""

    def __init__(self, spec: KernelSpec, lowering: str, fn: Callable[..., Any], path: Path):
        self.spec, self.lowering, self.fn, self.path = spec, lowering, fn, path
        self._jitted: dict[tuple, Any] = {}
        self.compiled: dict[tuple, Any] = {}  # (names, kinds, shapes) -> jax Compiled
        self.lowered: Any = None

    def prepare(self, host_args: Mapping[str, Any]) -> tuple[Any, Any, tuple[str, ...]]:
        """Return the compiled executable, the jitted function and the array inputs' names."""
        import jax

        names, by_name = call_names(self.fn, host_args, self.spec.outputs)
        arrays = tuple(n for n in names if isinstance(host_args[n], np.ndarray))
        statics = {n: host_args[n] for n in names if n not in arrays}
        key = (names, by_name, tuple(sorted((k, repr(v)) for k, v in statics.items())))
        if key not in self._jitted:
            fn = self.fn

            def call(*xs: Any) -> Any:
                if by_name:
                    return fn(**dict(zip(arrays, xs, strict=True)), **statics)
                return fn(*xs)

            self._jitted[key] = jax.jit(call)
        jitted = self._jitted[key]
        shapes = tuple((host_args[n].shape, host_args[n].dtype.str) for n in arrays)
        ckey = (key, shapes)
        if ckey not in self.compiled:
            avals = [jax.ShapeDtypeStruct(host_args[n].shape, host_args[n].dtype) for n in arrays]
            try:
                with interpret_everywhere(self.lowering == "interpret"):
                    self.lowered = jitted.lower(*avals)
                self.compiled[ckey] = self.lowered.compile()
            except CellError:
                raise
            except Exception as exc:  # noqa: BLE001 - tracing/lowering errors -> cell line
                raise cell_failure(exc, self.path) from None
        return self.compiled[ckey], jitted, arrays

    def bind(self, host_args: Mapping[str, Any]) -> PallasBound:
        """Put the input arrays on the device and pick the compiled executable."""
        try:
            compiled, jitted, arrays = self.prepare(host_args)
        except CompileFailure as exc:  # inputs of another shape than at compile time
            raise CellError(str(exc).removeprefix("[ktune] "), line=exc.diagnostics[0].line
                            if exc.diagnostics else None) from None
        return PallasBound(self, compiled, jitted, {n: host_args[n] for n in arrays})


class PallasBound:
    """A compiled variant with its inputs on the device; outputs are what the call returns.

    No guard regions (issue 15 item 5): the outputs are fresh buffers JAX allocates for each
    call, so there is nothing to put guards around before the run, and a Pallas kernel reaches
    memory only through its refs and block specs, which JAX bounds-checks when it traces them.
    The inputs are read back after the verification run all the same (``read_inputs``): an
    ``input_output_aliases`` kernel may still write them.
    """

    def __init__(self, variant: PallasVariant, compiled: Any, jitted: Any,
                 arrays: Mapping[str, np.ndarray]):
        import jax

        self._jax = jax
        # call: the compiled executable; traceable: the same function, jitted, for timers that
        # build a larger program around it (the L2 flush)
        self.variant, self.call, self.traceable = variant, compiled, jitted
        self.names = tuple(arrays)
        self.args = tuple(jax.device_put(np.asarray(a)) for a in arrays.values())
        self._out: Any = None

    def launch(self) -> None:
        """Dispatch one call (asynchronous, like a kernel launch)."""
        self._out = self.call(*self.args)

    def launch_and_wait(self) -> None:
        """One call, waited for: what a host clock can honestly bracket."""
        self._jax.block_until_ready(self.call(*self.args))

    def poison_outputs(self) -> None:
        """Forget the last outputs, so a result is only ever read from a fresh call.

        JAX outputs are new buffers, not arguments that could be pre-filled. In interpret mode
        Pallas fills them with NaN before the kernel runs, so unwritten blocks show as
        "never written"; on a GPU they start as whatever the allocator hands out.
        """
        self._out = None

    def read_outputs(self) -> dict[str, np.ndarray]:
        """Map the call's return values to the ``--out`` names, as host arrays."""
        out = self._out
        if out is None:
            raise RuntimeError("[ktune] outputs read before a launch")
        outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        names = self.variant.spec.outputs
        if len(outs) != len(names):
            raise CellError(f"the kernel returned {len(outs)} array(s) but --out names "
                            f"{len(names)} ({', '.join(names) or 'none'})", line=1,
                            fix="Name one --out per returned array, in order.")
        return {n: np.asarray(o) for n, o in zip(names, outs, strict=True)}

    def read_inputs(self, names: Any) -> dict[str, np.ndarray]:
        """Fresh host copies of the bound inputs among ``names`` (never views of the host
        originals: on the CPU ``device_put`` may share their memory)."""
        by_name = dict(zip(self.names, self.args, strict=True))
        return {n: np.array(by_name[n], copy=True) for n in names if n in by_name}

    def launch_info(self) -> dict[str, Any]:
        """Lowering and the input shapes of this binding."""
        shapes = ", ".join(f"{tuple(a.shape)} {a.dtype}" for a in self.args)
        v = self.variant
        return {"lowering": v.lowering, "inputs": shapes, "kernel": v.spec.name}
