"""HTML and text rendering of results: self-contained markup, no CSS or JS from anywhere else.

Kept apart from the result types so those stay plain data that cross process boundaries.
:mod:`jupyter_ktune.results` imports this module to draw itself, so the results taken here are
annotated ``Any`` (a ``RunResult``, a ``Timing``): importing their types back, even for the type
checker only, made the two modules a circle.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from jupyter_ktune.status import Status
from jupyter_ktune.tunable_values import value_text

_BADGE = {
    Status.OK: ("#1a7f37", "correct"),
    Status.WRONG: ("#cf222e", "wrong result"),
    Status.COMPILE_ERROR: ("#cf222e", "compile error"),
    Status.OUT_OF_RESOURCES: ("#9a6700", "out of resources"),
    Status.RUNTIME_ERROR: ("#cf222e", "runtime error"),
    Status.CRASHED: ("#cf222e", "worker crashed"),
    Status.TIMEOUT: ("#cf222e", "timed out"),
    Status.WRONG_ARCH: ("#cf222e", "wrong architecture"),
    Status.CANNOT_RUN: ("#57606a", "cannot run here"),
    Status.NOT_ALLOWED: ("#57606a", "not allowed"),
}


def fmt_time(ms: float) -> str:
    """Format a duration given in ms with a unit that keeps 3-4 significant digits."""
    if ms >= 1000:
        return f"{ms / 1000:.3f} s"
    if ms >= 1:
        return f"{ms:.3f} ms"
    if ms >= 1e-3:
        return f"{ms * 1e3:.2f} µs"
    return f"{ms * 1e6:.0f} ns"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 block``, ``4 blocks``, ``1,200 elements``: a count with its noun in the right number.

    Examples
    --------
    >>> counted(1, "block"), counted(3, "run"), counted(2, "match", "matches")
    ('1 block', '3 runs', '2 matches')
    """
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


#: IQR over median, or the 95% CI's width over median, beyond which a figure is called noisy
NOISY = 0.25


def noise_note(t: Any) -> str:
    """Say why a timing is noisy (wide spread or a wide CI of the median), or "" if it is not."""
    med = t.median_ms
    if not med or med <= 0:
        return ""
    lo, hi = t.median_ci_ms()
    iqr, ci = t.iqr_ms / med, (hi - lo) / med
    if iqr <= NOISY and ci <= NOISY:
        return ""
    return (f"noisy: the IQR is {iqr:.0%} of the median and the 95% CI spans {ci:.0%} of it; "
            "compare variants with care, or time longer (--budget-ms)")


def _row(label: str, value: str) -> str:
    return (f"<tr><th style='text-align:left;padding:1px 10px 1px 0;font-weight:600'>"
            f"{escape(label)}</th><td style='padding:1px 0'>{value}</td></tr>")


def _floor_rows(t: Any) -> list[str]:
    """The event floor and what of it was subtracted: the floor less the empty kernel's own run,
    the figure the method names (never the floor itself, issue 35)."""
    if t.event_floor_ms is None:
        return []
    overhead = t.event_overhead_ms
    if overhead is None:
        return [_row("Event floor", f"{fmt_time(t.event_floor_ms)}: an empty kernel timed the "
                     "same way (not subtracted)")]
    own = t.event_floor_ms - overhead
    own_text = (f" less the empty kernel's own run, {fmt_time(own)}"
                if own > 0.5e-6 else "")
    return [_row("Event overhead", f"{fmt_time(overhead)} subtracted from every run above: "
                 f"the event floor {fmt_time(t.event_floor_ms)} (an empty kernel timed the same "
                 f"way){own_text}")]


def _timing_rows(r: Any) -> list[str]:
    m = r.measurement
    if m is None:
        return []
    t, p = m.timing, m.provenance
    lo, hi = t.median_ci_ms()
    label = "Host time" if "host time" in t.method else "GPU time"
    rows = [_row(label, f"<b>{fmt_time(t.median_ms)}</b> median &nbsp;·&nbsp; IQR "
                 f"{fmt_time(t.iqr_ms)} &nbsp;·&nbsp; 95% CI of median [{fmt_time(lo)}, "
                 f"{fmt_time(hi)}] &nbsp;·&nbsp; min {fmt_time(t.min_ms)} &nbsp;·&nbsp; n = {t.n}")]
    note = noise_note(t)
    if note:
        rows.append(_row("Spread", f"<span style='color:#9a6700'>{escape(note)}</span>"))
    if label == "Host time":  # an interpreter on the host: no GPU rates, events or clocks
        rows.append(_row("Rates", "not shown: host time of an interpreter is not GPU time"))
        rows.append(_row("Method", escape(t.method)))
        return rows
    rates = []
    if m.gbps is not None:
        rates.append(f"{m.gbps:,.1f} GB/s")
    if m.tflops is not None:
        rates.append(f"{m.tflops:,.2f} TFLOP/s")
    if rates:
        rows.append(_row("Achieved", " &nbsp;·&nbsp; ".join(rates) + " (at the median time)"))
    if t.event_median_ms is not None:
        rows.append(_row("Raw events", f"{fmt_time(t.event_median_ms)} median of the same runs "
                         "by events alone (includes the stream front end's work)"))
    rows += _floor_rows(t)
    if t.graph_ms is not None:
        rows.append(_row("CUDA graph", f"{fmt_time(t.graph_ms)} per launch over "
                         f"{t.graph_launches} back-to-back launches (warm L2, no launch gaps)"))
    if t.host_launch_us is not None:
        rows.append(_row("Launch call", f"{t.host_launch_us:.1f} µs host time to enqueue "
                         "(host clock, not GPU time)"))
    if p.sm_clock_mhz:
        rows.append(_row("SM clock", f"{p.sm_clock_mhz[0]} → {p.sm_clock_mhz[1]} MHz "
                         f"(max {p.sm_clock_max_mhz}) via NVML, before → after timing"))
    else:
        rows.append(_row("SM clock", "not read (NVML is not available here)"))
    rows.append(_row("Method", escape(t.method)))
    return rows


def _diagnostics_html(r: Any) -> str:
    if not r.diagnostics:
        return ""
    items = "".join(
        f"<li><code>{'cell line ' + str(d.line) if d.line else 'outside the cell'}</code> "
        f"<b>{escape(d.severity)}</b>: {escape(d.message)}</li>" for d in r.diagnostics[:20])
    return f"<ul style='margin:4px 0 4px 18px;padding:0'>{items}</ul>"


def run_result_html(r: Any) -> str:
    """One card: status badge, timing with spread, rates, verification, static report."""
    colour, label = _BADGE[r.status]
    if r.status is Status.OK and r.verification is None:
        colour, label = "#57606a", "not verified"
    cfg = " ".join(f"{k}={value_text(v)}" for k, v in r.config.items()) or "(no parameters)"
    head = (f"<div style='display:flex;gap:8px;align-items:center;margin-bottom:4px'>"
            f"<span style='background:{colour};color:white;border-radius:10px;padding:1px 9px;"
            f"font-size:12px'>{escape(label)}</span><b>{escape(r.name)}</b>"
            f"<code>{escape(cfg)}</code><span style='color:#57606a'>{escape(r.backend)} · "
            f"{escape(r.device or 'no device')}</span></div>")
    rows: list[str] = []
    if r.reason:
        rows.append(_row("Result", f"<span style='white-space:pre-wrap'>{escape(r.reason)}</span>"
                         + _diagnostics_html(r)))
    rows += _timing_rows(r)
    if r.launch:
        rows.append(_row("Launch", escape(", ".join(f"{k} {v}" for k, v in r.launch.items()))))
    if r.phases_ms:
        rows.append(_row("Where the time went", escape(phases_text(r.phases_ms))))
    static = ""
    if r.static is not None and hasattr(r.static, "_repr_html_"):
        static = ("<details open><summary style='cursor:pointer'>Static report</summary>"
                  f"{r.static._repr_html_()}</details>")
    elif getattr(r, "static_pending", False):
        static = ("<div style='color:#57606a'>Static report: compiling for the target "
                  "architecture or reading its SASS; it appears here when ready.</div>")
    prov = ""
    if r.measurement is not None:
        p = r.measurement.provenance
        items = {"device": p.device, "compute capability": p.compute_capability,
                 "driver": p.driver, "source hash": p.source_hash, "host": p.host,
                 **{f"{k}": v for k, v in p.toolchain.items()}}
        prov = ("<details><summary style='cursor:pointer'>Provenance</summary><table>"
                + "".join(_row(k, escape(str(v))) for k, v in items.items() if v)
                + "</table></details>")
    return (f"<div class='ktune-result' style='font-family:var(--jp-ui-font-family,sans-serif);"
            f"font-size:13px;border:1px solid #d0d7de;border-radius:6px;padding:8px 10px'>{head}"
            f"<table style='border-collapse:collapse'>{''.join(rows)}</table>{static}{prov}</div>")


def phases_text(phases_ms: Mapping[str, float]) -> str:
    """Host wall time per phase of a request, largest first, e.g. 'worker start 0.42 s ·
    compile 1.31 s · ...': a first result names its cold costs (the worker's start, the
    backend's imports, the compile) instead of hiding them in one wait (issue 33)."""
    shown = sorted(((k, v) for k, v in phases_ms.items() if v >= 0.5), key=lambda kv: -kv[1])
    total = sum(phases_ms.values())
    parts = [f"{k} {fmt_time(v)}" for k, v in shown]
    return f"{fmt_time(total)} in all: " + " · ".join(parts)


def run_result_text(r: Any) -> str:
    """Plain-text one-liner for terminals and ``repr``."""
    cfg = " ".join(f"{k}={value_text(v)}" for k, v in r.config.items())
    parts = [f"{r.name} [{cfg}] {r.status.value}"]
    if r.measurement is not None:
        t = r.measurement.timing
        parts.append(f"{fmt_time(t.median_ms)} median (IQR {fmt_time(t.iqr_ms)}, n={t.n})")
    if r.reason:
        parts.append(r.reason.splitlines()[0])
    return " · ".join(parts)


def error_html(message: Any) -> str:
    """Render a cell error as HTML, shown in place of a traceback."""
    return (f"<div style='color:#cf222e;font-family:monospace;white-space:pre-wrap'>"
            f"{escape(str(message))}</div>")
