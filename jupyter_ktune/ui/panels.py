"""Bokeh figures of the live panel, each built once and then fed through ColumnDataSources.

(a) timing: the current variant's run-time distribution and the history of variants tried;
(b) heatmap over two chosen tunables (colour = median time, hover = config, tap = select);
(c) roofline against the device's measured ceilings; (f) swizzle bank map with the conflict
degree of a row and a column access. Updates replace ``source.data`` or ``stream`` into it, so
only the changed columns travel to the browser (jupyter_bokeh sends document patches).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from bokeh.models import (
    ColorBar,
    ColumnDataSource,
    FactorRange,
    HoverTool,
    LinearColorMapper,
    TapTool,
)
from bokeh.palettes import Category20, Viridis256
from bokeh.plotting import figure

from jupyter_ktune.results import RunResult, Status
from jupyter_ktune.swizzle import Swizzle, bank_map, conflicts

_W, _H = 330, 220
_STATUS_COLOUR = {Status.OK: "#1a7f37", Status.WRONG: "#cf222e"}


def _label(config: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())


class TimingPanel:
    """(a) Distribution of the current variant and the history of every variant tried."""

    def __init__(self) -> None:
        self.dist = ColumnDataSource({"left": [], "right": [], "count": []})
        self.hist = ColumnDataSource({"i": [], "us": [], "config": [], "status": [],
                                      "colour": [], "alpha": []})
        f = figure(width=_W, height=_H, title="current variant: run times",
                   x_axis_label="µs", y_axis_label="runs", toolbar_location=None)
        f.quad(left="left", right="right", top="count", bottom=0, source=self.dist,
               fill_color="#4c72b0", line_color="white")
        h = figure(width=_W, height=_H, title="variants tried (median)", x_axis_label="request",
                   y_axis_label="µs", toolbar_location=None)
        h.scatter("i", "us", source=self.hist, color="colour", alpha="alpha", size=8)
        h.add_tools(HoverTool(tooltips=[("config", "@config"), ("median", "@us{0.00} µs"),
                                        ("status", "@status")]))
        self.figures = (f, h)

    def show_current(self, r: RunResult) -> None:
        """Replace the distribution with the current variant's runs (empty if not timed)."""
        if r.measurement is None:
            self.dist.data = {"left": [], "right": [], "count": []}
            self.figures[0].title.text = f"current variant: {r.status.value}"
            return
        us = r.measurement.timing.times_ms * 1e3
        counts, edges = np.histogram(us, bins=min(30, max(5, us.size // 8)))
        self.dist.data = {"left": edges[:-1].tolist(), "right": edges[1:].tolist(),
                          "count": counts.tolist()}
        t = r.measurement.timing
        self.figures[0].title.text = (f"current: median {t.median_ms * 1e3:.2f} µs, "
                                      f"IQR {t.iqr_ms * 1e3:.2f} µs, n = {t.n}")

    def add(self, r: RunResult, current: bool) -> None:
        """Append one delivery to the history (stale ones drawn faint)."""
        med = r.median_ms
        row = {"i": len(self.hist.data["i"]) + 1,
               "us": med * 1e3 if med is not None else float("nan"),
               "config": _label(r.config), "status": r.status.value,
               "colour": _STATUS_COLOUR.get(r.status, "#57606a"), "alpha": 1.0 if current else 0.35}
        # Whole-column assignment, not stream(): a patch sent before the browser view existed
        # (the first result arrives before the panel is displayed) was lost, so the first
        # variant never showed (seen in JupyterLab and Notebook 7). 500 rows at most.
        self.hist.data = {k: (list(v) + [row[k]])[-500:] for k, v in self.hist.data.items()}
        ys = [y for y in self.hist.data["us"] if y == y]
        h = self.figures[1]
        if ys:
            lo, hi = min(ys), max(ys)
            pad = (hi - lo) * 0.08 or hi * 0.05 or 1.0
            h.y_range.start, h.y_range.end = lo - pad, hi + pad
        h.x_range.start, h.x_range.end = 0.5, len(self.hist.data["i"]) + 0.5


class HeatmapPanel:
    """(b) Median time over two tunables; tap a cell to select that config."""

    def __init__(self, params: Sequence[Any]) -> None:
        self.params = {p.name: p for p in params}
        self.source = ColumnDataSource({"x": [], "y": [], "us": [], "config": [], "text": []})
        self.mapper = LinearColorMapper(palette=Viridis256, nan_color="#afb8c1")
        self.fig = figure(width=_W, height=_H + 40, title="median time (µs), tap to select",
                          x_range=FactorRange(), y_range=FactorRange(),
                          toolbar_location=None, tools="")
        self.fig.rect("x", "y", 1, 1, source=self.source,
                      fill_color={"field": "us", "transform": self.mapper}, line_color="white")
        self.fig.add_tools(HoverTool(tooltips=[("config", "@config"), ("median", "@text")]),
                           TapTool())
        self.fig.add_layout(ColorBar(color_mapper=self.mapper, width=8), "right")
        self.axes: tuple[str, str] | None = None
        self.cells: dict[tuple[str, str], dict[str, Any]] = {}

    def set_axes(self, x: str, y: str | None, known: Sequence[RunResult]) -> None:
        """Choose the two tunables drawn (``y`` None for a one-parameter space)."""
        self.axes = (x, y or "")
        xs = [str(v) for v in self.params[x].values]
        ys = [str(v) for v in self.params[y].values] if y else ["-"]
        self.fig.x_range.factors, self.fig.y_range.factors = xs, ys
        self.fig.xaxis.axis_label, self.fig.yaxis.axis_label = x, y or ""
        self.cells = {}
        self.source.data = {"x": [], "y": [], "us": [], "config": [], "text": []}
        for r in known:
            self.add(r)

    def add(self, r: RunResult) -> None:
        """Put a result in its cell (the newest result for a cell wins)."""
        if self.axes is None:
            return
        x, y = self.axes
        key = (str(r.config.get(x)), str(r.config.get(y)) if y else "-")
        med = r.median_ms
        self.cells[key] = {"us": med * 1e3 if med is not None and r.status is Status.OK
                           else float("nan"), "config": _label(r.config),
                           "text": f"{med * 1e3:.2f} µs" if med is not None else r.status.value}
        keys = list(self.cells)
        finite = [c["us"] for c in self.cells.values() if np.isfinite(c["us"])]
        # all-NaN data leaves the mapper without a range and Bokeh draws nothing at all
        self.mapper.low = min(finite) if finite else 0.0
        self.mapper.high = max(finite) if finite and max(finite) > min(finite) else (
            (finite[0] * 1.01 + 1e-9) if finite else 1.0)
        self.source.data = {"x": [k[0] for k in keys], "y": [k[1] for k in keys],
                            **{c: [self.cells[k][c] for k in keys]
                               for c in ("us", "config", "text")}}

    def config_at(self, index: int) -> dict[str, Any]:
        """The (partial) config of the tapped cell, typed like the Space's values."""
        x, y = self.axes or ("", "")
        out = {}
        for name, raw in ((x, self.source.data["x"][index]), (y, self.source.data["y"][index])):
            if name:
                out[name] = next(v for v in self.params[name].values if str(v) == raw)
        return out


class RooflinePanel:
    """(c) Arithmetic intensity vs achieved rate, under the device's measured ceilings."""

    def __init__(self, ceilings: Mapping[str, Any] | None) -> None:
        self.ceilings = dict(ceilings or {})
        self.point = ColumnDataSource({"ai": [], "tflops": [], "label": []})
        self.roof = ColumnDataSource({"ai": [], "tflops": []})
        f = figure(width=_W, height=_H, x_axis_type="log", y_axis_type="log",
                   x_axis_label="FLOP/byte", y_axis_label="TFLOP/s", toolbar_location=None)
        f.line("ai", "tflops", source=self.roof, color="#57606a", line_width=2)
        f.scatter("ai", "tflops", source=self.point, size=10, color="#cf222e")
        f.add_tools(HoverTool(tooltips=[("variant", "@label"), ("TFLOP/s", "@tflops{0.000}"),
                                        ("FLOP/byte", "@ai{0.000}")]))
        self.fig = f
        bw, peak = self.ceilings.get("bandwidth_gbps"), self.ceilings.get("tflops")
        if bw and peak:
            ai = np.logspace(-2, 4, 60)
            self.roof.data = {"ai": ai.tolist(),
                              "tflops": np.minimum(ai * bw / 1e3, peak).tolist()}
            f.title.text = (f"roofline: {bw:,.0f} GB/s, {peak:,.0f} TFLOP/s "
                            f"({self.ceilings.get('source', 'measured')})")
        else:
            f.title.text = "roofline: no measured ceilings for this device"

    def show(self, r: RunResult) -> None:
        """Place the current variant (needs flops and bytes from the cell)."""
        m = r.measurement
        if m is None or not m.flops or not m.bytes:
            self.point.data = {"ai": [], "tflops": [], "label": []}
            return
        self.point.data = {"ai": [m.flops / m.bytes], "tflops": [m.tflops],
                           "label": [_label(r.config)]}


class SwizzlePanel:
    """(f) Shared-memory bank of each element of a tile after swizzling, with conflicts."""

    def __init__(self) -> None:
        self.source = ColumnDataSource({"r": [], "c": [], "bank": [], "colour": []})
        f = figure(width=_W, height=_H + 40, toolbar_location=None, y_range=(16.5, -0.5),
                   x_axis_label="element (column)", y_axis_label="row")
        f.rect("c", "r", 1, 1, source=self.source, fill_color="colour", line_color=None)
        f.add_tools(HoverTool(tooltips=[("row", "@r"), ("col", "@c"), ("bank", "@bank")]))
        self.fig = f
        self._palette = (Category20[20] * 2)[:32]

    def show(self, mode: Any, rows: int = 16, row_bytes: int = 128, elem_bytes: int = 2) -> None:
        """Draw ``rows`` x ``row_bytes`` of a row-major tile of ``elem_bytes`` elements."""
        sw = Swizzle.parse(mode)
        cols = row_bytes // elem_bytes
        banks = bank_map(rows, cols, elem_bytes, sw)
        r, c = np.indices(banks.shape)
        self.source.data = {"r": r.ravel().tolist(), "c": c.ravel().tolist(),
                            "bank": banks.ravel().tolist(),
                            "colour": [self._palette[b] for b in banks.ravel()]}
        vec = 16
        row_c = conflicts(rows, cols, elem_bytes, sw, access="row", vector_bytes=vec)
        col_c = conflicts(rows, cols, elem_bytes, sw, access="column", vector_bytes=vec)
        self.fig.y_range.start, self.fig.y_range.end = rows - 0.5, -0.5
        self.fig.title.text = (f"swizzle {sw.name}: 16-byte loads, row access {row_c}-way, "
                               f"column access {col_c}-way")
