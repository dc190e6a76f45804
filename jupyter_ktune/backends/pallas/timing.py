"""Timing and static facts for the Pallas backend.

JAX exposes no stream events in Python, so the event-based :class:`DeviceTimer` protocol of
:mod:`jupyter_ktune.measure.timing` cannot bracket a JAX call on the GPU. The timers here offer
``time(bound, plan) -> Timing``, the hook :func:`jupyter_ktune.runner.execute.run_variant` uses
when a timer has it:

* :class:`CuptiTimer` (NVIDIA GPU): CUPTI kernel records through
  ``jax.experimental.mosaic.gpu.profiler.measure``. Each timed call is one jitted program: a read
  of a 256 MiB buffer (the L2 flush, a reduction, so it leaves no dirty lines), an optimization
  barrier, then the cell's call. Per call we sum the durations of the cell's own kernels (the last
  ``k`` records of the iteration, ``k`` counted from an unflushed call) and drop the flush's.
  CUPTI's concurrent-kernel tracing is known to slow long kernels a little (about 10% on a 777 us
  kernel, README "How numbers are measured"); the label says which clock was used.
* :class:`HostTimer` (interpret mode on a CPU, TPU): the host clock around a call that waits for
  its outputs (``block_until_ready``), driven by the shared protocol with no flush and no floor,
  and labelled as host time, never GPU time.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from html import escape
from typing import Any

import numpy as np

from jupyter_ktune.measure.timing import HostClock, TimingPlan, time_kernel, warmup_runs
from jupyter_ktune.results import Timing
from jupyter_ktune.stats import relative_ci_halfwidth


class HostTimer(HostClock):
    """The host clock, for devices whose kernel time cannot be read (interpret mode, TPU)."""

    def __init__(self, name: str):
        super().__init__(name, "no device kernel clock for this device")

    def time(self, bound: Any, plan: TimingPlan) -> Timing:
        """Time ``bound`` with the shared protocol on the host clock, labelled as host time."""
        plan = replace(plan, warm_cache=True, subtract_floor=False, kernel_clock=False)
        t = time_kernel(bound.launch_and_wait, self, plan)
        method = (f"{self.name}: perf_counter around each call and its block_until_ready, no "
                  f"cache flush, {t.warmup_runs} warm-up runs, median of {t.n}")
        return replace(t, method=method, event_floor_ms=None, event_times_ms=None)


def host_timer(name: str) -> HostTimer:
    """Return a host-clock timer whose ``name`` says what the numbers are."""
    return HostTimer(name)


class CuptiTimer:
    """CUPTI kernel times of a jitted JAX call, with a read-only L2 flush before each call."""

    def __init__(self, device_name: str, flush_bytes: int = 256 << 20):
        import jax
        import jax.numpy as jnp
        from jax.experimental.mosaic.gpu import profiler  # CUPTI lives in the Mosaic GPU ext

        self._jax, self._profiler = jax, profiler
        self.name = f"Pallas on {device_name}"
        self.l2_flush_bytes = flush_bytes
        self._buf = jnp.ones(flush_bytes // 4, jnp.int32)
        self._steps: dict[int, Any] = {}
        self._flush_kernels = len(self._per_kernel(jax.jit(jnp.max), self._buf))

    def _per_kernel(self, fn: Any, *args: Any) -> list[tuple[str, float]]:
        _, per_kernel = self._profiler.measure(fn, aggregate=False)(*args)
        if not per_kernel:
            raise RuntimeError("[ktune] CUPTI recorded no kernel for the call")
        return list(per_kernel)

    def _flushed(self, call: Any) -> Any:
        """One program: read the flush buffer, then (after a barrier) the cell's call."""
        if id(call) not in self._steps:
            jax, jnp = self._jax, self._jax.numpy

            def step(buf: Any, *args: Any) -> Any:
                seen = jnp.max(buf)  # reads every byte, writes nothing
                seen, args = jax.lax.optimization_barrier((seen, args))
                return call(*args), seen

            self._steps[id(call)] = (call, jax.jit(step))  # keep call alive: id stays unique
        return self._steps[id(call)][1]

    def _batch(self, fn: Any, args: tuple, n: int, per_call: int) -> list[float]:
        _, iters = self._profiler.measure(fn, aggregate=False, iterations=max(n, 2))(*args)
        if iters is None:
            raise RuntimeError("[ktune] CUPTI recorded no kernels")
        out = []
        for it in iters[:n]:
            if len(it) < per_call:
                raise RuntimeError(f"[ktune] CUPTI saw {len(it)} kernels per call, expected "
                                   f"at least {per_call}")
            out.append(sum(ms for _, ms in it[-per_call:]))
        return out

    def time(self, bound: Any, plan: TimingPlan) -> Timing:
        """Time the bound call by CUPTI kernel records; see the module docstring. A variant in
        interpret mode (a TPU cell checked on a GPU machine) launches no kernel of its own to
        record (CUPTI's measure failed with a bare AssertionError on the H200): the host clock,
        said so."""
        if getattr(getattr(bound, "variant", None), "lowering", "") == "interpret":
            return HostTimer(f"Pallas interpret mode on {self.name.removeprefix('Pallas on ')}, "
                             "host time (not GPU time)").time(bound, plan)
        jax = self._jax
        call, args = bound.call, bound.args
        flush = not plan.warm_cache
        own = self._per_kernel(call, *args)  # also the untimed first call
        names = sorted({n for n, _ in own})
        estimate = max(sum(ms for _, ms in own), 1e-4)
        fn, fargs = (self._flushed(bound.traceable), (self._buf, *args)) if flush else (call, args)
        warmup = warmup_runs(plan, estimate)
        jax.block_until_ready([fn(*fargs) for _ in range(warmup)])
        times: list[float] = []
        batch = int(min(max(plan.budget_ms / estimate / 8, plan.min_runs), 250))
        deadline = time.perf_counter() + plan.budget_ms * 1e-3 * 3
        while True:
            times += self._batch(fn, fargs, min(batch, plan.max_runs - len(times)), len(own))
            if len(times) >= plan.max_runs or (len(times) >= plan.min_runs and (
                    relative_ci_halfwidth(np.asarray(times)) <= plan.rel_precision
                    or sum(times) >= plan.budget_ms or time.perf_counter() > deadline)):
                break
        flush_txt = ("warm L2 (no flush)" if not flush else
                     f"L2 flushed before each call ({self.l2_flush_bytes >> 20} MiB read by a "
                     "jitted reduction in the same program; its kernels excluded)")
        method = (f"CUPTI kernel records via jax.experimental.mosaic.gpu.profiler.measure: sum "
                  f"of the call's {len(own)} kernel(s) ({', '.join(names)}), {flush_txt}, "
                  f"{warmup} warm-up calls, median of {len(times)}")
        return Timing(times_ms=np.asarray(times), method=method, warm_cache=not flush,
                      l2_flush_bytes=self.l2_flush_bytes if flush else 0, warmup_runs=warmup,
                      host_launch_us=_host_call_us(jax, call, args))


def _host_call_us(jax: Any, call: Any, args: tuple, n: int = 20) -> float:
    """Median host time of one dispatch (the call returns before the GPU finishes)."""
    costs, outs = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        outs.append(call(*args))
        costs.append(time.perf_counter() - t0)
    jax.block_until_ready(outs)
    return float(np.median(costs) * 1e6)


def make_gpu_timer(device_name: str) -> Any:
    """CUPTI timer where the Mosaic GPU profiler imports; else a labelled host timer."""
    try:
        return CuptiTimer(device_name)
    except (ImportError, RuntimeError) as exc:
        return HostTimer(f"Pallas on {device_name}, host time around block_until_ready "
                         f"(includes dispatch; CUPTI profiler unavailable: {exc})")


@dataclass(frozen=True)
class PallasStatic:
    """What JAX says about a lowered and compiled Pallas program before it runs."""

    lowering: str
    stablehlo_chars: int
    hlo_chars: int
    custom_calls: tuple[str, ...] = ()
    cost: Mapping[str, float] = field(default_factory=dict, hash=False)
    note: str = ""

    @classmethod
    def from_lowered(cls, lowering: str, lowered: Any, compiled: Any) -> PallasStatic:
        """Read sizes, custom-call targets and XLA's cost analysis (when it has one)."""
        import re

        stablehlo = lowered.as_text()
        try:
            hlo = compiled.as_text() or ""
        except Exception:  # noqa: BLE001 - some backends keep no text
            hlo = ""
        targets = tuple(sorted(set(re.findall(r'custom_call_target="([^"]+)"', hlo)
                                   + re.findall(r"stablehlo.custom_call @(\w+)", stablehlo))))
        cost: dict[str, float] = {}
        try:
            raw = compiled.cost_analysis()
            raw = raw[0] if isinstance(raw, (list, tuple)) and raw else raw
            for key in ("flops", "bytes accessed", "transcendentals"):
                if isinstance(raw, Mapping) and key in raw:
                    cost[key] = float(raw[key])
        except Exception:  # noqa: BLE001 - optional
            pass
        return cls(lowering, len(stablehlo), len(hlo), targets, cost,
                   note="registers and shared memory of the Pallas kernel are chosen inside "
                   "XLA's Triton/Mosaic pipeline and are not exposed to Python")

    def to_dict(self) -> dict:
        """Return a JSON-ready dict."""
        return {"lowering": self.lowering, "stablehlo_chars": self.stablehlo_chars,
                "hlo_chars": self.hlo_chars, "custom_calls": list(self.custom_calls),
                "cost": dict(self.cost), "note": self.note}

    def _repr_html_(self) -> str:
        rows = [("lowering", self.lowering),
                ("StableHLO", f"{self.stablehlo_chars:,} characters"),
                ("compiled HLO", f"{self.hlo_chars:,} characters"),
                ("custom calls", ", ".join(self.custom_calls) or "none"),
                *((f"XLA cost: {k}", f"{v:,.0f}") for k, v in self.cost.items()),
                ("note", self.note)]
        body = "".join(f"<tr><th style='text-align:left;padding-right:10px'>{escape(k)}</th>"
                       f"<td>{escape(v)}</td></tr>" for k, v in rows)
        return f"<table>{body}</table>"
