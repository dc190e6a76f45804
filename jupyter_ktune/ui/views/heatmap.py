"""The Heatmap tab: best median per cell over two chosen tunables; a tap runs the config drawn.

The two axis dropdowns sit above the figure; every delivery (live, stale or from a sweep) goes
into its cell, and the colour bar takes the panel's one time unit from the Timing view when
there is one (issue 35). The cells drawn also go into the panel's static snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as w

from jupyter_ktune.results import RunResult
from jupyter_ktune.ui.panels import HeatmapPanel
from jupyter_ktune.ui.sections import box, figures
from jupyter_ktune.ui.snapshot import heatmap_figures
from jupyter_ktune.ui.views.base import View


def default_axes(params: Any) -> tuple[str | None, str]:
    """The heatmap's first axes: the first two tunables that take more than one value.

    A tunable of one value (an attention cell's ``HEAD_DIM``, tied to its inputs) would make a
    heatmap of one row or column; declaration order decides among the rest, and a space with
    fewer than two such tunables falls back to the first names (y "-" for none).
    """
    names = [p.name for p in params]
    varied = [p.name for p in params if len(p.values) > 1]
    picks = varied + [n for n in names if n not in varied]
    return (picks[0] if picks else None), (picks[1] if len(picks) > 1 else "-")


class HeatmapTab(View):
    """``panel.heatmap`` (the figure and its cells) and ``panel.axis_x`` / ``panel.axis_y``."""

    title = "Heatmap"
    needs_timing = True
    # _tapped: what a tap on a cell calls (tests tap through it, as the browser does)
    exports = ("heatmap", "axis_x", "axis_y", "_tapped")

    def __init__(self, panel: Any) -> None:
        super().__init__(panel)
        space = panel.session.spec.space
        timing = getattr(panel, "timing", None)  # the Timing view's: one unit for the panel
        self.heatmap = HeatmapPanel(space.params,
                                    unit=timing.unit if timing is not None else None)
        names = list(space.names)
        first_x, first_y = default_axes(space.params)
        self.axis_x = w.Dropdown(options=names, value=first_x,
                                 description="heatmap x", layout=w.Layout(width="185px"),
                                 style={"description_width": "70px"})
        self.axis_y = w.Dropdown(options=["-", *names], value=first_y,
                                 description="y", layout=w.Layout(width="185px"),
                                 style={"description_width": "20px"})
        for d in (self.axis_x, self.axis_y):
            d.observe(lambda _c: self._set_axes(), names="value")
        self._set_axes()
        self.heatmap.source.selected.on_change("indices", self._tapped)

    def _set_axes(self) -> None:
        y = None if self.axis_y.value in ("-", self.axis_x.value) else self.axis_y.value
        if self.axis_x.value:
            self.heatmap.set_axes(self.axis_x.value, y, list(self.panel.results.values()))

    def _tapped(self, _attr: str, _old: Any, new: list[int]) -> None:
        if new:  # every tunable, so exactly the config drawn in the cell runs
            self.panel.controls.set_values(self.heatmap.config_at(new[0]))

    def widget(self) -> Any:
        plots = figures(self.panel, [self.heatmap.fig])
        return box([w.HBox([self.axis_x, self.axis_y]), self.panel.no_results, plots]), plots

    def add(self, result: RunResult, kind: str) -> None:
        self.heatmap.add(result)

    def snapshot(self, current: RunResult, history: Sequence[RunResult]) -> list[str]:
        return heatmap_figures(self.heatmap)
