"""The Roofline tab: the current variant against the device's measured ceilings.

The ceilings come with the panel (``KernelPanel(..., ceilings)``) or later, once measured
(``panel.roofline.set_ceilings``, :mod:`jupyter_ktune.ui.start`); a saved panel keeps the ones
measured, so a replay elsewhere draws the same roof.
"""

from __future__ import annotations

from typing import Any

from jupyter_ktune.results import RunResult
from jupyter_ktune.ui.roofline import RooflinePanel
from jupyter_ktune.ui.sections import box, figures
from jupyter_ktune.ui.views.base import View


class RooflineTab(View):
    """``panel.roofline``: the figure, its ceilings and why no point is drawn."""

    title = "Roofline"
    needs_timing = True
    exports = ("roofline",)

    def __init__(self, panel: Any) -> None:
        super().__init__(panel)
        self.roofline = RooflinePanel(panel.ceilings)

    def widget(self) -> Any:
        plots = figures(self.panel, [self.roofline.fig])
        return box([self.panel.no_results, self.roofline.empty_note, plots]), plots

    def show(self, result: RunResult) -> None:
        self.roofline.show(result)

    def saved(self) -> dict[str, Any]:
        return {"ceilings": dict(self.roofline.ceilings)}
