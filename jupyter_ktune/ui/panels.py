"""Bokeh figures of the live panel, each built once and then fed through ColumnDataSources.

(a) timing: the current variant's run-time distribution and the history of variants tried;
(b) heatmap over two chosen tunables (colour = median time, hover = config, tap = select).
The roofline is :mod:`jupyter_ktune.ui.roofline`, the swizzle bank map
:mod:`jupyter_ktune.ui.swizzle_map`. Updates replace ``source.data``, so only the changed
columns travel to the browser (jupyter_bokeh sends document patches).

Every time figure of a panel draws in one unit (issue 35: the history read ms beside a histogram
in µs): :meth:`TimingPanel.unit` picks it from all the times the panel shows, and the heatmap's
colour bar takes the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from bokeh.models import (
    ColorBar,
    ColumnDataSource,
    FactorRange,
    HoverTool,
    LinearColorMapper,
    Range1d,
    TapTool,
)
from bokeh.palettes import Viridis256
from bokeh.plotting import figure

from jupyter_ktune.render import counted, fmt_time, noise_note
from jupyter_ktune.results import RunResult, Status
from jupyter_ktune.tunable_values import value_text
from jupyter_ktune.ui.axes import legend_below, quiet_axes, thin_labels
from jupyter_ktune.ui.units import scaled, time_unit

_W, _H = 330, 220
_STATUS_COLOUR = {Status.OK: "#1a7f37", Status.WRONG: "#cf222e"}
#: how a point of the history was produced, as its legend says
KINDS = {"current": "live run", "stale": "live, superseded", "sweep": "autotune sweep"}
_KIND_STYLE = {"current": ("circle", 1.0), "stale": ("circle", 0.3), "sweep": ("triangle", 0.8)}


def _label(config: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={value_text(v)}" for k, v in config.items())


def central(times_ms: np.ndarray) -> tuple[np.ndarray, int]:
    """Keep the runs within 5 IQRs above the median; also return how many were left out.

    One 8 ms hiccup among 100 runs of 73 µs would otherwise squeeze the histogram into one bar.
    """
    med = float(np.median(times_ms))
    q1, q3 = np.percentile(times_ms, [25, 75])
    keep = times_ms <= med + 5 * max(float(q3 - q1), med * 0.01)
    return times_ms[keep], int(times_ms.size - keep.sum())


class TimingPanel:
    """(a) Distribution of the current variant and the history of every result delivered."""

    def __init__(self) -> None:
        self.dist = ColumnDataSource({"left": [], "right": [], "count": []})
        self.hist = ColumnDataSource({"i": [], "t": [], "text": [], "config": [], "status": [],
                                      "colour": [], "alpha": [], "marker": [], "kind": []})
        self._ms: list[float] = []  # the history's medians in ms (the column holds them scaled)
        self._runs_ms: np.ndarray | None = None  # the current variant's runs drawn, in ms
        # Range1d, set from Python on every update: a DataRange1d kept an earlier variant's span
        # in the browser (bars and points drawn off the axes after a few updates)
        f = figure(width=_W, height=_H, title="current variant: run times",
                   x_range=Range1d(0, 1), y_range=Range1d(0, 1),
                   x_axis_label="time", y_axis_label="runs", toolbar_location=None)
        f.quad(left="left", right="right", top="count", bottom=0, source=self.dist,
               fill_color="#4c72b0", line_color="white")
        h = figure(width=_W, height=_H, title="every result (median)", x_axis_label="result #",
                   x_range=Range1d(0.5, 1.5), y_range=Range1d(0, 1),
                   y_axis_label="median", toolbar_location=None)
        dots = h.scatter("i", "t", source=self.hist, color="colour", alpha="alpha",
                         marker="marker", size=8)
        legend_below(h, dots, "kind")  # under the plot: it never covers a point
        h.add_tools(HoverTool(tooltips=[("config", "@config"), ("median", "@text"),
                                        ("status", "@status"), ("from", "@kind")]))
        for fig in (f, h):
            quiet_axes(fig)
        h.xaxis.ticker.min_interval = 1  # result numbers are whole
        self.figures = (f, h)

    def unit(self, more_ms: Sequence[float] = ()) -> tuple[str, float]:
        """The panel's one time unit: the largest of every median and the current runs decides."""
        runs = [float(np.max(self._runs_ms))] if self._runs_ms is not None else []
        return time_unit([*self._ms, *runs, *more_ms])

    def show_current(self, r: RunResult) -> None:
        """Replace the distribution with the current variant's runs (empty if not timed)."""
        f = self.figures[0]
        if r.measurement is None:
            self._runs_ms = None
            self.dist.data = {"left": [], "right": [], "count": []}
            f.title.text = f"current variant: {r.status.value}"
            return
        t = r.measurement.timing
        self._runs_ms, self._slow = central(np.asarray(t.times_ms))
        noisy = " · NOISY" if noise_note(t) else ""
        f.title.text = f"median {fmt_time(t.median_ms)} · IQR {fmt_time(t.iqr_ms)}{noisy}"
        self._redraw()

    _slow = 0  # runs of the current variant left out of the histogram (far outliers)

    def _redraw(self) -> None:
        """Draw both figures in the panel's unit (a new result may change it)."""
        unit, size = self.unit()
        f, h = self.figures
        if self._runs_ms is not None:
            vals = self._runs_ms / size
            counts, edges = np.histogram(vals, bins=min(30, max(5, vals.size // 8)))
            self.dist.data = {"left": edges[:-1].tolist(), "right": edges[1:].tolist(),
                              "count": counts.tolist()}
            pad = (edges[-1] - edges[0]) * 0.05 or abs(edges[0]) * 0.05 or 1.0
            f.x_range.start, f.x_range.end = float(edges[0] - pad), float(edges[-1] + pad)
            f.y_range.start, f.y_range.end = 0, float(counts.max()) * 1.1 + 0.5
            f.xaxis.axis_label = f"run time ({unit})" + (
                f", {counted(self._slow, 'slower run')} not drawn" if self._slow else "")
        if self._ms:
            data = dict(self.hist.data)
            data["t"] = scaled(self._ms, size)
            self.hist.data = data
            h.yaxis.axis_label = f"median ({unit})"
            ys = [y for y in data["t"] if y == y]
            if ys:
                lo, hi = min(ys), max(ys)
                pad = (hi - lo) * 0.12 or hi * 0.05 or 1.0
                h.y_range.start, h.y_range.end = lo - pad, hi + pad
            h.x_range.start, h.x_range.end = 0.5, len(self._ms) + 0.5

    def add(self, r: RunResult, kind: str) -> None:
        """Append one delivery (``kind``: current, stale or sweep) to the history; all are kept."""
        med = r.median_ms
        ok = med is not None and r.status is Status.OK
        self._ms.append(med if ok else float("nan"))
        marker, alpha = _KIND_STYLE[kind]
        row = {"i": len(self._ms), "text": fmt_time(med) if med is not None else r.status.value,
               "config": _label(r.config), "status": r.status.value,
               "colour": _STATUS_COLOUR.get(r.status, "#57606a"), "alpha": alpha,
               "marker": marker, "kind": KINDS[kind]}
        # Whole-column assignment (not stream()): a view made later starts from the whole data;
        # "t" is filled in the panel's unit by _redraw
        self.hist.data = {k: list(v) + [row.get(k, float("nan"))]
                          for k, v in self.hist.data.items()}
        self._redraw()


class HeatmapPanel:
    """(b) Best median over two tunables; tap a cell to run the config drawn there.

    With more tunables than the two axes, several configs share a cell: the cell shows the
    fastest correct one (or the newest failure when none is correct) and holds that config in
    full, so a tap runs exactly what the cell shows.
    """

    def __init__(self, params: Sequence[Any],
                 unit: Callable[[Sequence[float]], tuple[str, float]] | None = None) -> None:
        self.params = {p.name: p for p in params}
        #: the panel's time unit given the times drawn here (TimingPanel.unit), or their own
        self.unit = unit or time_unit
        self.source = ColumnDataSource({"x": [], "y": [], "t": [], "config": [], "text": [],
                                        "n": []})
        self.mapper = LinearColorMapper(palette=Viridis256, nan_color="#afb8c1")
        self.fig = figure(width=_W, height=_H + 40, title="best median per cell · tap to run it",
                          x_range=FactorRange(), y_range=FactorRange(),
                          toolbar_location=None, tools="")
        self.fig.rect("x", "y", 1, 1, source=self.source,
                      fill_color={"field": "t", "transform": self.mapper}, line_color="white")
        self.fig.add_tools(HoverTool(tooltips=[("config", "@config"), ("median", "@text"),
                                               ("configs in cell", "@n")]), TapTool())
        self.colorbar = ColorBar(color_mapper=self.mapper, width=8, title="µs")
        self.fig.add_layout(self.colorbar, "right")
        self.fig.title.text_font_size = "10pt"
        self.axes: tuple[str, str] | None = None
        #: cell -> {config label: (result, full config)}
        self.cells: dict[tuple[str, str], dict[str, tuple[RunResult, dict[str, Any]]]] = {}
        self.shown: list[dict[str, Any]] = []  # the full config drawn in each row of the source

    def set_axes(self, x: str, y: str | None, known: Sequence[RunResult]) -> None:
        """Choose the two tunables drawn (``y`` None for a one-parameter space)."""
        self.axes = (x, y or "")
        xs = [value_text(v) for v in self.params[x].values]
        ys = [value_text(v) for v in self.params[y].values] if y else ["-"]
        self.fig.x_range.factors, self.fig.y_range.factors = xs, ys
        self.fig.xaxis.axis_label, self.fig.yaxis.axis_label = x, y or ""
        # 41 values of a tunable used to print 41 labels into one strip: label every k-th
        thin_labels(self.fig.xaxis, xs, self.fig.width - 90)
        thin_labels(self.fig.yaxis, ys, self.fig.height - 70, vertical=True)
        self.cells = {}
        for r in known:
            self._put(r)
        self._draw()

    def add(self, r: RunResult) -> None:
        """Put a result in its cell (a config's newest result replaces its older one)."""
        if self.axes is not None:
            self._put(r)
            self._draw()

    def _put(self, r: RunResult) -> None:
        x, y = self.axes or ("", "")
        key = (value_text(r.config.get(x)), value_text(r.config.get(y)) if y else "-")
        self.cells.setdefault(key, {})
        self.cells[key].pop(_label(r.config), None)  # re-insert: newest last
        self.cells[key][_label(r.config)] = (r, dict(r.config))

    @staticmethod
    def _pick(entries: dict[str, tuple[RunResult, dict[str, Any]]]) -> tuple[RunResult, dict]:
        ok = [e for e in entries.values() if e[0].status is Status.OK and e[0].median_ms]
        if ok:
            return min(ok, key=lambda e: e[0].median_ms)
        return list(entries.values())[-1]

    def _draw(self) -> None:
        picks = {k: self._pick(v) for k, v in self.cells.items()}
        ms = [r.median_ms if r.status is Status.OK and r.median_ms else float("nan")
              for r, _ in picks.values()]
        unit, size = self.unit(ms)
        vals = scaled(ms, size)
        finite = [v for v in vals if np.isfinite(v)]
        # all-NaN data leaves the mapper without a range and Bokeh draws nothing at all
        self.mapper.low = min(finite) if finite else 0.0
        self.mapper.high = max(finite) if finite and max(finite) > min(finite) else (
            (finite[0] * 1.01 + 1e-9) if finite else 1.0)
        self.colorbar.title = unit
        keys = list(picks)
        self.shown = [picks[k][1] for k in keys]
        self.source.data = {
            "x": [k[0] for k in keys], "y": [k[1] for k in keys], "t": vals,
            "config": [_label(c) for c in self.shown],
            "text": [fmt_time(r.median_ms) if r.median_ms is not None else r.status.value
                     for r, _ in picks.values()],
            "n": [len(self.cells[k]) for k in keys]}

    def config_at(self, index: int) -> dict[str, Any]:
        """Return the full config drawn in the tapped cell (every tunable, not only the axes)."""
        return dict(self.shown[index])


