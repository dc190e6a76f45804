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
    Range1d,
    TapTool,
)
from bokeh.palettes import Category20, Category20b, Viridis256
from bokeh.plotting import figure

from jupyter_ktune.render import fmt_time, noise_note
from jupyter_ktune.results import RunResult, Status
from jupyter_ktune.errors import CellError
from jupyter_ktune.smem_tile import SWIZZLE_NAMES, SmemTile, TileShape
from jupyter_ktune.swizzle import Swizzle, bank_map
from jupyter_ktune.ui.units import scaled, time_unit

_W, _H = 330, 220
_STATUS_COLOUR = {Status.OK: "#1a7f37", Status.WRONG: "#cf222e"}
#: how a point of the history was produced, as its legend says
KINDS = {"current": "live run", "stale": "live, superseded", "sweep": "autotune sweep"}
_KIND_STYLE = {"current": ("circle", 1.0), "stale": ("circle", 0.3), "sweep": ("triangle", 0.8)}


def _label(config: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())


def _quiet_axes(f: Any) -> None:
    """Few ticks and plain numbers, so labels never run into each other."""
    for axis in (f.xaxis, f.yaxis):
        axis.ticker.desired_num_ticks = 4
        if hasattr(axis.formatter, "use_scientific"):
            axis.formatter.use_scientific = False
    f.title.text_font_size = "10pt"


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
        h.scatter("i", "t", source=self.hist, color="colour", alpha="alpha", marker="marker",
                  size=8, legend_field="kind")
        h.legend.location = "top_left"
        h.legend.label_text_font_size = "8pt"
        h.legend.background_fill_alpha = 0.6
        h.legend.padding = h.legend.spacing = 1
        h.add_tools(HoverTool(tooltips=[("config", "@config"), ("median", "@text"),
                                        ("status", "@status"), ("from", "@kind")]))
        for fig in (f, h):
            _quiet_axes(fig)
        h.xaxis.ticker.min_interval = 1  # result numbers are whole
        self.figures = (f, h)

    def show_current(self, r: RunResult) -> None:
        """Replace the distribution with the current variant's runs (empty if not timed)."""
        f = self.figures[0]
        if r.measurement is None:
            self.dist.data = {"left": [], "right": [], "count": []}
            f.title.text = f"current variant: {r.status.value}"
            return
        t = r.measurement.timing
        times, slow = central(np.asarray(t.times_ms))
        unit, size = time_unit([float(np.max(times))])
        vals = times / size
        counts, edges = np.histogram(vals, bins=min(30, max(5, vals.size // 8)))
        self.dist.data = {"left": edges[:-1].tolist(), "right": edges[1:].tolist(),
                          "count": counts.tolist()}
        pad = (edges[-1] - edges[0]) * 0.05 or abs(edges[0]) * 0.05 or 1.0
        f.x_range.start, f.x_range.end = float(edges[0] - pad), float(edges[-1] + pad)
        f.y_range.start, f.y_range.end = 0, float(counts.max()) * 1.1 + 0.5
        f.xaxis.axis_label = f"run time ({unit})" + (
            f", {slow} slower run{'s' if slow > 1 else ''} not drawn" if slow else "")
        noisy = " · NOISY" if noise_note(t) else ""
        f.title.text = f"median {fmt_time(t.median_ms)} · IQR {fmt_time(t.iqr_ms)}{noisy}"

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
        unit, size = time_unit(self._ms)
        # Whole-column assignment (not stream()): a view made later starts from the whole data.
        data = {k: list(v) + [row[k]] for k, v in self.hist.data.items() if k != "t"}
        data["t"] = scaled(self._ms, size)
        self.hist.data = data
        h = self.figures[1]
        h.yaxis.axis_label = f"median ({unit})"
        ys = [y for y in data["t"] if y == y]
        if ys:
            lo, hi = min(ys), max(ys)
            pad = (hi - lo) * 0.12 or hi * 0.05 or 1.0
            h.y_range.start, h.y_range.end = lo - pad, hi + pad * 2.5  # room for the legend
        h.x_range.start, h.x_range.end = 0.5, len(self._ms) + 0.5


class HeatmapPanel:
    """(b) Best median over two tunables; tap a cell to run the config drawn there.

    With more tunables than the two axes, several configs share a cell: the cell shows the
    fastest correct one (or the newest failure when none is correct) and holds that config in
    full, so a tap runs exactly what the cell shows.
    """

    def __init__(self, params: Sequence[Any]) -> None:
        self.params = {p.name: p for p in params}
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
        xs = [str(v) for v in self.params[x].values]
        ys = [str(v) for v in self.params[y].values] if y else ["-"]
        self.fig.x_range.factors, self.fig.y_range.factors = xs, ys
        self.fig.xaxis.axis_label, self.fig.yaxis.axis_label = x, y or ""
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
        key = (str(r.config.get(x)), str(r.config.get(y)) if y else "-")
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
        unit, size = time_unit(ms)
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


class RooflinePanel:
    """(c) Arithmetic intensity vs achieved rate, under the device's measured ceilings.

    Host time (an interpreter on a CPU) is not GPU time: no point is placed for it.
    """

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
        f.title.text_font_size = "10pt"
        self.fig = f
        bw, peak = self.ceilings.get("bandwidth_gbps"), self.ceilings.get("tflops")
        if bw and peak:
            ai = np.logspace(-2, 4, 60)
            self.roof.data = {"ai": ai.tolist(),
                              "tflops": np.minimum(ai * bw / 1e3, peak).tolist()}
            self.title = f"roofline · {bw:,.0f} GB/s · {peak:,.0f} TFLOP/s"
        else:
            self.title = "roofline (no measured ceilings)"
        f.title.text = self.title

    def show(self, r: RunResult) -> None:
        """Place the current variant (needs flops and bytes from the cell, and GPU time)."""
        m = r.measurement
        host = m is not None and "host time" in m.timing.method
        self.fig.visible = not host  # a roofline of interpreter host time would mislead
        if m is None or not m.flops or not m.bytes or host:
            self.point.data = {"ai": [], "tflops": [], "label": []}
            return
        self.point.data = {"ai": [m.flops / m.bytes], "tflops": [m.tflops],
                           "label": [_label(r.config)]}


#: 32 distinct colours, one per shared-memory bank
BANK_COLOURS = tuple(Category20[20]) + tuple(Category20b[20][::2]) + tuple(Category20b[20][1:4:2])


class SwizzlePanel:
    """(f) Shared-memory bank of each element of the cell's tile after swizzling, with conflicts.

    The tile is the cell's ``smem_tile`` statement evaluated for the config the controls show
    (rows, columns, element size, bytes a thread reads, swizzle mode), so the map follows the
    sliders with or without a device: it is the model of :mod:`jupyter_ktune.swizzle`, whose
    conflict degrees match ncu's shared-load wavefronts on the H200
    (bench/results/swizzle_bank_conflicts). Without the statement the map is a generic tile,
    and says so.
    """

    #: the generic tile drawn when the cell declares none: 16 rows of 128 bytes of bf16,
    #: read 16 bytes a thread (an MMA operand tile)
    GENERIC = (16, 64, 2, 16, "bfloat16")
    #: at most this many rows and columns are drawn (the counts cover the whole tile)
    MAX_DRAWN = (64, 128)

    def __init__(self, tile: SmemTile | None = None) -> None:
        self.tile = tile
        self.source = ColumnDataSource({"r": [], "c": [], "bank": [], "colour": []})
        f = figure(width=_W, height=_H + 40, toolbar_location=None, y_range=Range1d(16.5, -0.5),
                   x_range=Range1d(-0.5, 64.5), x_axis_label="element (column)",
                   y_axis_label="row")
        f.rect("c", "r", 1, 1, source=self.source, fill_color="colour", line_color=None)
        f.add_tools(HoverTool(tooltips=[("row", "@r"), ("col", "@c"), ("bank", "@bank")]))
        _quiet_axes(f)
        self.fig = f
        self.counts: dict[str, int] = {}  # the conflict degrees drawn now: row, column

    def shape(self, config: Mapping[str, Any]) -> TileShape:
        """The tile drawn for ``config``: the cell's, or the generic one with its swizzle."""
        if self.tile is not None:
            return self.tile.shape(config)
        rows, cols, elem, vec, dtype = self.GENERIC
        mode = next((config[n] for n in SWIZZLE_NAMES if n in config), "none")
        return TileShape(rows, cols, elem, vec, dtype, Swizzle.parse(mode))

    def show(self, config: Mapping[str, Any]) -> None:
        """Draw the tile of ``config``; a tile that does not fit says why in the title."""
        try:
            shape = self.shape(config)
            self.counts = shape.conflicts()
        except (CellError, ValueError) as exc:
            self.source.data = {"r": [], "c": [], "bank": [], "colour": []}
            self.counts = {}
            self.fig.title.text = str(exc).splitlines()[0]
            return
        rows, cols = min(shape.rows, self.MAX_DRAWN[0]), min(shape.cols, self.MAX_DRAWN[1])
        banks = bank_map(rows, cols, shape.elem_bytes, shape.swizzle)
        r, c = np.indices(banks.shape)
        self.source.data = {"r": r.ravel().tolist(), "c": c.ravel().tolist(),
                            "bank": banks.ravel().tolist(),
                            "colour": [BANK_COLOURS[b] for b in banks.ravel()]}
        self.fig.y_range.start, self.fig.y_range.end = rows - 0.5, -0.5
        self.fig.x_range.start, self.fig.x_range.end = -0.5, cols - 0.5
        cut = (f" (first {rows} of {shape.rows} rows, {cols} of {shape.cols} columns drawn)"
               if (rows, cols) != (shape.rows, shape.cols) else "")
        self.fig.xaxis.axis_label = "element (column)" + cut
        what = shape.label() if self.tile is not None else (
            "generic " + shape.label() + " (declare yours: smem_tile = (ROWS, COLS, DTYPE))")
        self.fig.title.text = (f"{what}\nrow read {self.counts['row']}-way, column read "
                               f"{self.counts['column']}-way bank conflict")
