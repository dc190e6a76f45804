"""The Compare tab and its Pin button (:mod:`jupyter_ktune.ui.compare_view`).

The view also answers for the panel's ``pin()``, ``unpin()``, ``pinned`` and ``compare()``
(:class:`~jupyter_ktune.ui.compare_view.Pinning`), so the panel itself knows nothing of pinning.
"""

from __future__ import annotations

from typing import Any

from jupyter_ktune.ui.compare_view import CompareView, Pinning
from jupyter_ktune.ui.sections import box, figures
from jupyter_ktune.ui.views.base import View


class CompareTab(View, Pinning):
    """``panel.compare_view`` and the pinning API; the tab shows the current config against
    the pinned one: both run-time distributions from interleaved runs, the ratio with its CI,
    the static and per-line differences."""

    title = "Compare"
    exports = ("compare_view", "pin", "unpin", "pinned", "compare")

    def __init__(self, panel: Any) -> None:
        super().__init__(panel)
        self.compare_view = CompareView(panel)

    def actions(self) -> list[Any]:
        return [self.compare_view.pin_button]

    def widget(self) -> Any:
        v = self.compare_view
        plots = figures(self.panel, [v.fig])
        return box([v.head, plots, v.static, v.lines], scroll=True), plots
