"""Bokeh views of a cycle breakdown, and the panel's "Cycle breakdown" button.

Five figures, built once and fed through ColumnDataSources (XProf's views, for GPU warps):

* time per scope, stacked per warp role (mean ns per traced unit of each warpgroup);
* a warp timeline of one traced block (one lane per warp, one bar per scope execution);
* an SM x time heatmap (traced units inside a scope, per SM and time bin);
* the overlap/bubble summary (memory and compute overlapped, either alone, idle);
* per cell line: warp-state samples stacked by stall reason (ncu), the same data as the editor
  gutter.

:class:`BreakdownButton` asks the worker for the breakdown of the panel's current variant (the
scopes first, then ncu's per-line samples where ncu works) and sends the lines to the cell
editor through the editor MIME bundle. It holds the one output of the panel that marks the
editor: a pinned comparison (``ui/compare_gutter.py``) puts its per-line difference there through
``marks_override``, so two bundles never fight over one editor.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from bokeh.layouts import gridplot
from bokeh.models import ColumnDataSource, FactorRange, HoverTool
from bokeh.palettes import Category10, Viridis256
from bokeh.plotting import figure

from jupyter_ktune.measure.breakdown import Breakdown, scope_role
from jupyter_ktune.render import counted

_W, _H = 330, 220
_ROLE_COLOUR = {"overlap": "#6f42c1", "memory_only": "#4c72b0", "compute_only": "#dd8452",
                "other_only": "#8c8c8c", "idle": "#e0e0e0"}


def _colours(names: list[str]) -> dict[str, str]:
    pal = Category10[10]
    return {n: pal[i % len(pal)] for i, n in enumerate(names)}


class BreakdownViews:
    """The breakdown figures; :meth:`show` replaces their data."""

    def __init__(self) -> None:
        self.stack = ColumnDataSource({"role": [], "scope": [], "bottom": [], "top": [],
                                       "ns": [], "colour": []})
        f1 = figure(width=_W, height=_H, title="time per scope, per warp role",
                    x_range=FactorRange(), y_axis_label="ns per traced unit",
                    toolbar_location=None)
        f1.vbar(x="role", bottom="bottom", top="top", width=0.7, color="colour", source=self.stack,
                legend_field="scope")
        f1.add_tools(HoverTool(tooltips=[("scope", "@scope"), ("ns", "@ns{0.0}")]))
        f1.legend.label_text_font_size = "8pt"
        self.lanes = ColumnDataSource({"unit": [], "left": [], "right": [], "scope": [],
                                       "colour": []})
        f2 = figure(width=_W, height=_H, title="warp timeline", x_axis_label="ns from block start",
                    y_axis_label="warp", y_range=FactorRange(), toolbar_location=None)
        f2.hbar(y="unit", left="left", right="right", height=0.8, color="colour",
                source=self.lanes)
        f2.add_tools(HoverTool(tooltips=[("scope", "@scope"), ("from", "@left{0}"),
                                         ("to", "@right{0} ns")]))
        self.heat = ColumnDataSource({"x": [], "y": [], "w": [], "busy": [], "colour": []})
        f3 = figure(width=_W, height=_H, title="SM x time (traced units in a scope)",
                    x_axis_label="ns", y_axis_label="SM", toolbar_location=None)
        f3.rect(x="x", y="y", width="w", height=1, color="colour", source=self.heat)
        f3.add_tools(HoverTool(tooltips=[("SM", "@y"), ("busy units", "@busy{0.00}")]))
        self.overlap = ColumnDataSource({"y": [], "part": [], "left": [], "right": [],
                                         "share": [], "colour": []})
        f4 = figure(width=_W, height=_H // 2 + 40, title="overlap and bubbles",
                    x_range=(0, 1), y_range=["blocks"], toolbar_location=None)
        f4.hbar(y="y", left="left", right="right", height=0.6, color="colour",
                source=self.overlap, legend_field="part")
        f4.add_tools(HoverTool(tooltips=[("", "@part"), ("share", "@share{0%}")]))
        f4.legend.label_text_font_size = "8pt"
        f4.legend.orientation = "horizontal"
        f4.legend.location = "bottom_center"
        self.lines = ColumnDataSource({"line": [], "left": [], "right": [], "reason": [],
                                       "n": [], "colour": []})
        f5 = figure(width=_W, height=_H, title="stall samples per cell line (ncu)",
                    x_axis_label="samples", y_axis_label="cell line", toolbar_location=None)
        f5.y_range.flipped = True
        f5.hbar(y="line", left="left", right="right", height=0.8, color="colour",
                source=self.lines)
        f5.add_tools(HoverTool(tooltips=[("line", "@line"), ("reason", "@reason"),
                                         ("samples", "@n")]))
        self.figures = (f1, f2, f3, f4, f5)
        self.layout = gridplot([[f1, f2], [f3, f5], [f4, None]], toolbar_location=None)

    def show(self, bd: Breakdown) -> None:
        """Draw a breakdown (events and/or lines); figures without data are emptied."""
        if len(bd):
            self._scopes(bd)
            self._timeline(bd)
            self._heatmap(bd)
            self._overlap(bd)
        if bd.lines or not len(bd):
            self.show_lines(bd.lines)

    def _scopes(self, bd: Breakdown) -> None:
        colours = _colours(bd.scopes)
        cols: dict[str, list[Any]] = {k: [] for k in self.stack.data}
        per_role = bd.time_per_role()
        for role, scopes in per_role.items():
            bottom = 0.0
            for scope, ns in scopes.items():
                cols["role"].append(role)
                cols["scope"].append(scope)
                cols["bottom"].append(bottom)
                cols["top"].append(bottom + ns)
                cols["ns"].append(ns)
                cols["colour"].append(colours[scope])
                bottom += ns
        self.figures[0].x_range.factors = list(per_role)
        self.stack.data = cols

    def _timeline(self, bd: Breakdown) -> None:
        colours = _colours(bd.scopes)
        t = bd.timeline()
        self.lanes.data = {"unit": [str(u) for u in t["unit"]], "left": t["start_ns"].tolist(),
                           "right": t["end_ns"].tolist(), "scope": t["scope"].tolist(),
                           "colour": [colours[s] for s in t["scope"]]}
        units = sorted({int(u) for u in t["unit"]})
        self.figures[1].y_range.factors = [str(u) for u in units]
        blk = int(t["block"][0]) if len(t["block"]) else -1
        self.figures[1].title.text = f"warp timeline of block {blk} (longest traced)"

    def _heatmap(self, bd: Breakdown) -> None:
        sms, edges, busy = bd.sm_time_grid()
        top = float(busy.max()) or 1.0
        xs, ys, vs = [], [], []
        for i, sm in enumerate(sms):
            for j in range(busy.shape[1]):
                if busy[i, j] > 0:
                    xs.append((edges[j] + edges[j + 1]) / 2)
                    ys.append(int(sm))
                    vs.append(float(busy[i, j]))
        width = float(edges[1] - edges[0]) if len(edges) > 1 else 1.0
        self.heat.data = {"x": xs, "y": ys, "w": [width] * len(xs), "busy": vs,
                          "colour": [Viridis256[min(255, int(v / top * 255))] for v in vs]}

    def _overlap(self, bd: Breakdown) -> None:
        ov = bd.overlap()
        parts = ("overlap", "memory_only", "compute_only", "other_only", "idle")
        left, cols = 0.0, {k: [] for k in self.overlap.data}
        for p in parts:
            cols["y"].append("blocks")
            cols["part"].append(p.replace("_", " "))
            cols["left"].append(left)
            cols["right"].append(left + ov[p])
            cols["share"].append(ov[p])
            cols["colour"].append(_ROLE_COLOUR[p])
            left += ov[p]
        self.overlap.data = cols
        gap = ov["gaps"][0]["ns"] if ov["gaps"] else 0.0
        self.figures[3].title.text = (f"overlap {ov['overlap']:.0%}, idle {ov['idle']:.0%} of "
                                      f"{counted(ov['blocks'], 'block')}; longest gap {gap:.0f} ns")

    def show_lines(self, lines: Any, top: int = 4) -> None:
        """Per cell line, samples stacked by the top stall reasons (others lumped)."""
        reasons: dict[str, int] = {}
        for d in lines.values():
            for k, v in d.get("stalls", {}).items():
                reasons[k] = reasons.get(k, 0) + v
        keep = [k for k, _ in sorted(reasons.items(), key=lambda kv: -kv[1])[:top]]
        colours = {**_colours(keep), "other": "#bbbbbb"}
        cols: dict[str, list[Any]] = {k: [] for k in self.lines.data}
        for line, d in sorted(lines.items(), key=lambda kv: int(kv[0])):
            stalls = dict(d.get("stalls", {}))
            parts = [(k, stalls.get(k, 0)) for k in keep]
            parts.append(("other", max(0, int(d.get("samples", 0)) - sum(v for _, v in parts))))
            left = 0
            for reason, n in parts:
                if n:
                    cols["line"].append(int(line))
                    cols["left"].append(left)
                    cols["right"].append(left + n)
                    cols["reason"].append(reason)
                    cols["n"].append(n)
                    cols["colour"].append(colours[reason])
                    left += n
        self.lines.data = cols


def roles_of(bd: Breakdown) -> dict[str, str]:
    """Scope -> memory/compute/other, as the overlap summary classifies them."""
    return {s: scope_role(s) for s in bd.scopes}


def request_breakdown(worker: Any, spec: Any, config: Any, lines: bool = False,
                      timeout: float = 180.0) -> Breakdown:
    """Ask the device worker for a variant's breakdown; raise with the worker's reason."""
    from jupyter_ktune.errors import KtuneError

    kind, value = worker.request(("profile", spec, config, lines), timeout)
    if kind != "ok":
        text = getattr(value, "reason", value)
        raise KtuneError(str(text).strip().splitlines()[0] if str(text).strip() else kind)
    return value


class BreakdownButton:
    """The panel's "Cycle breakdown" button, its status line, figures and editor marks.

    ``timings`` records, per click, seconds from the click to the scopes drawn and to the lines
    drawn (bench/breakdown_overhead.py reads them).
    """

    def __init__(self, session: Any, current: Callable[[], Any]):
        import ipywidgets as w
        from jupyter_bokeh.widgets import BokehModel

        self.session, self._current = session, current
        self.button = w.Button(description="Cycle breakdown", icon="bar-chart",
                               tooltip="trace the current variant's scopes; per-line stalls "
                                       "from ncu where it works", layout=w.Layout(width="220px"))
        self.status = w.HTML()
        self.views = BreakdownViews()
        self.out = w.Output()  # holds the editor bundle, so the marks land in this cell
        self.box = w.VBox([self.status], layout=w.Layout(display="none"))
        self._bokeh = BokehModel
        self.timings: list[dict[str, float]] = []
        self.last: Breakdown | None = None
        self.last_config: Any = None  # the config ``last`` was traced for
        # called with (config, breakdown) once per-line samples arrive, before the editor marks
        self.listeners: list[Callable[[Any, Breakdown], None]] = []
        # a bundle to show instead of the plain one (a pinned comparison's diff), or None
        self.marks_override: Callable[[], dict[str, Any] | None] | None = None
        self.plain_marks: dict[str, Any] | None = None  # the bundle of the last per-line lines
        self._shown_marks: dict[str, Any] | None = None
        self._marks_lock = threading.RLock()
        self.button.on_click(lambda _b: self.start())

    def start(self) -> threading.Thread:
        """Fetch and draw the breakdown in a thread (the kernel stays responsive)."""
        t = threading.Thread(target=self._run, name="ktune-breakdown", daemon=True)
        t.start()
        return t

    def _run(self) -> None:
        r = self._current()
        if r is None:
            self.status.value = "<i>no variant yet</i>"
            return
        spec, config = self.session.spec, self.session.spec.space.config(r.config)
        t0 = time.perf_counter()
        self.box.layout.display = ""
        self.status.value = "<i>tracing scopes …</i>"
        times: dict[str, float] = {}
        problems: list[str] = []
        bd = None
        try:
            bd = request_breakdown(self.session.worker, spec, config)
            self.views.show(bd)
            self.last, self.last_config = bd, config
            times["scopes_s"] = time.perf_counter() - t0
            self._place()
            self.status.value = bd._repr_html_() + "<i>per-line stalls from ncu …</i>"
        except Exception as exc:  # noqa: BLE001 - shown in the panel, never raised
            problems.append(f"no scope breakdown: {exc}")
            self.status.value = _problems(problems) + "<i>per-line stalls from ncu …</i>"
        try:
            lines = request_breakdown(self.session.worker, spec, config, lines=True)
            times["lines_s"] = time.perf_counter() - t0
            self.views.show_lines(lines.lines)
            merged = bd.with_lines(lines.lines, *lines.notes[:1]) if bd is not None else lines
            self.last, self.last_config = merged, config
            self._place()
            self.status.value = merged._repr_html_() + _problems(problems)
            for listener in list(self.listeners):
                listener(config, merged)
            self._mark_editor(r, lines.lines)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"no per-line view: {exc}")
            self.status.value = (bd._repr_html_() if bd is not None else "") + \
                _problems(problems)
        self.timings.append(times)

    def _place(self) -> None:
        if len(self.box.children) == 1:
            self.box.children = (self.status, self._bokeh(self.views.layout), self.out)

    def _mark_editor(self, result: Any, lines: Any) -> None:
        from jupyter_ktune.editor import editor_bundle
        from jupyter_ktune.space import Config

        # the note names the config: after a slider move the bars still show this one's samples
        self.plain_marks = editor_bundle(result, {int(k): v for k, v in lines.items()},
                                         note=f"samples of {Config(result.config).label()}")
        self.refresh_marks()

    def refresh_marks(self) -> None:
        """Show the override's bundle (a pinned comparison's diff) when it has one, else the
        plain marks of the last per-line breakdown; nothing is redrawn when nothing changed."""
        from IPython.display import display

        with self._marks_lock:  # the breakdown's thread, the session's and the kernel's call it
            bundle = self.marks_override() if self.marks_override is not None else None
            bundle = bundle or self.plain_marks
            if bundle == self._shown_marks:
                return
            self._shown_marks = bundle
            self.out.clear_output()
            if bundle is not None:
                self._place()
                with self.out:
                    display(bundle, raw=True)


def _problems(problems: list[str]) -> str:
    import html

    return "".join(f"<div style='color:#57606a'>{html.escape(p)}</div>" for p in problems)


def lines_array(bd: Breakdown) -> np.ndarray:
    """``(line, samples)`` rows sorted by line, for quick checks and the CLI."""
    return np.array(sorted((int(k), int(v["samples"])) for k, v in bd.lines.items()),
                    dtype=np.int64).reshape(-1, 2)
