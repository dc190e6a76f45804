"""The panel's tabs: one registration per view, in the order the tabs show.

The panel's first screen is the badge, the sliders and the first tab (the timing histogram and
the history); every other view waits in a tab of its own, so a panel stays under 600 px tall at
1280x800 however many views it has. The selected tab is the ``Tab`` widget's ``selected_index``,
synced state: it stays across slider moves (results update the views, never the tab bar) and
page reloads (the kernel's widget state is restored).

A new view is one module plus one registration here::

    @section("Occupancy")
    def occupancy(panel):
        return OccupancyView(panel).box   # or None: not for this panel

A builder may return ``(widget, bokeh_model)``: the panel re-sends that Bokeh model's document
when its tab is shown, so a figure built while hidden is laid out at its real size.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ipywidgets as w
from bokeh.layouts import column

from jupyter_ktune.ui.live_bokeh import LiveBokehModel

#: width of every figure in a tab (px): a tab of figures and the controls fit side by side at
#: 1280 px with JupyterLab's file browser open
FIG_W = 400
#: the timing tab's two figures are this tall each (px)
TIMING_H = 190
#: a tab's content never grows the panel past this (px); longer content scrolls inside it
TAB_MAX_H = 440


@dataclass(frozen=True)
class Section:
    """A tab of the panel: its title and the function that builds its content for a panel."""

    title: str
    build: Callable[[Any], Any]


SECTIONS: list[Section] = []


def section(title: str) -> Callable[[Callable[[Any], Any]], Callable[[Any], Any]]:
    """Register a view as a tab (in registration order)."""
    def register(build: Callable[[Any], Any]) -> Callable[[Any], Any]:
        SECTIONS.append(Section(title, build))
        return build
    return register


def _figures(p: Any, figs: list[Any], height: int | None = None) -> LiveBokehModel:
    for f in figs:
        f.width = FIG_W
        if height is not None:
            f.height = height
        f.tags = [p.tabs_tag]  # one panel's documents (one per tab) can be told apart by it
    return LiveBokehModel(column(*figs) if len(figs) > 1 else figs[0])


def _box(children: list[Any], scroll: bool = False) -> w.VBox:
    layout = w.Layout(max_height=f"{TAB_MAX_H}px", overflow="auto") if scroll else w.Layout()
    return w.VBox(children, layout=layout)


@section("Timing")
def timing(p: Any) -> tuple[w.Widget, LiveBokehModel]:
    """The current variant's run times and every result's median, or why there are none."""
    plots = _figures(p, list(p.timing.figures), TIMING_H)
    p.timing_plots = plots
    return _box([p.no_plots, plots]), plots


@section("Heatmap")
def heatmap(p: Any) -> tuple[w.Widget, LiveBokehModel]:
    """Best median per cell over two chosen tunables; a tap runs the config drawn."""
    plots = _figures(p, [p.heatmap.fig])
    return _box([w.HBox([p.axis_x, p.axis_y]), p.no_results, plots]), plots


@section("Roofline")
def roofline(p: Any) -> tuple[w.Widget, LiveBokehModel]:
    """The current variant against the device's measured ceilings."""
    plots = _figures(p, [p.roofline.fig])
    return _box([p.no_results, p.roofline.empty_note, plots]), plots


@section("Swizzle")
def swizzle(p: Any) -> tuple[w.Widget, LiveBokehModel] | None:
    """The shared-memory bank map of the cell's tile (``smem_tile``), or of the generic tile
    for a kernel with a swizzle tunable; it follows the sliders, with or without a device."""
    if not p.has_swizzle_map:
        return None
    plots = _figures(p, [p.swizzle.fig])
    return _box([plots]), plots


@section("Report")
def report(p: Any) -> w.Widget:
    """The result card: status, timing method, launch, static report, provenance."""
    return _box([p.card], scroll=True)


@section("Breakdown")
def breakdown(p: Any) -> w.Widget:
    """The cycle breakdown, filled by the Cycle breakdown button."""
    hint = w.HTML("<small style='color:#57606a'>Press <b>Cycle breakdown</b> to trace the "
                  "current variant's scopes (and per-line stalls where ncu works).</small>")
    return _box([hint, p.breakdown.box], scroll=True)


@section("Compare")
def compare(p: Any) -> tuple[w.Widget, LiveBokehModel]:
    """The current config against the pinned one (``ui.compare_view``): both run-time
    distributions from interleaved runs, the ratio with its CI, the static differences."""
    v = p.compare_view
    plots = _figures(p, [v.fig])
    return _box([v.head, plots, v.static, v.lines], scroll=True), plots


class Tabs:
    """The registered sections built for one panel, as an ipywidgets ``Tab``."""

    def __init__(self, panel: Any):
        #: tag of every figure of this panel (``ktune-panel-<hex>``)
        panel.tabs_tag = f"ktune-panel-{uuid.uuid4().hex[:12]}"
        titles, children = [], []
        self.plots: dict[str, LiveBokehModel] = {}
        for s in SECTIONS:
            built = s.build(panel)
            if built is None:
                continue
            widget, plots = built if isinstance(built, tuple) else (built, None)
            titles.append(s.title)
            children.append(widget)
            if plots is not None:
                self.plots[s.title] = plots
        self.titles = titles
        # as wide as its figures, so the tab bar never squeezes a title
        self.tab = w.Tab(children=children, titles=titles, selected_index=0,
                         layout=w.Layout(width=f"{FIG_W + 32}px", min_width=f"{FIG_W + 32}px"))
        self.tab.add_class("ktune-tabs")
        self.tab.observe(self._shown, names="selected_index")

    def select(self, title: str) -> None:
        """Show the tab called ``title``."""
        self.tab.selected_index = self.titles.index(title)

    def _shown(self, change: dict[str, Any]) -> None:
        i = change["new"]
        if i is not None and self.titles[i] in self.plots:
            self.plots[self.titles[i]].refresh()

    def displayed(self) -> None:
        """Views made from now on start from every figure's current data."""
        for plots in self.plots.values():
            plots.displayed()
