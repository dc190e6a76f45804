"""The Report tab: the result card (status, timing method, launch, static report, provenance).

The card is the one view that changes when a static report arrives after its result (a late
delivery), and the tab the panel opens on when nothing can run here: the compiler's report is
then all there is to see.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as w

from jupyter_ktune.render import run_result_html
from jupyter_ktune.results import RunResult
from jupyter_ktune.ui.sections import box
from jupyter_ktune.ui.views.base import PanelState, View


class ReportTab(View):
    """``panel.card``: the current result's card as HTML."""

    title = "Report"
    exports = ("card",)

    def __init__(self, panel: Any) -> None:
        super().__init__(panel)
        self.card = w.HTML()

    def widget(self) -> Any:
        return box([self.card], scroll=True)

    def show(self, result: RunResult) -> None:
        self.card.value = run_result_html(result)

    def complete(self, result: RunResult) -> None:
        self.card.value = run_result_html(result)

    def adapt(self, state: PanelState) -> None:
        if not state.ran and state.results == 1:  # the static report is what there is
            self.panel.tabs.select(self.title)
