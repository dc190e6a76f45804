"""The Mosaic GPU on-device profiler (Pallas ``plgpu.kernel``), parsed into the Breakdown schema.

A Pallas cell marks scopes with ``jax.named_scope("load")`` inside the kernel body; a profile
build passes ``plgpu.CompilerParams(profile_space=N, profile_dir=DIR)``. The dump is written by
a host callback as ``DIR/<name>-<time>-trace.json``, and only for the *first* call of a
compilation (the file name is fixed at lowering time), so every profile gets a fresh directory.

The trace's ``ts`` is ``(globaltimer_lo + cycles) / 1e3``: nanoseconds of the warpgroup's first
event *plus cycles* counted from it (Mosaic's own viewer reads them as ns, i.e. 1 GHz). Here the
first ``B`` of each trace is its anchor, later offsets are cycles, and cycles become ns with the
measured clock. ``pid`` is 1 + SM id; ``tid`` is 1 + warpgroup + warpgroups_per_block * block.

Profiling a Pallas cell (:func:`profile_pallas`) needs no change to the cell: while the cell is
executed, its callable built and traced, :func:`profiling_params` temporarily wraps
``plgpu.kernel`` (and ``pl.pallas_call`` where it lowers to Mosaic GPU) so that each call gets
``profile_space``/``profile_dir`` merged into whatever ``plgpu.CompilerParams`` the cell passed.
The wrap is the public entry points, not Pallas' lowering internals, because those moved between
jax 0.10 and 0.11 while ``plgpu.kernel(..., compiler_params=...)`` is the same on both.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from jupyter_ktune.backends.pallas.cell import (
    Target,
    cell_failure,
    cell_lowerings,
    cell_module_name,
    choose_lowering,
    failure_at,
    load_cell,
    parse_cell_source,
)
from jupyter_ktune.backends.pallas.launch import PallasVariant
from jupyter_ktune.errors import CannotRun
from jupyter_ktune.measure.breakdown import Breakdown, Event, pair_edges
from jupyter_ktune.measure.clocks import read_clocks
from jupyter_ktune.measure.profile_folder import profile_folder

# Ranges (named-scope executions) per warpgroup that fit in the profiler's SMEM buffer: 4 u32
# per range, so 128 ranges cost 2 KiB of shared memory per warpgroup. A cell that sets its own
# profile_space keeps it. Events past the end are dropped where jax has profile_bounds_check.
PROFILE_SPACE = 128


def parse_mosaic_trace(data: dict[str, Any] | str | os.PathLike[str], sm_mhz: float | None,
                       kernel: str = "", warpgroups_per_block: int = 1,
                       clock_source: str = "NVML", unit_kind: str = "warpgroup") -> Breakdown:
    """Parse a Mosaic GPU profiler trace (a path or the loaded JSON) into a Breakdown.

    ``warpgroups_per_block`` is the number of traced units per block (warps when the kernel was
    built with ``profile_trace_scope=WARP``, then ``unit_kind="warp"``).
    """
    t0 = time.perf_counter()
    size = 0
    if not isinstance(data, dict):
        size = os.path.getsize(data)
        kernel = kernel or Path(data).name.split("-")[0]
        data = json.loads(Path(data).read_text())
    if sm_mhz is None or sm_mhz <= 0:
        raise ValueError("[ktune] no measured SM clock: Mosaic's cycles cannot be converted "
                         "(its trace adds cycles to ns, i.e. assumes 1 GHz; we don't)")
    per_tid: dict[int, list[dict[str, Any]]] = {}
    for e in data.get("traceEvents", []):
        if e.get("ph") in ("B", "E"):
            per_tid.setdefault(int(e["tid"]), []).append(e)
    anchors = {t: float(es[0]["ts"]) * 1e3 for t, es in per_tid.items()}
    a_min = min(anchors.values(), default=0.0)
    ns_per_cycle = 1e3 / sm_mhz
    events, unpaired = [], 0
    names: dict[str, int] = {}
    wg = max(1, warpgroups_per_block)
    block_anchor: dict[int, float] = {}
    for tid in sorted(per_tid):
        block = (tid - 1) // wg
        block_anchor.setdefault(block, anchors[tid])
    for tid, es in per_tid.items():
        block, unit = (tid - 1) // wg, (tid - 1) % wg
        # this trace's anchor relative to its block's first trace, in cycles (32 ns grid)
        shift = round((anchors[tid] - block_anchor[block]) * sm_mhz / 1e3)
        edges = [(names.setdefault(e["name"], len(names)), e["ph"] == "E",
                  shift + round(float(e["ts"]) * 1e3 - anchors[tid])) for e in es]
        pairs, left = pair_edges(edges)
        unpaired += left
        inv = {v: k for k, v in names.items()}
        base_ns = block_anchor[block] - a_min
        for tag, s, e in pairs:
            events.append(Event(inv[tag], unit, int(es[0]["pid"]) - 1, block, s, e,
                                base_ns + s * ns_per_cycle, base_ns + e * ns_per_cycle))
    notes = ["Mosaic GPU profiler: one record per warpgroup scope edge, per-event overhead "
             "already subtracted by Mosaic"]
    if unpaired:
        notes.append(f"{unpaired} scope edges had no partner")
    return Breakdown.from_events(events, kernel=kernel, source="Mosaic GPU",
                                 unit_kind=unit_kind, sm_clock_mhz=float(sm_mhz),
                                 clock_source=clock_source, notes=tuple(notes), trace_bytes=size,
                                 parse_ms=(time.perf_counter() - t0) * 1e3)


def newest_trace(folder: str | os.PathLike[str]) -> Path:
    """The trace file a profiled call wrote into ``folder`` (after ``jax.effects_barrier()``)."""
    files = sorted(Path(folder).glob("*-trace.json"), key=lambda p: p.stat().st_mtime)
    if not files:
        raise RuntimeError(f"[ktune] the Mosaic GPU profiler wrote nothing into {folder}: does "
                           "the kernel use jax.named_scope and plgpu.kernel with profile_space?")
    return files[-1]


# -- profiling a Pallas cell ---------------------------------------------------------------------


def mosaic_lowering(target: Target, spec: Any) -> str:
    """Return the cell's Pallas lowering here; raise CannotRun unless it is Mosaic GPU.

    Only Mosaic GPU has an on-device scope profiler; the reason names what would be needed, on
    one line (the notebook shows a worker error's first line).
    """
    wanted = cell_lowerings(spec, parse_cell_source(spec))
    lowering = choose_lowering(wanted, target)  # CannotRun when the device offers none of them
    why = unprofilable_reason(lowering, wanted, target.name)
    if why:
        raise CannotRun(why)
    return lowering


def unprofilable_reason(lowering: str, wanted: Sequence[str], device: str) -> str | None:
    """Why the chosen lowering has no scope breakdown (None for Mosaic GPU)."""
    if lowering == "mosaic_gpu":
        return None
    head = "[ktune] no cycle breakdown for this Pallas cell: "
    if lowering == "interpret":
        return (head + "the Mosaic GPU profiler needs an NVIDIA Hopper GPU (compute capability "
                f"9.0+), and this machine ({device}) runs Pallas in interpret mode")
    if lowering == "triton":
        hint = ("" if "mosaic_gpu" in wanted else
                "; write the kernel with plgpu.kernel and LOWERINGS = ['mosaic_gpu'] for scopes")
        return (head + "its Triton lowering has no scope profiler (only Pallas on Mosaic GPU "
                f"has one, on a Hopper GPU; {device} offers no Mosaic GPU here or the cell does "
                f"not ask for it){hint}; the per-line (ncu) view still works")
    return (head + f"the {lowering} lowering has no Mosaic GPU profiler (scopes need Pallas on "
            "Mosaic GPU, an NVIDIA Hopper GPU)")


def profile_params(params: Any, plgpu: Any, profile_dir: str | os.PathLike[str],
                   profile_space: int = PROFILE_SPACE) -> Any:
    """``params`` with the profiler switched on; params of another backend come back unchanged.

    ``None`` becomes ``plgpu.CompilerParams(...)`` (what Mosaic GPU lowering assumes for None).
    A cell's own ``profile_space`` is kept (it knows how many ranges it records); the directory
    is always ours (a fresh one per profile, since only a compilation's first call is dumped).
    Fields are looked up on the dataclass, so a jax without ``profile_bounds_check`` still works.
    """
    cls = plgpu.CompilerParams
    if params is None:
        params = cls()
    elif not isinstance(params, cls):
        return params
    names = {f.name for f in dataclasses.fields(params)}
    changes: dict[str, Any] = {"profile_space": getattr(params, "profile_space", 0)
                               or profile_space, "profile_dir": str(profile_dir)}
    if "profile_bounds_check" in names:  # drop events past the buffer instead of corrupting SMEM
        changes["profile_bounds_check"] = True
    return dataclasses.replace(params, **changes)


@dataclasses.dataclass
class ProfiledCall:
    """One kernel call that got the profiler: the API and its traced units per block."""

    api: str
    units_per_block: int
    unit_kind: str


def _units(params: Any, plgpu: Any, num_threads: Any) -> tuple[int, str]:
    """Traced units per block: warpgroups (``num_threads``), or 4 warps each at WARP scope."""
    wgs = int(num_threads) if isinstance(num_threads, int) and num_threads > 0 else 1
    scope = getattr(params, "profile_trace_scope", None)
    warp = getattr(getattr(plgpu, "TraceScope", None), "WARP", object())
    return (wgs * 4, "warp") if scope is not None and scope == warp else (wgs, "warpgroup")


def _pallas_call_is_mosaic(params: Any, plgpu: Any, jax_config: Any) -> bool:
    """Whether a ``pl.pallas_call`` with these params lowers to Mosaic GPU (not Triton)."""
    if params is None:
        try:
            return bool(getattr(jax_config, "jax_pallas_use_mosaic_gpu", False))
        except Exception:  # noqa: BLE001 - an unknown flag: the default lowering is not ours
            return False
    return isinstance(params, plgpu.CompilerParams)


@contextlib.contextmanager
def profiling_params(profile_dir: str | os.PathLike[str], plgpu: Any, pl: Any = None,
                     jax_config: Any = None, profile_space: int = PROFILE_SPACE
                     ) -> Iterator[list[ProfiledCall]]:
    """While active, ``plgpu.kernel`` (and Mosaic ``pl.pallas_call``) build profiled kernels.

    Patches the attributes of the ``plgpu``/``pl`` module objects, so code that looks them up
    (``plgpu.kernel(...)``), or imports them by name while this is active, gets the wrap. Only
    calls from this thread are changed: the worker's static-report thread may trace the same
    cell meanwhile and must keep building the plain kernel. Yields the list of calls that were
    profiled; the attributes are restored on exit.
    """
    owner = threading.get_ident()
    calls: list[ProfiledCall] = []
    real_kernel = plgpu.kernel
    real_call = getattr(pl, "pallas_call", None) if pl is not None else None

    def kernel(*args: Any, compiler_params: Any = None, **kwargs: Any) -> Any:
        if threading.get_ident() == owner:
            compiler_params = profile_params(compiler_params, plgpu, profile_dir, profile_space)
            calls.append(ProfiledCall("plgpu.kernel",
                                      *_units(compiler_params, plgpu, kwargs.get("num_threads"))))
        return real_kernel(*args, compiler_params=compiler_params, **kwargs)

    def pallas_call(*args: Any, compiler_params: Any = None, **kwargs: Any) -> Any:
        if threading.get_ident() == owner and _pallas_call_is_mosaic(compiler_params, plgpu,
                                                                     jax_config):
            compiler_params = profile_params(compiler_params, plgpu, profile_dir, profile_space)
            calls.append(ProfiledCall("pl.pallas_call", *_units(compiler_params, plgpu, None)))
        return real_call(*args, compiler_params=compiler_params, **kwargs)  # type: ignore[misc]

    plgpu.kernel = kernel
    if real_call is not None:
        pl.pallas_call = pallas_call
    try:
        yield calls
    finally:
        plgpu.kernel = real_kernel
        if real_call is not None:
            pl.pallas_call = real_call


def profile_pallas(backend: Any, spec: Any, config: Any, host_args: dict[str, Any],
                   lowering: str, profile_space: int = PROFILE_SPACE) -> Breakdown:
    """Trace one call of a Pallas-on-Mosaic-GPU variant with the Mosaic GPU profiler (worker).

    The plain variant is run a few times first so the SM clock has ramped. Then the cell is
    executed again into a new module (the worker's cached one is set aside and put back), its
    callable built, traced and compiled with the profiler on, in a fresh directory; called once
    (only a compilation's first call is dumped), and the trace parsed with the NVML SM clock.
    Executing the cell under the wrap also covers kernels built at import time.
    """
    import jax
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import mosaic_gpu as plgpu

    plain = backend.compile(spec, config).bind(host_args)
    for _ in range(3):
        plain.launch_and_wait()
    with profile_folder("mosaic") as folder:
        key = cell_module_name(spec, lowering)
        cached = sys.modules.pop(key, None)
        try:
            with profiling_params(folder, plgpu, pl, jax.config, profile_space) as calls:
                module = load_cell(spec, lowering)
                path = Path(module.__file__ or "")
                factory = module.__dict__.get(spec.name)
                if not callable(factory):
                    raise failure_at(2, f"the cell defines no function '{spec.name}'")
                try:
                    fn = factory(**spec.space.py_env(config))
                except Exception as exc:  # noqa: BLE001 - the cell's own error, on its line
                    raise cell_failure(exc, path) from None
                bound = PallasVariant(spec, lowering, fn, path).bind(host_args)
            if not calls:
                raise CannotRun("[ktune] no cycle breakdown: the cell's callable made no "
                                "plgpu.kernel (or Mosaic GPU pl.pallas_call) call while traced, "
                                "so nothing was profiled")
            bound.launch_and_wait()
            jax.effects_barrier()
            clk = read_clocks()
            files = list(folder.glob("*-trace.json"))
            first = calls[0]
            bd = parse_mosaic_trace(newest_trace(folder), float(clk.sm_mhz) if clk else None,
                                    spec.name, warpgroups_per_block=first.units_per_block,
                                    clock_source="NVML SM clock read after the traced call",
                                    unit_kind=first.unit_kind)
            notes = ["one call, the first of a fresh profiled compilation (cold L2; the plain "
                     "variant ran 3 times before it, to ramp the clock)"]
            if len(calls) > 1 or len(files) > 1:
                notes.append(f"the callable made {len(calls)} profiled kernel call(s) and "
                             f"{len(files)} trace(s) were written; this is the newest")
            return dataclasses.replace(bd, notes=bd.notes + tuple(notes))
        finally:
            sys.modules.pop(key, None)
            if cached is not None:
                sys.modules[key] = cached
