"""The panel's Pin button and Compare tab: the current config against a pinned baseline.

Pin (the button, or ``panel.pin()``) keeps the config shown as the baseline A. From then on
every current result B (a slider moved) is compared with it once the session is idle: both
configs timed again in interleaved rounds, A B A B ... (:mod:`jupyter_ktune.tuning.compare`), in
a thread of its own, newest request wins. The tab shows both run-time distributions overlaid
(one Bokeh figure), the ratio B/A with its 95 % CI and how it was obtained (host time labelled
as such), the static reports side by side with every difference marked, and the per-line stall
difference where both configs have a cycle breakdown with per-line samples. When the current
config is the pinned one, it says so and times nothing. ``panel.unpin()`` clears. The same
per-line difference goes beside the code, in the editor gutter: :mod:`~.compare_gutter`.
"""

from __future__ import annotations

import threading
from html import escape
from typing import Any

import ipywidgets as w
import numpy as np
from bokeh.models import ColumnDataSource, Range1d
from bokeh.plotting import figure

from jupyter_ktune.measure.compare import Comparison, static_diff
from jupyter_ktune.space import Config
from jupyter_ktune.tuning.compare import compare_configs
from jupyter_ktune.ui.compare_gutter import CompareGutter
from jupyter_ktune.ui.panels import central
from jupyter_ktune.ui.units import time_unit

A_COLOUR, B_COLOUR = "#4c72b0", "#dd8452"
NOTHING_PINNED = ("<div class='ktune-compare-status' style='color:#57606a'>Nothing pinned: "
                  "press <b>Pin</b> to keep the current config as the baseline, then move a "
                  "slider; this tab compares the current config with it.</div>")
_GREY = "color:#57606a"


def _cfg(c: Any) -> str:
    return f"<code>{escape(Config(c).label())}</code>"


def _num(v: Any) -> str:
    if isinstance(v, float) and not float(v).is_integer():
        return f"{v:.3g}"
    return f"{int(v):,}" if isinstance(v, (int, float)) else escape(str(v))


def static_table(diff: dict[str, tuple[Any, Any, Any]], note: str = "") -> str:
    """A | B | change per static figure; changed rows marked (``ktune-diff-changed``)."""
    if not diff:
        return f"<div style='{_GREY}'>Static reports: {escape(note or 'none to compare')}.</div>"
    rows = []
    for name, (a, b, d) in diff.items():
        changed = d != 0
        arrow = "" if not changed else ("▲ +" if d > 0 else "▼ ")
        style = " style='background:#fff8c5;font-weight:bold'" if changed else ""
        cls = "ktune-diff-changed" if changed else "ktune-diff-same"
        rows.append(f"<tr class='{cls}'{style}><td>{escape(name)}</td><td>{_num(a)}</td>"
                    f"<td>{_num(b)}</td><td>{arrow}{_num(d) if changed else '='}</td></tr>")
    tail = f"<div style='{_GREY}'>{escape(note)}</div>" if note else ""
    return ("<table class='ktune-static-diff' style='font-size:12px'><tr><th>static</th>"
            "<th>A (pinned)</th><th>B (current)</th><th>B - A</th></tr>" + "".join(rows)
            + "</table>" + tail)


def lines_table(cmp: Comparison, top: int = 8) -> str:
    """The lines whose stall samples moved most, with the stall reason that moved most."""
    if not cmp.lines_diff:
        return f"<div style='{_GREY}'>Per-line stalls: {escape(cmp.lines_note)}.</div>"
    ranked = sorted(cmp.lines_diff.items(), key=lambda kv: -abs(kv[1]["samples"][2]))[:top]
    rows = []
    for line, d in ranked:
        sa, sb, ds = d["samples"]
        why = max(d["stalls"].items(), key=lambda kv: abs(kv[1][2]), default=None)
        reason = f"{escape(why[0])} {why[1][2]:+d}" if why else ""
        rows.append(f"<tr><td>{line}</td><td>{sa}</td><td>{sb}</td><td>{ds:+d}</td>"
                    f"<td>{reason}</td></tr>")
    return ("<table class='ktune-lines-diff' style='font-size:12px'><tr><th>cell line</th>"
            "<th>A samples</th><th>B samples</th><th>B - A</th><th>stall moved most</th></tr>"
            + "".join(rows) + "</table>")


def ratio_html(cmp: Comparison) -> str:
    """The ratio with its CI and verdict, and the method in small print."""
    if cmp.ratio is None or cmp.ci is None:
        return (f"<div class='ktune-compare-ratio' style='color:#cf222e'>No ratio: "
                f"{escape(cmp.reason)}</div>")
    lo, hi = cmp.ci
    colour = {"slower": "#cf222e", "faster": "#1a7f37"}.get(cmp.verdict, "#57606a")
    host = (" <small class='ktune-host-time' style='color:#9a6700'>host time (not GPU time)"
            "</small>" if cmp.host_time else "")
    # the method folded under its summary: written out, its ten lines pushed the two
    # distributions below the tab's height, where they needed a scroll to be seen
    return (f"<div class='ktune-compare-ratio'><b>B / A = {cmp.ratio:.3f}×</b> "
            f"<small>[{lo:.3f}, {hi:.3f}] 95% CI</small> <span style='color:{colour}'>B is "
            f"{escape(cmp.verdict)}</span>{host}<details class='ktune-compare-method' "
            f"style='{_GREY};font-size:11px'><summary>method: {cmp.rounds} interleaved "
            f"rounds, paired bootstrap CI</summary>{escape(cmp.method)}</details></div>")


class CompareView:
    """The Pin button and the Compare tab of one panel (``panel.compare_view``)."""

    def __init__(self, panel: Any):
        self.panel = panel
        self.pinned: Config | None = None
        self.comparison: Comparison | None = None
        self.breakdowns: dict[Config, Any] = {}  # cycle breakdowns seen, per config
        self.pin_button = w.Button(description="Pin", icon="thumb-tack",
                                   tooltip="keep the current config as the baseline: the "
                                           "Compare tab shows the current config against it",
                                   layout=w.Layout(width="80px"))
        self.pin_button.on_click(lambda _b: self.pin())
        self.unpin_button = w.Button(description="Unpin",
                                     layout=w.Layout(width="80px", flex="0 0 auto"),
                                     disabled=True)
        self.unpin_button.on_click(lambda _b: self.unpin())
        # in the tab's scrolling column nothing may shrink: a flex item squeezed to 0 px hid
        # the status and the ratio above a tall static table (seen in the Galata screenshot)
        keep = {"flex": "0 0 auto"}
        self.status = w.HTML(NOTHING_PINNED)
        self.ratio = w.HTML(layout=w.Layout(**keep))
        self.static = w.HTML(layout=w.Layout(**keep))
        self.lines = w.HTML(layout=w.Layout(**keep))
        self.a_src = ColumnDataSource({"left": [], "right": [], "top": []})
        self.b_src = ColumnDataSource({"left": [], "right": [], "top": []})
        f = figure(height=230, title="interleaved runs: A pinned, B current",
                   x_range=Range1d(0, 1), y_range=Range1d(0, 1), x_axis_label="time",
                   y_axis_label="runs", toolbar_location=None)
        for src, colour, label in ((self.a_src, A_COLOUR, "A pinned"),
                                   (self.b_src, B_COLOUR, "B current")):
            f.quad(left="left", right="right", top="top", bottom=0, source=src, color=colour,
                   fill_alpha=0.45, line_alpha=0.8, legend_label=label)
        f.legend.label_text_font_size = "8pt"
        f.legend.orientation = "horizontal"
        f.add_layout(f.legend[0], "above")  # beside the title, never over the bars
        # hidden until there is a comparison to draw: empty axes say nothing (the line of text
        # above says why there is none)
        f.visible = False
        self.fig = f
        self.head = w.VBox([w.HBox([self.status, self.unpin_button]), self.ratio],
                           layout=w.Layout(**keep))
        self._want: tuple[Config, Config] | None = None
        self._busy = False
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None
        self.gutter = CompareGutter(self)  # the per-line difference in the editor gutter
        panel.session.subscribe(self._delivered)

    # -- the API the panel exposes -----------------------------------------------------------
    def pin(self) -> Config:
        """Keep the config shown as the baseline A; returns it."""
        r = self.panel.result
        if r is None:
            raise ValueError("[ktune] nothing to pin yet: no config has run")
        self.pinned = Config(r.config)
        self.unpin_button.disabled = False
        self.pin_button.description = "Re-pin"
        self._follow(r)
        return self.pinned

    def unpin(self) -> None:
        """Forget the baseline; the tab says nothing is pinned."""
        with self._cv:
            self.pinned, self._want, self.comparison = None, None, None
        self.unpin_button.disabled = True
        self.pin_button.description = "Pin"
        self.status.value = NOTHING_PINNED
        self.ratio.value = self.static.value = self.lines.value = ""
        self._histograms(None)
        self.gutter.update()

    def wait_idle(self, timeout: float = 120.0) -> bool:
        """Block until no comparison is pending or running (tests, notebooks)."""
        with self._cv:
            return self._cv.wait_for(lambda: self._want is None and not self._busy, timeout)

    # -- following the current config --------------------------------------------------------
    def _delivered(self, d: Any) -> None:
        if d.current and self.pinned is not None:
            self._follow(d.result)

    def _follow(self, current: Any) -> None:
        a, b = self.pinned, Config(current.config)
        if a is None:
            return
        self.note_breakdown()
        self.gutter.update(current)
        pinned = self.panel.results.get(a)
        diff, note = static_diff(getattr(pinned, "static", None), current.static)
        self.static.value = static_table(diff, note)
        if a == b:
            with self._cv:
                self._want = None
            self.status.value = (f"<div class='ktune-compare-status ktune-compare-same'>The "
                                 f"current config is the pinned one ({_cfg(a)}): move a slider "
                                 "to compare another config with it.</div>")
            self.ratio.value = self.lines.value = ""
            self._histograms(None)
            return
        if self.panel.session.worker is None:  # a replay of saved results
            self.status.value = ("<div class='ktune-compare-status'>A replay of saved results: "
                                 "nothing runs here, so nothing is timed again.</div>")
            return
        self.status.value = (f"<div class='ktune-compare-status'>A (pinned) {_cfg(a)} against "
                             f"B (current) {_cfg(b)}: <i>timing both, interleaved …</i></div>")
        with self._cv:
            self._want = (a, b)
            self._cv.notify_all()
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="ktune-compare",
                                                daemon=True)
                self._thread.start()

    def note_breakdown(self) -> None:
        """Keep the panel's last cycle breakdown under the config it was traced for."""
        bd = self.panel.breakdown
        config = getattr(bd, "last_config", None)
        if config is not None and bd.last is not None:
            self.breakdowns[Config(config)] = bd.last

    def _serve(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._want is not None)
                want, self._busy = self._want, True
                self._want = None
            try:
                self.panel.session.wait_idle()  # a drag in progress: its runs first
                with self._cv:
                    if self._want is not None:  # a newer pair came meanwhile
                        continue
                a, b = want
                self.note_breakdown()
                cmp = compare_configs(self.panel.session.spec, self.panel.session.worker, a, b,
                                      results=dict(self.panel.results),
                                      breakdowns=dict(self.breakdowns))
                with self._cv:
                    fresh = self._want is None and self.pinned == a
                if fresh:
                    self.show(cmp)
            except Exception as exc:  # noqa: BLE001 - shown in the tab, never raised
                self.ratio.value = (f"<div class='ktune-compare-ratio' style='color:#cf222e'>"
                                    f"The comparison failed: {escape(str(exc))}</div>")
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()

    # -- drawing -----------------------------------------------------------------------------
    def show(self, cmp: Comparison) -> None:
        """Draw a comparison: status, ratio, overlaid runs, static and per-line differences."""
        self.comparison = cmp
        self.status.value = (f"<div class='ktune-compare-status'>A (pinned) {_cfg(cmp.a)} "
                             f"against B (current) {_cfg(cmp.b)}</div>")
        self.ratio.value = ratio_html(cmp)
        self.static.value = static_table(dict(cmp.static_diff), cmp.static_note)
        self.lines.value = lines_table(cmp)
        self._histograms(cmp)

    def _histograms(self, cmp: Comparison | None) -> None:
        empty: dict[str, list] = {"left": [], "right": [], "top": []}
        if cmp is None or not cmp.a_times_ms.size or not cmp.b_times_ms.size:
            self.a_src.data, self.b_src.data = dict(empty), dict(empty)
            self.fig.visible = False
            return
        self.fig.visible = True
        a, _ = central(cmp.a_times_ms)
        b, _ = central(cmp.b_times_ms)
        unit, size = time_unit(np.concatenate([a, b]).tolist())
        edges = np.histogram_bin_edges(np.concatenate([a, b]) / size, bins=30)
        tops = []
        for src, runs in ((self.a_src, a), (self.b_src, b)):
            counts, _e = np.histogram(runs / size, bins=edges)
            src.data = {"left": edges[:-1].tolist(), "right": edges[1:].tolist(),
                        "top": counts.tolist()}
            tops.append(int(counts.max()))
        pad = (edges[-1] - edges[0]) * 0.05 or 1.0
        self.fig.x_range.start, self.fig.x_range.end = edges[0] - pad, edges[-1] + pad
        self.fig.y_range.start, self.fig.y_range.end = 0, max(tops) * 1.15 + 1
        host = ", host time" if cmp.host_time else ""
        self.fig.xaxis.axis_label = f"time per run ({unit}{host})"


class Pinning:
    """``pin``, ``unpin`` and ``compare`` of :class:`~jupyter_ktune.ui.app.KernelPanel` (a mixin:
    the panel holds a :class:`CompareView` as ``compare_view``)."""

    compare_view: CompareView

    def pin(self) -> Config:
        """Keep the current config as the baseline: the Compare tab shows the current config
        against it from now on (as the Pin button does). Returns the pinned config."""
        return self.compare_view.pin()

    def unpin(self) -> None:
        """Clear the baseline."""
        self.compare_view.unpin()

    @property
    def pinned(self) -> Config | None:
        """The pinned config, or None."""
        return self.compare_view.pinned

    def compare(self, a: Any = None, b: Any = None, *, rounds: int | None = None) -> Comparison:
        """Config ``b`` against config ``a`` (defaults: the pinned config and the current one)
        from interleaved re-runs: a :class:`~jupyter_ktune.measure.compare.Comparison` with
        ``ratio`` (median B / median A), ``ci`` (95 %), ``method``, ``static_diff`` and
        ``lines_diff``. Waits for it; the Compare tab is not changed."""
        view = self.compare_view
        current = view.panel.result
        a = view.pinned if a is None else a
        b = (Config(current.config) if current is not None else None) if b is None else b
        if a is None or b is None:
            raise ValueError("[ktune] compare(a, b) needs two configs: pin one first, or pass "
                             "both")
        view.note_breakdown()
        kw = {} if rounds is None else {"rounds": rounds}
        session = view.panel.session
        return compare_configs(session.spec, session.worker, a, b,
                               results=dict(view.panel.results),
                               breakdowns=dict(view.breakdowns), **kw)
