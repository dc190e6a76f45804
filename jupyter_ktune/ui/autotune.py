"""The panel's Autotune controls: strategy, budget, a progress bar with ETA and best, Stop.

A sweep runs in a background thread over the session's own device worker and store; every
result streams into the panel's history and heatmap through :meth:`KernelPanel.show_result`. When
the sweep ends, the winner becomes the panel's current config (which runs it once more, live).
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ipywidgets as w

from jupyter_ktune.tune.report import TuneReport
from jupyter_ktune.tune.search import DEFAULT_STRATEGY, STRATEGIES
from jupyter_ktune.tune.sweep import Progress, Sweep, TuneOptions


class AutotuneBar:
    """Autotune button, progress bar and Stop button for one panel.

    Parameters
    ----------
    panel
        The :class:`~jupyter_ktune.ui.app.KernelPanel` (its session's spec and worker are used).
    store
        The store path (default: ``.ktune.sqlite`` in the notebook's folder).
    """

    def __init__(self, panel: Any, store: str | Path | None = None):
        self.panel, self.store = panel, store
        n = len(list(panel.session.spec.space.configs(panel.session.limits)))
        self.strategy = w.Dropdown(options=sorted(STRATEGIES), value=DEFAULT_STRATEGY,
                                   description="strategy", layout=w.Layout(width="220px"))
        self.budget = w.BoundedIntText(value=min(n, 64), min=1, max=max(n, 1),
                                       description="budget", layout=w.Layout(width="160px"))
        self.start_button = w.Button(description="Autotune", button_style="primary", icon="play")
        self.stop_button = w.Button(description="Stop", icon="stop", disabled=True)
        self.bar = w.IntProgress(value=0, min=0, max=1, layout=w.Layout(width="360px"))
        self.label = w.HTML(f"<small>{n} valid configs</small>")
        self.start_button.on_click(lambda _b: self.start())
        self.stop_button.on_click(lambda _b: self.stop())
        self.box = w.VBox([w.HBox([self.strategy, self.budget]),
                           w.HBox([self.start_button, self.stop_button]), self.bar, self.label])
        self.sweep: Sweep | None = None
        self.thread: threading.Thread | None = None
        self.report: TuneReport | None = None
        self.error: Exception | None = None  # what ended the last sweep, for run()
        self.on_done: Callable[[Any], None] | None = None

    def start(self, strategy: str | None = None, budget: int | None = None,
              options: TuneOptions | None = None) -> Sweep:
        """Start a sweep in a background thread (ignored while one is running).

        ``strategy`` and ``budget`` default to the dropdown and the budget box; given, they are
        checked and shown there.
        """
        if self.thread is not None and self.thread.is_alive():
            return self.sweep  # type: ignore[return-value]
        session = self.panel.session
        strategy = strategy or self.strategy.value
        budget = int(self.budget.value) if budget is None else budget
        self.sweep = Sweep(session.spec, strategy, budget, self.store,
                           workers=[session.worker], on_result=self._progress,
                           options=options or TuneOptions())  # raises on a bad name or budget
        self.strategy.value = strategy
        self.budget.value = min(budget, self.budget.max)
        self.bar.value, self.bar.max = 0, budget
        self.label.value = "<small>starting …</small>"
        self.start_button.disabled, self.stop_button.disabled = True, False
        self.report, self.error = None, None
        self.thread = threading.Thread(target=self._run, name="ktune-autotune", daemon=True)
        self.thread.start()
        return self.sweep

    def run(self, strategy: str | None = None, budget: int | None = None,
            options: TuneOptions | None = None) -> TuneReport:
        """Run a sweep as :meth:`start` does and wait for its report; its error is raised."""
        if self.thread is not None and self.thread.is_alive():
            raise RuntimeError("[ktune] a sweep is already running in this panel: wait for it "
                               "or press Stop")
        self.start(strategy, budget, options)
        assert self.thread is not None
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.report

    def stop(self) -> None:
        """Stop the running sweep after the results in flight."""
        if self.sweep is not None:
            self.sweep.stop()
            self.label.value = "<small>stopping …</small>"

    def _progress(self, p: Progress) -> None:
        self.bar.max = max(p.total, 1)
        self.bar.value = p.done
        self.label.value = f"<small>{html.escape(p.text())}</small>"
        self.panel.show_result(p.result.to_run_result(self.panel.session.spec.source_hash))

    def _run(self) -> None:
        assert self.sweep is not None
        try:
            self.report = self.sweep.run()
            text = self.report.summary().splitlines()
            self.label.value = "<small>" + "<br>".join(html.escape(t) for t in text) + "</small>"
            best = self.report.best
            if best is not None and not self.report.stopped:
                self.panel.controls.set_values(dict(best.config))
        except Exception as exc:  # noqa: BLE001 - shown in the panel, not lost in a thread
            self.error = exc
            self.label.value = f"<small style='color:#cf222e'>{html.escape(str(exc))}</small>"
        finally:
            self.start_button.disabled, self.stop_button.disabled = False, True
            if self.on_done is not None:
                self.on_done(self.report)
