"""Proton intra-kernel instrumentation of Triton cells, parsed into the Breakdown schema.

A Triton cell marks scopes with ``triton.profiler.language`` (``pl.scope("load")``,
``pl.enter_scope``/``pl.exit_scope``); outside a Proton instrumentation session they compile to
nothing. Profiling runs one launch inside ``proton.start(..., backend="instrumentation",
data="trace")`` with ``pl.enable_semantic("triton")`` and settings chosen after our H200 probe
(``docs: ../shared/research/profiling.md`` section 2.4), where Proton's defaults cost +9.6% GPU
time and wrote a 2 GB trace for 11 launches of a 65 536-CTA grid:

* ``sampling_strategy="selective", sampling_options="0"``: one warp per CTA (+2.4% there);
* ``optimizations="clock32,time_shift"``: 32-bit records, per-record overhead subtracted;
* ``buffer_type="shared"`` with a small ``buffer_size``: a circular buffer per CTA, no multi-GB
  global buffer (``buffer_type=global`` crashed at 4 GiB there);
* one launch per profile, so one trace; grids above ``max_ctas`` are refused with the fix
  rather than traced (Proton 3.6 has no CTA sampling; its trace grows with the grid).

Proton's Chrome trace shows cycles as if the clock ran at 1 GHz ("Frequency (MHz)": 1000); the
parser takes the cycles back out (``dur`` * frequency) and converts them with the measured clock.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from jupyter_ktune.measure.breakdown import Breakdown, Event
from jupyter_ktune.measure.profile_folder import profile_folder

MODE = dict(sampling_strategy="selective", sampling_options="0",
            optimizations="clock32,time_shift", buffer_type="shared")
_CTA = re.compile(r"CTA\s*(\d+)")
_CORE = re.compile(r"Core\s*(\d+)")
_UNIT = re.compile(r"(warp|warpgroup|wg)\D*(\d+)", re.I)


def parse_proton_trace(data: dict[str, Any] | str | os.PathLike[str], sm_mhz: float | None,
                       kernel: str = "", clock_source: str = "NVML") -> Breakdown:
    """Parse a Proton ``.chrome_trace`` (a path or the loaded JSON) into a Breakdown.

    Each complete event (``"ph": "X"``) is one scope of one warp of one CTA; ``ts``/``dur`` are
    microseconds under Proton's 1 GHz assumption, i.e. thousands of cycles. Proton's 3.6 trace
    has no SM id; ``sm`` is then the device ``Core`` index and a note says so.
    """
    t0 = time.perf_counter()
    size = 0
    if not isinstance(data, dict):
        size = os.path.getsize(data)
        data = json.loads(Path(data).read_text())
    if sm_mhz is None or sm_mhz <= 0:
        raise ValueError("[ktune] no measured SM clock: Proton's cycles cannot be converted "
                         "(its viewer assumes 1 GHz; we don't)")
    rows = [e for e in data.get("traceEvents", []) if e.get("ph") == "X"]
    by_cta: dict[int, list[dict[str, Any]]] = {}
    freq = 1000.0
    for e in rows:
        m = _CTA.search(str(e.get("pid", "")))
        by_cta.setdefault(int(m.group(1)) if m else 0, []).append(e)
        freq = float(e.get("args", {}).get("Frequency (MHz)", freq))
    events = []
    ns_per_cycle = 1e3 / sm_mhz
    starts = {c: min(float(e["ts"]) for e in es) for c, es in by_cta.items()}
    t_min = min(starts.values(), default=0.0)
    for cta, es in by_cta.items():
        base = starts[cta]
        for e in es:
            core = _CORE.search(str(e.get("pid", "")))
            unit = _UNIT.search(str(e.get("tid", "")))
            s = round((float(e["ts"]) - base) * freq)
            d = round(float(e["dur"]) * freq)
            # block start on Proton's global-timer axis (ns), then our own cycle conversion
            anchor = (base - t_min) * 1e3
            events.append(Event(str(e.get("name", "?")), int(unit.group(2)) if unit else 0,
                                int(core.group(1)) if core else -1, cta, s, s + d,
                                anchor + s * ns_per_cycle, anchor + (s + d) * ns_per_cycle))
        kernel = kernel or str(es[0].get("cat", ""))
    notes = ("Proton instrumentation, one warp per CTA (selective sampling, clock32, time_shift); "
             "Proton's trace names no SM, so 'sm' is its Core index",)
    return Breakdown.from_events(events, kernel=kernel, source="Proton", unit_kind="warp",
                                 sm_clock_mhz=float(sm_mhz), clock_source=clock_source,
                                 notes=notes, trace_bytes=size,
                                 parse_ms=(time.perf_counter() - t0) * 1e3)


def profile_triton(bound: Any, kernel: str, grid_ctas: int, max_ctas: int = 4096,
                   buffer_size: int = 4096) -> Breakdown:
    """Trace one launch of a bound Triton variant under Proton (worker side, GPU)."""
    import triton.profiler as proton
    import triton.profiler.language as pl

    from jupyter_ktune.measure.clocks import read_clocks

    if grid_ctas > max_ctas:
        raise ValueError(f"[ktune] the grid has {grid_ctas} CTAs; Proton 3.6 traces every CTA, "
                         f"which for more than {max_ctas} makes a trace of hundreds of MB. "
                         "Profile a smaller problem (fewer CTAs), or use the ncu line view.")
    with profile_folder("proton") as folder:
        name = str(folder / "trace")
        pl.enable_semantic("triton")
        mode = proton.mode.Default(**MODE, buffer_size=buffer_size)
        try:
            proton.start(name, data="trace", backend="instrumentation", mode=mode)
            bound.launch()
            bound.read_outputs()
        finally:
            proton.finalize()
            pl.disable_semantic("triton")
        clk = read_clocks()
        files = sorted(folder.glob("*.chrome_trace"))
        if not files:
            raise RuntimeError("[ktune] Proton wrote no trace: does the kernel use pl.scope?")
        return parse_proton_trace(files[0], float(clk.sm_mhz) if clk else None, kernel,
                                  clock_source="NVML SM clock read after the traced launch")
