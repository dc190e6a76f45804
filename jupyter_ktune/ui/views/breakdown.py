"""The Breakdown tab and its "Cycle breakdown" button (:mod:`jupyter_ktune.ui.breakdown`).

The button traces warps on a GPU, so it is off, with the reason as its tooltip, for a replay of
saved results and for a result not timed on a GPU; pressing it brings its tab to the front.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as w

from jupyter_ktune.ui.breakdown import BreakdownButton
from jupyter_ktune.ui.sections import box
from jupyter_ktune.ui.views.base import PanelState, View


class BreakdownTab(View):
    """``panel.breakdown``: the button, its status line, figures and editor marks."""

    title = "Breakdown"
    actions_before_dock = True
    exports = ("breakdown",)

    def __init__(self, panel: Any) -> None:
        super().__init__(panel)
        self.breakdown = BreakdownButton(panel.session, lambda: panel.current)
        self.breakdown.button.on_click(lambda _b: panel.tabs.select(self.title))

    def actions(self) -> list[Any]:
        return [self.breakdown.button]

    def widget(self) -> Any:
        hint = w.HTML("<small style='color:#57606a'>Press <b>Cycle breakdown</b> to trace the "
                      "current variant's scopes (and per-line stalls where ncu works).</small>")
        return box([hint, self.breakdown.box], scroll=True)

    def adapt(self, state: PanelState) -> None:
        button = self.breakdown.button
        button.disabled = state.replay or not state.gpu  # it traces warps on the GPU
        button.tooltip = (
            "A replay of saved results: nothing runs here, so there is no cycle breakdown."
            if state.replay else "trace the current variant's scopes; per-line stalls from "
            "ncu where it works" if state.gpu else
            "The cycle breakdown traces warps on a GPU: not available for this result.")
