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

from jupyter_ktune.render import counted, fmt_time
from jupyter_ktune.results import RunResult
from jupyter_ktune.session import quiet_prefetch
from jupyter_ktune.tuning.report import TuneReport
from jupyter_ktune.tuning.search import DEFAULT_STRATEGY, STRATEGIES
from jupyter_ktune.tuning.sweep import Progress, Sweep, TuneOptions

#: why the sweep's running "best" and the report's winner can differ
RETIMED_NOTE = ("The running 'best' is the fastest first measurement; the winner is the best after "
                "the top candidates are timed again, and the badge shows the winner run once "
                "more after the sweep (with its full static report), so the three can differ.")


#: the Autotune button's tooltip while it can run
AUTOTUNE_TIP = "Sweep the space with the strategy and budget above; results stream into the views"


def progress_text(p: Progress) -> str:
    """``12/64 · ETA 0:41 · best BLOCK=256: 12.3 µs (first timing)`` with a scaled unit."""
    s = int(p.eta_s or 0)
    eta = "" if p.eta_s is None else f" · ETA {s // 60}:{s % 60:02d}"
    best = "" if p.best is None or p.best.median_ms is None else \
        f" · best so far {p.best.config.label()}: {fmt_time(p.best.median_ms)} (first timing)"
    stage = (f" · re-timing the top candidates {p.retimed[0]}/{p.retimed[1]}"
             if p.stage == "final" else "")
    return f"{p.done}/{p.total}{eta}{best}{stage}"


def summary_lines(report: TuneReport) -> list[str]:
    """Return the report's summary lines, the best one with a scaled unit (``27.4 ms``, not µs)."""
    lines = report.summary().splitlines()
    best = report.best
    if best is not None and best.median_ms is not None:
        retimed = (f"  best {best.config.label()}: {fmt_time(best.median_ms)} median "
                   f"({counted(best.times_ms.size, 'run')}, re-timed in the sweep)")
        lines = [retimed if ln.startswith("  best ") else ln for ln in lines]
    return lines


def summary_html(report: TuneReport, live: RunResult | None = None) -> str:
    """One line with the winner, the whole summary folded under it (the column stays short).

    The winner's figure is the sweep's re-timing; the badge shows the winner run again live
    once the sweep is over. ``live`` is that run: the line then gives both, each named, so the
    summary and the badge never show two numbers for one config without saying why (issue 35).
    """
    lines = summary_lines(report) + [RETIMED_NOTE]
    best = report.best
    head = (f"{counted(len(report.evaluations), 'config')} · best {best.config.label()}: "
            f"{fmt_time(best.median_ms)} re-timed in the sweep" if best is not None
            and best.median_ms else lines[0])
    if best is not None and best.median_ms and live is not None and live.median_ms:
        change = live.median_ms / best.median_ms - 1
        head += (f" · run again live (the badge): {fmt_time(live.median_ms)} "
                 f"({change:+.1%})")
    return ("<details class='ktune-sweep-summary' style='font-size:12px;line-height:1.35;"
            "white-space:normal;overflow-wrap:anywhere'><summary>"
            f"{html.escape(head)}</summary>"
            + "<br>".join(html.escape(t) for t in lines) + "</details>")


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
        count = panel.session.spec.space.count(panel.session.limits)  # never lists the space
        n = count.n
        self.strategy = w.Dropdown(options=sorted(STRATEGIES), value=DEFAULT_STRATEGY,
                                   description="strategy", layout=w.Layout(width="220px"))
        self.budget = w.BoundedIntText(value=min(n, 64), min=1, max=max(n, 1),
                                       description="budget", layout=w.Layout(width="160px"))
        self.start_button = w.Button(description="Autotune", button_style="primary", icon="play",
                                     tooltip=AUTOTUNE_TIP)
        self.stop_button = w.Button(description="Stop", icon="stop", disabled=True)
        self.bar = w.IntProgress(value=0, min=0, max=1, layout=w.Layout(width="360px"))
        self.label = w.HTML(f"<small>{count.text()}</small>",
                            layout=w.Layout(width="370px"))
        self.start_button.on_click(lambda _b: self.start())
        self.stop_button.on_click(lambda _b: self.stop())
        self.box = w.VBox([w.HBox([self.strategy, self.budget]),
                           w.HBox([self.start_button, self.stop_button]), self.bar, self.label])
        self.sweep: Sweep | None = None
        self.thread: threading.Thread | None = None
        self.report: TuneReport | None = None
        self.error: Exception | None = None  # what ended the last sweep, for run()
        self.on_done: Callable[[Any], None] | None = None
        # the winner's live run after a sweep: the summary names it beside the re-timing
        self._awaiting_live = False
        panel.session.subscribe(self._delivered)

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
        # no panel compiles neighbours in the worker while it sweeps: the sweep's requests
        # would wait behind each (the winner's run, a request, starts them again)
        quiet_prefetch()
        self.thread = threading.Thread(target=self._run, name="ktune-autotune", daemon=True)
        self.thread.start()
        return self.sweep

    def run(self, strategy: str | None = None, budget: int | None = None,
            options: TuneOptions | None = None) -> TuneReport:
        """Run a sweep as :meth:`start` does and wait for its report; its error is raised.

        An Interrupt stops the sweep and abandons the variant it is timing: a hanging one held
        the panel's next request for its time limit (issue 34); its result is a crash that
        the next sweep runs again."""
        if self.thread is not None and self.thread.is_alive():
            raise RuntimeError("[ktune] a sweep is already running in this panel: wait for it "
                               "or press Stop")
        self.start(strategy, budget, options)
        assert self.thread is not None
        try:
            self.thread.join()
        except BaseException:
            self.stop()
            self.panel.session.worker.abandon()
            raise
        if self.error is not None:
            raise self.error
        return self.report

    def stop(self) -> None:
        """Stop the running sweep after the results in flight."""
        if self.sweep is not None:
            self.sweep.stop()
            self.label.value = "<small>stopping …</small>"

    def enable(self, can_run: bool, why: str = "") -> None:
        """Allow sweeps, or disable the button and say why (nothing can run here)."""
        running = self.thread is not None and self.thread.is_alive()
        self.start_button.disabled = running or not can_run
        self.start_button.tooltip = why if not can_run else AUTOTUNE_TIP
        if not can_run:
            self.label.value = f"<small class='ktune-autotune-off'>{html.escape(why)}</small>"
        elif "ktune-autotune-off" in self.label.value:
            self.label.value = ""

    def _progress(self, p: Progress) -> None:
        self.bar.max = max(p.total, 1)
        self.bar.value = p.done
        self.label.value = f"<small>{html.escape(progress_text(p))}</small>"
        self.panel.show_result(p.result.to_run_result(self.panel.session.spec.source_hash))

    def _delivered(self, d: Any) -> None:
        """The winner's live run arrived: name it beside the sweep's re-timing."""
        report = self.report
        if (not self._awaiting_live or not d.current or report is None or report.best is None
                or dict(d.result.config) != dict(report.best.config)):
            return
        self._awaiting_live = False
        self.label.value = summary_html(report, d.result)

    def _run(self) -> None:
        assert self.sweep is not None
        try:
            self.report = self.sweep.run()
            self.label.value = summary_html(self.report)
            best = self.report.best
            if best is not None and not self.report.stopped:
                self._awaiting_live = True
                self.panel.controls.set_values(dict(best.config))
        except Exception as exc:  # noqa: BLE001 - shown in the panel, not lost in a thread
            self.error = exc
            self.label.value = f"<small style='color:#cf222e'>{html.escape(str(exc))}</small>"
        finally:
            self.start_button.disabled, self.stop_button.disabled = False, True
            if self.on_done is not None:
                self.on_done(self.report)
