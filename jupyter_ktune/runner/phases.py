"""What the worker is doing right now, told to the client so a timeout blames the right phase.

Issue 15 item 8: a Pallas cell whose NumPy reference took the whole minute was reported as "no
answer within 60 s; the worker was killed", as if the kernel had hung. A variant's life in the
worker has phases (starting the device, drawing the inputs, binding them, computing the
reference, compiling, the kernel's runs) and each one now gets its own time limit, ``--timeout``
seconds, counted from the moment it starts. The worker sends a :class:`Phase` message under the
request's id as each one starts (:func:`enter`); the client restarts its deadline on each and,
when a deadline passes, kills the worker with :meth:`Phase.overdue` as the reason: which phase,
on what, and what to do.

The worker installs the sender with :func:`reporting`; without one (a variant run in-process, by
tests or scripts) :func:`enter` does nothing.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from jupyter_ktune.tunable_values import value_text

RAISE = "or raise --timeout (the limit of each phase, in seconds)"


@dataclass(frozen=True)
class Phase:
    """One phase of a request: ``name`` for code, ``what`` and ``detail`` for people.

    ``advice`` is what to do when the phase runs out of time.
    """

    name: str
    what: str
    detail: str
    advice: str

    def overdue(self, seconds: float) -> str:
        """The reason shown when this phase ran past its limit."""
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.what} took more than {seconds:g} s{detail}: {self.advice}"


_local = threading.local()  # the sender is the request thread's: the static-report pool is silent


@contextlib.contextmanager
def reporting(send: Callable[[Phase], None]) -> Iterator[None]:
    """Send every phase entered in this thread through ``send`` while the block runs."""
    _local.send = send
    try:
        yield
    finally:
        _local.send = None


def enter(phase: Phase) -> None:
    """Tell the client that ``phase`` starts now (its deadline starts now, too)."""
    send = getattr(_local, "send", None)
    if send is not None:
        send(phase)


# --- the phases of a variant ----------------------------------------------------------------------

def device(backend: str) -> Phase:
    """Starting the backend in a fresh worker (imports, device context)."""
    return Phase("device", "starting the device", f"{backend}: import and device context",
                 f"the first request of a fresh worker loads the backend; {RAISE}")


def compiling(backend: str, config: Mapping[str, Any]) -> Phase:
    """Compiling and loading one variant."""
    shown = ", ".join(f"{k}={value_text(v)}" for k, v in config.items())
    return Phase("compile", "compiling the variant", f"{backend}, {shown}" if shown else backend,
                 "a heavily unrolled or very large variant can compile for minutes: narrow the "
                 f"space (smaller tiles, fewer unroll steps), {RAISE}")


def static_report() -> Phase:
    """Waiting for the offline compiler of the static report."""
    return Phase("compile", "the static report", "nvcc / ptxas / the AOT compiler",
                 f"the offline compiler was slow; {RAISE}")


def inputs(fn: Any) -> Phase:
    """Drawing a fresh input set with the cell's inputs function."""
    name = getattr(fn, "__name__", "inputs")
    return Phase("inputs", "the inputs function", f"{name}()",
                 "make smaller inputs, draw them with a faster generator (np.random.default_rng()"
                 f".random(shape, dtype=np.float32)) or on the device, {RAISE}")


def bind(args: Mapping[str, Any]) -> Phase:
    """Binding an input set to the variant (copies to the device)."""
    return Phase("bind", "binding the inputs", f"copying {_megabytes(args)} to the device; "
                 "Pallas compiles for their shapes here",
                 f"use smaller inputs, {RAISE}")


def reference(fn: Any, args: Mapping[str, Any]) -> Phase:
    """Computing the expected outputs with the cell's reference."""
    name = getattr(fn, "__name__", "reference")
    return Phase("reference", "the reference", f"{name} on {_arrays(args)}",
                 "compute it on the device (CuPy/JAX/torch), use smaller inputs, "
                 f"{RAISE}")


def run(which: str) -> Phase:
    """The kernel's own runs: ``which`` says the verification run or the timed runs."""
    return Phase("run", "the kernel run", which,
                 "the kernel may never finish (a loop bound that is never reached, a barrier "
                 "some threads skip, a spin on a flag) or be this slow on these inputs: check "
                 f"its loops and barriers, try smaller inputs, {RAISE}")


def _array_values(args: Mapping[str, Any]) -> list[Any]:
    return [v for v in args.values() if hasattr(v, "shape") and hasattr(v, "dtype")]


def _arrays(args: Mapping[str, Any]) -> str:
    """'NumPy arrays, the largest (4, 4096, 32, 64) float32': what the reference works on."""
    arrays = _array_values(args)
    if not arrays:
        return "no arrays"
    libs = sorted({_library(v) for v in arrays})
    big = max(arrays, key=lambda v: int(np.prod(v.shape)))
    dtype = str(big.dtype).removeprefix("torch.")
    return f"{'/'.join(libs)} arrays, the largest {tuple(big.shape)} {dtype}"


def _library(value: Any) -> str:
    root = type(value).__module__.partition(".")[0]
    return {"numpy": "NumPy", "torch": "torch", "cupy": "CuPy", "jax": "JAX",
            "jaxlib": "JAX"}.get(root, root)


def _megabytes(args: Mapping[str, Any]) -> str:
    total = sum(int(np.prod(v.shape)) * _itemsize(v) for v in _array_values(args))
    return f"{total / 1e6:.1f} MB"


def _itemsize(value: Any) -> int:
    size = getattr(value, "itemsize", None)
    if size is None and hasattr(value, "element_size"):
        size = value.element_size()
    return int(size or 1)


def split_phase(total_ms: float, stages_ms: dict[str, float]) -> dict[str, float]:
    """The worker's "time" phase as the timing protocol's stages (``time: warm-up`` ...), the
    rest (clock reads, the provenance) as ``time: other``; they sum to ``total_ms``."""
    out = {f"time: {k}": v for k, v in stages_ms.items()}
    out["time: other"] = max(total_ms - sum(stages_ms.values()), 0.0)
    return out
