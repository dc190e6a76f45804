"""The panel's static snapshot: the current result's card and small inline-SVG figures.

A saved notebook keeps what the front end last displayed; without a kernel the widget view has
no model to show. The panel's output therefore also carries this snapshot (plain HTML and SVG,
no JavaScript, a few KB), refreshed whenever the current result changes, so a notebook reopened
without a kernel shows the config the user ended on: card, run-time distribution, every result
and the heatmap. The labextension shows it when the live widget is not there (renderer.ts).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

import numpy as np

from jupyter_ktune.render import counted, fmt_time, run_result_html
from jupyter_ktune.results import RunResult, Status
from jupyter_ktune.ui.axes import label_step
from jupyter_ktune.ui.units import scaled, time_unit

MIME_TYPE = "application/vnd.jupyter-ktune.panel+json"
_W, _H, _PAD = 240, 120, 26
_MAX_POINTS = 300  # the history figure's newest points (the snapshot stays small)


def _frame(title: str, body: str, axis: str) -> str:
    return (f"<figure style='margin:0'><figcaption style='font:12px sans-serif;"
            f"margin-bottom:2px'>{escape(title)}</figcaption>"
            f"<svg xmlns='http://www.w3.org/2000/svg' width='{_W}' height='{_H}' "
            f"viewBox='0 0 {_W} {_H}' style='background:#fff;border:1px solid #d0d7de'>"
            f"{body}<text x='{_W - 4}' y='{_H - 4}' font-size='10' text-anchor='end' "
            f"fill='#57606a'>{escape(axis)}</text></svg></figure>")


def _ticks(lo: float, hi: float) -> str:
    return (f"<text x='2' y='{_H - _PAD + 12}' font-size='10' fill='#57606a'>{lo:.4g}</text>"
            f"<text x='{_W / 2}' y='{_H - _PAD + 12}' font-size='10' fill='#57606a'>"
            f"{hi:.4g}</text>")


def distribution_svg(r: RunResult, unit: tuple[str, float] | None = None) -> str:
    """Histogram of the current variant's run times, in ``unit`` (default: scaled to them)."""
    if r.measurement is None:
        return _frame(f"current variant: {r.status.value}", "", "")
    t = r.measurement.timing
    unit, size = unit or time_unit([float(np.max(t.times_ms))])
    counts, edges = np.histogram(np.asarray(t.times_ms) / size, bins=20)
    top = max(int(counts.max()), 1)
    bw = (_W - 8) / len(counts)
    bars = "".join(
        f"<rect x='{4 + i * bw:.1f}' y='{_H - _PAD - (c / top) * (_H - _PAD - 6):.1f}' "
        f"width='{bw - 1:.1f}' height='{(c / top) * (_H - _PAD - 6):.1f}' fill='#4c72b0'/>"
        for i, c in enumerate(counts) if c)
    return _frame(f"median {fmt_time(t.median_ms)} · IQR {fmt_time(t.iqr_ms)} · n = {t.n}",
                  bars + _ticks(float(edges[0]), float(edges[-1])), unit)


def _medians(results: Sequence[RunResult]) -> list[float]:
    return [r.median_ms if r.status is Status.OK and r.median_ms else float("nan")
            for r in results]


def history_svg(results: Sequence[RunResult], unit: tuple[str, float] | None = None) -> str:
    """Every result's median (newest points), failures drawn at the bottom in red."""
    shown = list(results)[-_MAX_POINTS:]
    ms = _medians(shown)
    unit, size = unit or time_unit(ms)
    vals = scaled(ms, size)
    finite = [v for v in vals if v == v]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
    hi = hi if hi > lo else lo + 1.0
    n = max(len(shown), 1)
    dots = []
    for i, v in enumerate(vals):
        x = 4 + (i + 0.5) * (_W - 8) / n
        if v == v:
            y = _H - _PAD - (v - lo) / (hi - lo) * (_H - _PAD - 8)
            dots.append(f"<circle cx='{x:.1f}' cy='{y:.1f}' r='2.5' fill='#1a7f37'/>")
        else:
            dots.append(f"<circle cx='{x:.1f}' cy='{_H - _PAD:.1f}' r='2.5' fill='#cf222e'/>")
    title = f"{counted(len(results), 'result')} · best {fmt_time(lo * size)}" if finite else \
        counted(len(results), "result")
    return _frame(title, "".join(dots) + _ticks(lo, hi), f"median ({unit})")


def heatmap_svg(source_data: dict[str, list[Any]], xs: Sequence[str], ys: Sequence[str],
                axes: tuple[str, str]) -> str:
    """Draw the heatmap's cells as live (best per cell), greyed when nothing is correct."""
    vals = [v for v in source_data.get("t", []) if v == v]
    lo, hi = (min(vals), max(vals)) if vals else (0.0, 1.0)
    cw, ch = (_W - 40) / max(len(xs), 1), (_H - _PAD - 4) / max(len(ys), 1)
    cells = []
    for x, y, v, text in zip(source_data.get("x", []), source_data.get("y", []),
                             source_data.get("t", []), source_data.get("text", []), strict=False):
        if x not in xs or y not in ys:
            continue
        if v == v:
            k = 0.0 if hi <= lo else (v - lo) / (hi - lo)
            fill = f"rgb({int(68 + 185 * k)},{int(1 + 230 * k)},{int(84 + 40 * (1 - k))})"
        else:
            fill = "#afb8c1"
        cells.append(f"<rect x='{36 + xs.index(x) * cw:.1f}' y='{2 + ys.index(y) * ch:.1f}' "
                     f"width='{cw - 1:.1f}' height='{ch - 1:.1f}' fill='{fill}'>"
                     f"<title>{escape(str(text))}</title></rect>")
    sx, sy = label_step(xs, _W - 40), label_step(ys, _H - _PAD - 4, vertical=True)  # no overlap
    labels = "".join(f"<text x='{36 + i * cw + cw / 2:.1f}' y='{_H - _PAD + 12}' font-size='9' "
                     f"text-anchor='middle'>{escape(v)}</text>" for i, v in enumerate(xs)
                     if i % sx == 0)
    labels += "".join(f"<text x='33' y='{2 + i * ch + ch / 2 + 3:.1f}' font-size='9' "
                      f"text-anchor='end'>{escape(v)}</text>" for i, v in enumerate(ys)
                      if i % sy == 0)
    return _frame("best median per cell (darker = faster)", "".join(cells) + labels,
                  f"{axes[0]} × {axes[1]}" if axes[1] else axes[0])


def timing_figures(current: RunResult, history: Sequence[RunResult]) -> list[str]:
    """The run-time distribution and every result's median, in one unit (as in the live panel,
    issue 35)."""
    runs = ([float(np.max(current.measurement.timing.times_ms))]
            if current.measurement is not None else [])
    unit = time_unit([*_medians(list(history)[-_MAX_POINTS:]), *runs])
    return [distribution_svg(current, unit), history_svg(history, unit)]


def heatmap_figures(heatmap: Any) -> list[str]:
    """The live heatmap's cells as drawn, once it has axes (else nothing)."""
    if heatmap is None or heatmap.axes is None:
        return []
    return [heatmap_svg(dict(heatmap.source.data), list(heatmap.fig.x_range.factors),
                        list(heatmap.fig.y_range.factors), heatmap.axes)]


def snapshot_page(current: RunResult | None, history: Sequence[RunResult],
                  figures: Sequence[str]) -> str:
    """The whole static snapshot: the views' ``figures`` in a row above the current card."""
    if current is None:
        return "<div class='ktune-snapshot'><i>ktune panel: no result yet</i></div>"
    row = ("<div style='display:flex;gap:8px;flex-wrap:wrap;margin:4px 0'>"
           + "".join(figures) + "</div>") if figures and (
        current.measurement is not None or history) else ""
    note = ("<div style='color:#57606a;font-size:12px'>static snapshot of the last result "
            "shown (run the cell for the live panel)</div>")
    return f"<div class='ktune-snapshot'>{note}{row}{run_result_html(current)}</div>"


def snapshot_html(current: RunResult | None, history: Sequence[RunResult],
                  heatmap: Any = None) -> str:
    """Render the snapshot of the timing figures and ``heatmap`` above the current card."""
    if current is None:
        return snapshot_page(None, history, [])
    return snapshot_page(current, history,
                         timing_figures(current, history) + heatmap_figures(heatmap))
