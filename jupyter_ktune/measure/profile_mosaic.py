"""The Mosaic GPU on-device profiler (Pallas ``plgpu.kernel``), parsed into the Breakdown schema.

A Pallas cell marks scopes with ``jax.named_scope("load")`` inside the kernel body; a profile
build passes ``plgpu.CompilerParams(profile_space=N, profile_dir=DIR)``. The dump is written by
a host callback as ``DIR/<name>-<time>-trace.json``, and only for the *first* call of a
compilation (the file name is fixed at lowering time), so every profile gets a fresh directory.

The trace's ``ts`` is ``(globaltimer_lo + cycles) / 1e3``: nanoseconds of the warpgroup's first
event *plus cycles* counted from it (Mosaic's own viewer reads them as ns, i.e. 1 GHz). Here the
first ``B`` of each trace is its anchor, later offsets are cycles, and cycles become ns with the
measured clock. ``pid`` is 1 + SM id; ``tid`` is 1 + warpgroup + warpgroups_per_block * block.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from jupyter_ktune.measure.breakdown import Breakdown, Event, pair_edges


def parse_mosaic_trace(data: dict[str, Any] | str | os.PathLike[str], sm_mhz: float | None,
                       kernel: str = "", warpgroups_per_block: int = 1,
                       clock_source: str = "NVML") -> Breakdown:
    """Parse a Mosaic GPU profiler trace (a path or the loaded JSON) into a Breakdown."""
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
                                 unit_kind="warpgroup", sm_clock_mhz=float(sm_mhz),
                                 clock_source=clock_source, notes=tuple(notes), trace_bytes=size,
                                 parse_ms=(time.perf_counter() - t0) * 1e3)


def newest_trace(folder: str | os.PathLike[str]) -> Path:
    """The trace file a profiled call wrote into ``folder`` (after ``jax.effects_barrier()``)."""
    files = sorted(Path(folder).glob("*-trace.json"), key=lambda p: p.stat().st_mtime)
    if not files:
        raise RuntimeError(f"[ktune] the Mosaic GPU profiler wrote nothing into {folder}: does "
                           "the kernel use jax.named_scope and plgpu.kernel with profile_space?")
    return files[-1]
