"""The panel's tabs: one per registered view (:mod:`jupyter_ktune.ui.views`), in its order.

The panel's first screen is the badge, the sliders and the first tab (the timing histogram and
the history); every other view waits in a tab of its own, so a panel stays under 600 px tall at
1280x800 however many views it has. The selected tab is the ``Tab`` widget's ``selected_index``,
synced state: it stays across slider moves (results update the views, never the tab bar) and
page reloads (the kernel's widget state is restored).

The sizes and the two helpers here (:func:`figures`, :func:`box`) are what every view's tab
shares, so that a tab of figures and the controls fit side by side.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
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


def figures(p: Any, figs: list[Any], height: int | None = None) -> LiveBokehModel:
    """The figures of a tab as one live Bokeh widget, at the tab's width (and ``height``)."""
    for f in figs:
        f.width = FIG_W
        if height is not None:
            f.height = height
        f.tags = [p.tabs_tag]  # one panel's documents (one per tab) can be told apart by it
    return LiveBokehModel(column(*figs) if len(figs) > 1 else figs[0])


def box(children: list[Any], scroll: bool = False) -> w.VBox:
    """A tab's column; ``scroll``: it never grows the panel past TAB_MAX_H, it scrolls."""
    layout = w.Layout(max_height=f"{TAB_MAX_H}px", overflow="auto") if scroll else w.Layout()
    return w.VBox(children, layout=layout)


class Tabs:
    """The views of one panel, each built into a tab of an ipywidgets ``Tab`` (a view whose
    ``widget()`` is None has no tab in this panel)."""

    def __init__(self, panel: Any, views: Sequence[Any]):
        #: tag of every figure of this panel (``ktune-panel-<hex>``)
        panel.tabs_tag = f"ktune-panel-{uuid.uuid4().hex[:12]}"
        titles, children = [], []
        self.plots: dict[str, LiveBokehModel] = {}
        for view in views:
            built = view.widget()
            if built is None:
                continue
            widget, plots = built if isinstance(built, tuple) else (built, None)
            titles.append(view.title)
            children.append(widget)
            if plots is not None:
                self.plots[view.title] = plots
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
