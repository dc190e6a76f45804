"""The Timing tab, the panel's first: the current variant's run times and every result's median.

A variant without timing (compile error, timeout) shows its reason where the two figures were,
so the first screen says why there is nothing to plot. Its figures also head the panel's static
snapshot, in the same single time unit (issue 35).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

import ipywidgets as w

from jupyter_ktune.results import RunResult, Status
from jupyter_ktune.space import Config
from jupyter_ktune.ui.panels import TimingPanel
from jupyter_ktune.ui.sections import TIMING_H, box, figures
from jupyter_ktune.ui.snapshot import timing_figures
from jupyter_ktune.ui.views.base import PanelState, View


def no_plots_html(r: RunResult) -> str:
    """What stands where the timing plots were when the current variant has no timing."""
    if r.status is Status.CANNOT_RUN:
        return ("<div style='color:#57606a'>Nothing timed for "
                f"<code>{escape(Config(r.config).label())}</code>: {escape(r.status.value)}."
                "</div>")
    reason = (r.reason or "").strip() or "no reason was given"
    return (f"<div class='ktune-failed' style='border-left:3px solid #cf222e;padding:2px 8px'>"
            f"<b>{escape(r.status.value)}</b> for <code>{escape(Config(r.config).label())}"
            "</code>: nothing to plot.<pre style='white-space:pre-wrap;overflow-wrap:anywhere;"
            f"max-height:330px;overflow:auto;margin:4px 0 0;font-size:12px'>{escape(reason)}"
            "</pre></div>")


class TimingTab(View):
    """``panel.timing`` (the figures' data), ``panel.timing_plots`` (their widget) and
    ``panel.no_plots`` (the reason shown instead when the current variant was not timed)."""

    title = "Timing"
    exports = ("timing", "timing_plots", "no_plots")

    def __init__(self, panel: Any) -> None:
        super().__init__(panel)
        self.timing = TimingPanel()
        # where the plots were, when the current variant failed (or nothing can run here)
        self.no_plots = w.HTML(layout=w.Layout(display="none"))
        self.no_plots.add_class("ktune-no-plots")
        self.timing_plots: Any = None

    def widget(self) -> Any:
        self.timing_plots = figures(self.panel, list(self.timing.figures), TIMING_H)
        return box([self.no_plots, self.timing_plots]), self.timing_plots

    def add(self, result: RunResult, kind: str) -> None:
        self.timing.add(result, kind)

    def show(self, result: RunResult) -> None:
        self.timing.show_current(result)

    def adapt(self, state: PanelState) -> None:
        r = state.current
        self.timing_plots.layout.display = "none" if state.failed else None
        self.no_plots.layout.display = None if state.failed else "none"
        self.no_plots.value = no_plots_html(r) if state.failed and r is not None else ""

    def snapshot(self, current: RunResult, history: Sequence[RunResult]) -> list[str]:
        return timing_figures(current, history)
