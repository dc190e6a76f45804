"""The live panel: controls, badge, Bokeh figures and the static report, wired to a session.

Layout: the numbers that matter first (badge: status, median with spread, the config shown, the
error if any; a banner when a move was refused), then controls on the left and the views in tabs
on the right, so the panel stays compact. The views are the registered ones
(:mod:`jupyter_ktune.ui.views`, in tab order: timing first; heatmap, roofline, swizzle map, the
result card with the static report, the cycle breakdown, the comparison); this module names
none of them, it calls their hooks (:class:`~jupyter_ktune.ui.views.base.View`). Every delivery
from the session goes to every view (the history, the heatmap); only the newest request's result
replaces what is shown as current, so a stale result never overwrites it. Views that need a
timed result stay hidden until there is one; actions that cannot work (Autotune before anything
compiled, a breakdown in a replay) are disabled and say why. When nothing can run here (no GPU),
a line says what can be done instead.

The panel's MIME bundle carries the widget view, the panel MIME type (its model id) and a static
snapshot of the current result as ``text/html`` (card and small SVG figures, no JavaScript).
The live panel keeps a copy of the snapshot in a hidden widget; the labextension writes it back
into the saved output whenever it changes, so a notebook reopened without a kernel shows the
config the user ended on (see :mod:`jupyter_ktune.ui.snapshot` and labextension/src/panel.ts).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from html import escape
from typing import Any

import ipywidgets as w

from jupyter_ktune.render import fmt_time, noise_note, run_result_text
from jupyter_ktune.results import RunResult, Status
from jupyter_ktune.session import Delivery, TuningSession
from jupyter_ktune.space import Config
from jupyter_ktune.tunable_values import value_text
from jupyter_ktune.tuning.report import TuneReport
from jupyter_ktune.tuning.sweep import TuneOptions
from jupyter_ktune.ui.autotune import AutotuneBar
from jupyter_ktune.ui.controls import Controls
from jupyter_ktune.ui.dock import PanelRoot, dock_button
from jupyter_ktune.ui.refusal import refusal_reasons
from jupyter_ktune.ui.sections import Tabs
from jupyter_ktune.ui.snapshot import MIME_TYPE, snapshot_page
from jupyter_ktune.ui.views import PanelState, View, registered

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
#: the snapshot widget is refreshed at most this often (seconds) during a drag
SNAPSHOT_EVERY_S = 0.5
#: statuses of a variant that never built (a timeout or runtime error had compiled)
NEVER_COMPILED = (Status.COMPILE_ERROR, Status.CANNOT_RUN, Status.NOT_ALLOWED)


def _badge(r: RunResult) -> str:
    """Status pill, median with IQR, the config shown, and the error's first line."""
    if r.status is Status.OK and r.verification is not None:
        colour, text = "#1a7f37", f"correct · max error {r.verification.max_abs_err:.3g}"
    elif r.status is Status.OK:
        colour, text = "#57606a", "not verified"
    else:
        colour, text = ("#cf222e" if r.status.failed else "#57606a"), r.status.value
    med = ""
    if r.measurement is not None:
        t = r.measurement.timing
        med = f" {fmt_time(t.median_ms)} <small>median · IQR {fmt_time(t.iqr_ms)}</small>"
        if "host time" in t.method:
            med += " <small>host time (not GPU)</small>"
        if noise_note(t):
            med += " <small style='color:#9a6700' title='" + escape(noise_note(t)) + \
                "'>⚠ noisy</small>"
    error = ""
    if r.reason and r.status is not Status.OK:
        first = r.reason.strip().splitlines()[0] if r.reason.strip() else ""
        error = (f"<div class='ktune-error' style='color:#cf222e;white-space:pre-wrap;"
                 f"margin-top:2px'>{escape(first)}</div>")
    cfg = " ".join(f"{k}={value_text(v)}" for k, v in r.config.items())
    return (f"<div class='ktune-badge' style='line-height:1.6'><span style='background:{colour};"
            f"color:white;border-radius:10px;padding:2px 10px'>{escape(text)}</span>"
            f"<b>{med}</b> <code class='ktune-shown'>{escape(cfg)}</code>{error}</div>")


class KernelPanel:
    """One cell's live panel over a :class:`TuningSession`.

    What a notebook reads from it: :attr:`result` (the current RunResult, the one shown),
    :attr:`history` (every result delivered, in order) and :meth:`tune` (a sweep, as the
    Autotune button runs it, returning the TuneReport); the views answer for more (``pin``,
    ``unpin``, ``pinned`` and ``compare`` of the Compare tab; ``heatmap``, ``roofline``, ...:
    each view's ``exports``).

    Examples
    --------
    >>> p = get_ipython().run_cell_magic("kernel", "scale -o p ...", SRC)  # doctest: +SKIP
    >>> p.result.median_ms, p.result.config                                 # doctest: +SKIP
    >>> report = p.tune("exhaustive", budget=16); report.counts              # doctest: +SKIP

    ``latencies`` records, per delivery, the seconds from the control change to the panel's
    data being updated, for the latency benchmark (bench/panel_latency.py).
    """

    def __init__(self, session: TuningSession, start: Config,
                 ceilings: Mapping[str, Any] | None = None):
        self.session = session
        #: the device's measured peaks the panel was made with (None: not measured yet)
        self.ceilings = ceilings
        space = session.spec.space
        self.results: dict[Config, RunResult] = {}
        self.current: RunResult | None = None
        self._history: list[RunResult] = []
        self.latencies: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._exports: dict[str, View] = {}
        self.controls = Controls(  # the one check per move: the session's (see Controls)
            space, start, session.violations, self._request,
            lambda v, why: refusal_reasons(space, space.config(v), session.limits, why))
        self.badge = w.HTML(layout=w.Layout(min_height="30px"))  # "running …" is one line too
        # the first config runs while the views are built (0.4-0.7 s of Bokeh figures on an
        # H100 host, issue 33); what it delivers meanwhile waits in _early for them
        self._early: list[Delivery] | None = []
        session.subscribe(self._deliver_when_built)
        self._request(self.controls.values)
        self.autotune = AutotuneBar(self)  # issue 7: sweeps with a progress bar
        self.cannot_run = w.HTML(layout=w.Layout(display="none"))
        # stands in the views that need a timed result (needs_timing) until there is one
        self.no_results = w.HTML("<small style='color:#57606a'>No timed result yet: the views "
                                 "fill in when a config runs.</small>")
        #: one instance of every registered view, in tab order
        self.views: list[View] = []
        for view_class in registered():
            view = view_class(self)
            self.views.append(view)
            for name in view_class.exports:  # later views may read earlier views' exports
                if name in self._exports or name in dir(type(self)) or name in vars(self):
                    raise ValueError(f"[ktune] view {view_class.title!r} exports {name!r}, "
                                     "which the panel already has")
                self._exports[name] = view
        self.tabs = Tabs(self, self.views)
        self.snapshot = w.HTML(layout=w.Layout(display="none"))
        self.snapshot.add_class("ktune-snapshot-src")  # copied into the saved output (panel.ts)
        self.root = PanelRoot(dock_title=f"ktune: {session.spec.name}")
        self.dock_button = dock_button(self.root)
        actions = [b for v in self.views if v.actions_before_dock for b in v.actions()]
        actions += [self.dock_button]
        actions += [b for v in self.views if not v.actions_before_dock for b in v.actions()]
        self.left = w.VBox([self.controls.box, self.autotune.box,
                            w.HBox(actions, layout=w.Layout(flex_flow="row wrap"))],
                           layout=w.Layout(width="390px", min_width="390px"))
        # narrow outputs: the tabs wrap below the controls rather than widen the output
        self.body = w.HBox([self.left, self.tabs.tab],
                           layout=w.Layout(flex_flow="row wrap", align_items="flex-start"))
        header = w.VBox([self.badge, self.controls.status, self.cannot_run])
        self.root.children = [header, self.body, self.snapshot]
        self.root.add_class("ktune-panel")
        self._snap_timer: threading.Timer | None = None
        self._snap_due = 0.0
        while True:  # in order: what arrives while these are shown waits behind them
            with self._lock:
                early = self._early
                self._early = [] if early else None
            if not early:
                break
            for d in early:
                self._deliver(d)

    def __getattr__(self, name: str) -> Any:
        """What a view exports (``panel.heatmap``, ``panel.pin``), read from that view."""
        exports = self.__dict__.get("_exports")
        if exports is None or name not in exports:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(exports[name], name)

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *self.__dict__.get("_exports", {})})

    # -- wiring ------------------------------------------------------------------------------
    def _request(self, values: Mapping[str, Any]) -> None:
        self.badge.value = ("<div class='ktune-badge' style='line-height:1.6'><i>running "
                            f"{escape(Config(values).label())} …</i></div>")
        self.session.request(values, self.controls.outcome(values))  # checked: not again

    def _deliver_when_built(self, d: Delivery) -> None:
        with self._lock:
            if self._early is not None:  # the views are still being built
                self._early.append(d)
                return
        self._deliver(d)

    def _deliver(self, d: Delivery, kind: str | None = None) -> None:
        r = d.result
        if d.late:  # a result delivered before, now with its static report: replace it
            self._complete(r)
            return
        with self._lock:
            self.results[Config(r.config)] = r
            self._history.append(r)
            for view in self.views:
                view.add(r, kind or ("current" if d.current else "stale"))
            if d.current:
                self.current = r
                self.badge.value = _badge(r)
                for view in self.views:
                    view.show(r)
                self.controls.showing(Config(r.config).label())
                self._adapt()
                self._snapshot_soon()
            spent = r.measurement.timing.device_ms_total if r.measurement else 0.0
            self.latencies.append({"ticket": d.ticket, "current": d.current,
                                   "precompiled": d.precompiled, "status": r.status.value,
                                   "delivered_s": d.latency_s,
                                   "panel_s": time.perf_counter() - d.requested_at,
                                   "device_ms": spent, "phases_ms": dict(r.phases_ms)})

    def _complete(self, r: RunResult) -> None:
        """Put ``r`` where the same request's result without its static report is."""
        with self._lock:
            config = Config(r.config)
            for i in range(len(self._history) - 1, -1, -1):
                old = self._history[i]
                if old.static_pending and Config(old.config) == config:
                    self._history[i] = r
                    break
            if self.results.get(config) is not None and self.results[config].static_pending:
                self.results[config] = r
            if self.current is not None and self.current.static_pending \
                    and Config(self.current.config) == config:
                self.current = r
                for view in self.views:
                    view.complete(r)
                self._snapshot_soon()

    def _adapt(self) -> None:
        """Views and actions only where they can work; otherwise say why, where they were."""
        hist, r = self._history, self.current
        timed = any(h.status is Status.OK and h.measurement is not None for h in hist)
        state = PanelState(
            current=r, results=len(hist),
            ran=any(h.status is not Status.CANNOT_RUN for h in hist), timed=timed,
            compiled=any(h.status not in NEVER_COMPILED for h in hist),
            replay=self.session.worker is None,  # saved results: nothing runs here
            gpu=(r is not None and r.measurement is not None
                 and "host time" not in r.measurement.timing.method),
            failed=r is not None and r.measurement is None)
        self.controls.status.layout.display = None if self.controls.status.value else "none"
        self.no_results.layout.display = "none" if timed else None
        for view in self.views:
            if view.needs_timing and view.title in self.tabs.plots:
                self.tabs.plots[view.title].layout.display = None if timed else "none"
            view.adapt(state)
        if not state.ran:
            why = (r.reason or "").strip().splitlines()[0] if r is not None and r.reason else ""
            self.cannot_run.layout.display = None
            self.cannot_run.value = (
                "<div class='ktune-cannot-run' style='border-left:3px solid #57606a;padding:2px "
                "8px;color:#24292f'><b>Nothing can run here</b>: " + escape(why or "no device") +
                "<br>The static report (tab Report) comes from the compiler alone. To time the "
                "kernel, run the notebook on a machine with the backend's GPU; to skip the run, "
                "add <code>--static-only</code>.</div>")
            self.autotune.enable(False, "Autotune needs a device that can run the kernel.")
            return
        self.cannot_run.value = ""
        self.cannot_run.layout.display = "none"
        if state.replay:
            self.autotune.enable(False, "A replay of saved results: nothing runs here.")
        elif not state.compiled:
            self.autotune.enable(False, "No config of this cell has compiled yet: fix the error "
                                        "shown above, or move a slider to a config that builds.")
        else:
            self.autotune.enable(True)

    def _snapshot_soon(self) -> None:
        """Refresh the hidden snapshot now, or within SNAPSHOT_EVERY_S during a drag."""
        now = time.monotonic()
        if now >= self._snap_due:
            self._snap_due = now + SNAPSHOT_EVERY_S
            self.snapshot.value = self.snapshot_html()
        elif self._snap_timer is None or not self._snap_timer.is_alive():
            self._snap_timer = threading.Timer(self._snap_due - now, self._snapshot_late)
            self._snap_timer.daemon = True
            self._snap_timer.start()

    def _snapshot_late(self) -> None:
        with self._lock:
            self._snap_due = time.monotonic() + SNAPSHOT_EVERY_S
            self.snapshot.value = self.snapshot_html()

    def snapshot_html(self) -> str:
        """Render the static snapshot of what the panel shows now: the current card under
        every view's static figures (:meth:`View.snapshot`)."""
        current = self.current
        figures = [] if current is None else [
            svg for view in self.views for svg in view.snapshot(current, self._history)]
        return snapshot_page(current, self._history, figures)

    def dock(self, docked: bool = True) -> None:
        """Show the panel beside the notebook (``docked=False``: back under its cell).

        The labextension moves this panel's own view (not a copy) into a tab split to the right
        of the notebook in JupyterLab, or into the right side panel in Notebook 7, and leaves a
        line in the cell's output; closing the tab puts it back. The state is the widget's, so
        a reload brings the panel back docked, and a closed dock stays closed
        (:mod:`jupyter_ktune.ui.dock`). Needs the panel displayed in a live notebook.
        """
        self.root.docked = bool(docked)

    def show_result(self, result: RunResult, current: bool = False) -> None:
        """Add a result from elsewhere (an autotuning sweep) to the history and heatmap."""
        now = time.perf_counter()
        self._deliver(Delivery(result, 0, current, now, now, precompiled=True), "sweep")

    @property
    def result(self) -> RunResult | None:
        """The current result, after the pending request (if any) has been served, with its
        static report (one that follows the result waits for it, ``session.wait_reports``)."""
        self.session.wait_idle()
        self.session.wait_reports()
        return self.shown()

    def shown(self) -> RunResult | None:
        """The current result as the panel shows it now: once served, before any static
        report that follows it (the cell's output waits for this much only)."""
        self.session.wait_idle()
        with self._lock:
            return self.current

    @property
    def history(self) -> tuple[RunResult, ...]:
        """Every result delivered to the panel, oldest first.

        Live runs (stale ones included: each carries its own ``config``) and sweep results.
        """
        with self._lock:
            return tuple(self._history)

    def tune(self, strategy: str | None = None, budget: int | None = None, *,
             options: TuneOptions | None = None, **option_fields: Any) -> TuneReport:
        """Sweep the space as the Autotune button does, wait for it and return the report.

        Results stream into the panel while it runs; at the end the winner becomes the current
        config (so :attr:`result` is the winner, run live once more). Parameters are those of
        :func:`jupyter_ktune.tuning.tune`: ``strategy`` (None: the default), ``budget`` (configs;
        None: the Autotune budget box) and :class:`TuneOptions` or its fields as keywords.
        """
        opts = replace(options or TuneOptions(), **option_fields)
        report = self.autotune.run(strategy, budget, opts)
        self.session.wait_idle()
        return report

    # -- display -----------------------------------------------------------------------------
    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        self.tabs.displayed()  # views made for this output start from the current data
        view = self.root._repr_mimebundle_(include=include, exclude=exclude) or {}
        snapshot = self.snapshot_html()
        self.snapshot.value = snapshot
        bundle: dict[str, Any] = {"text/html": snapshot}
        if WIDGET_MIME in view:
            bundle[WIDGET_MIME] = view[WIDGET_MIME]
            bundle[MIME_TYPE] = {"version": 1, "model_id": view[WIDGET_MIME]["model_id"]}
        bundle["text/plain"] = (run_result_text(self.current) if self.current is not None
                                else "ktune panel")
        return bundle
