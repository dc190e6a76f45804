"""The live panel: controls, badge, Bokeh figures and the static report, wired to a session.

Layout: controls and the correctness badge on the left, figures in a grid on the right, the
static report and the full result card below. Every delivery from the session updates the
history and the heatmap; only the newest request's result replaces what is shown as current,
so a stale result never overwrites it. Errors appear inside the panel as the result card.

The panel's MIME bundle carries the widget view and an HTML snapshot of the current result, so
a notebook saved and reopened without a kernel still shows the last numbers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import ipywidgets as w
from bokeh.layouts import gridplot

from jupyter_ktune.render import run_result_html, run_result_text
from jupyter_ktune.results import RunResult, Status
from jupyter_ktune.session import Delivery, TuningSession
from jupyter_ktune.space import Config
from jupyter_ktune.tune.report import TuneReport
from jupyter_ktune.tune.sweep import TuneOptions
from jupyter_ktune.ui.autotune import AutotuneBar
from jupyter_ktune.ui.breakdown import BreakdownButton
from jupyter_ktune.ui.controls import Controls
from jupyter_ktune.ui.live_bokeh import LiveBokehModel
from jupyter_ktune.ui.panels import HeatmapPanel, RooflinePanel, SwizzlePanel, TimingPanel

_SWIZZLE_NAMES = ("SWIZZLE", "SWIZZLE_MODE", "SMEM_SWIZZLE")


def _badge(r: RunResult) -> str:
    if r.status is Status.OK and r.verification is not None:
        colour, text = "#1a7f37", f"correct · max error {r.verification.max_abs_err:.3g}"
    elif r.status is Status.OK:
        colour, text = "#57606a", "not verified"
    else:
        colour, text = ("#cf222e" if r.status.failed else "#57606a"), r.status.value
    med = f" · {r.median_ms * 1e3:.2f} µs" if r.median_ms is not None else ""
    if med and r.measurement is not None and "host time" in r.measurement.timing.method:
        med += " host time (not GPU)"
    return (f"<span style='background:{colour};color:white;border-radius:10px;"
            f"padding:2px 10px'>{text}</span><b>{med}</b>")


class KernelPanel:
    """One cell's live panel over a :class:`TuningSession`.

    What a notebook reads from it: :attr:`result` (the current RunResult, the one shown),
    :attr:`history` (every result delivered, in order) and :meth:`tune` (a sweep, as the
    Autotune button runs it, returning the TuneReport).

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
        space = session.spec.space
        self.results: dict[Config, RunResult] = {}
        self.current: RunResult | None = None
        self._history: list[RunResult] = []
        self.latencies: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.controls = Controls(space, start, session.violations, self._request)
        self.badge = w.HTML()
        self.card = w.HTML()
        self.timing = TimingPanel()
        self.heatmap = HeatmapPanel(space.params)
        self.roofline = RooflinePanel(ceilings)
        self.swizzle = SwizzlePanel()
        names = list(space.names)
        self.axis_x = w.Dropdown(options=names, value=names[0] if names else None,
                                 description="heatmap x", layout=w.Layout(width="220px"))
        self.axis_y = w.Dropdown(options=["-", *names],
                                 value=names[1] if len(names) > 1 else "-",
                                 description="heatmap y", layout=w.Layout(width="220px"))
        for d in (self.axis_x, self.axis_y):
            d.observe(lambda _c: self._set_axes(), names="value")
        self._set_axes()
        self.heatmap.source.selected.on_change("indices", self._tapped)
        self._swizzle_param = next((n for n in _SWIZZLE_NAMES if n in names), None)
        self.swizzle_mode = w.Dropdown(
            options=["none", "32B", "64B", "128B"], description="swizzle map",
            value=str(start[self._swizzle_param]) if self._swizzle_param else "none",
            layout=w.Layout(width="220px"))
        self.swizzle_mode.observe(lambda c: self.swizzle.show(c["new"]), names="value")
        self.swizzle.show(self.swizzle_mode.value)
        figures = [*self.timing.figures, self.heatmap.fig, self.roofline.fig, self.swizzle.fig]
        self.plots = LiveBokehModel(gridplot([figures[:2], figures[2:4], figures[4:]],
                                         toolbar_location=None))
        self.breakdown = BreakdownButton(session, lambda: self.current)  # cycle breakdown
        self.autotune = AutotuneBar(self)  # issue 7: sweeps with a progress bar
        left = w.VBox([self.badge, self.controls.box, self.axis_x, self.axis_y,
                       self.swizzle_mode, self.breakdown.button, self.autotune.box],
                      layout=w.Layout(min_width="380px"))
        self.root = w.VBox([w.HBox([left, self.plots]), self.breakdown.box, self.card])
        session.subscribe(self._deliver)
        self._request(self.controls.values)

    # -- wiring ------------------------------------------------------------------------------
    def _request(self, values: Mapping[str, Any]) -> None:
        self.badge.value = "<i>running …</i>"
        self.session.request(values)

    def _set_axes(self) -> None:
        y = None if self.axis_y.value in ("-", self.axis_x.value) else self.axis_y.value
        if self.axis_x.value:
            self.heatmap.set_axes(self.axis_x.value, y, list(self.results.values()))

    def _tapped(self, _attr: str, _old: Any, new: list[int]) -> None:
        if new:
            self.controls.set_values(self.heatmap.config_at(new[0]))

    def _deliver(self, d: Delivery) -> None:
        r = d.result
        with self._lock:
            self.results[Config(r.config)] = r
            self._history.append(r)
            self.timing.add(r, d.current)
            self.heatmap.add(r)
            if d.current:
                self.current = r
                self.badge.value = _badge(r)
                self.card.value = run_result_html(r)
                self.timing.show_current(r)
                self.roofline.show(r)
                if self._swizzle_param:
                    self.swizzle_mode.value = str(r.config[self._swizzle_param])
            spent = r.measurement.timing.device_ms_total if r.measurement else 0.0
            self.latencies.append({"ticket": d.ticket, "current": d.current,
                                   "precompiled": d.precompiled, "status": r.status.value,
                                   "delivered_s": d.latency_s,
                                   "panel_s": time.perf_counter() - d.requested_at,
                                   "device_ms": spent, "phases_ms": dict(r.phases_ms)})

    def show_result(self, result: RunResult, current: bool = False) -> None:
        """Add a result from elsewhere (an autotuning sweep) to the history and heatmap."""
        now = time.perf_counter()
        self._deliver(Delivery(result, 0, current, now, now, precompiled=True))

    @property
    def result(self) -> RunResult | None:
        """The current result, after the pending request (if any) has been served."""
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
        :func:`jupyter_ktune.tune.tune`: ``strategy`` (None: the default), ``budget`` (configs;
        None: the Autotune budget box) and :class:`TuneOptions` or its fields as keywords.
        """
        opts = replace(options or TuneOptions(), **option_fields)
        report = self.autotune.run(strategy, budget, opts)
        self.session.wait_idle()
        return report

    # -- display -----------------------------------------------------------------------------
    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        self.plots.displayed()  # views made for this output start from the current data
        bundle = self.root._repr_mimebundle_(include=include, exclude=exclude) or {}
        snapshot = run_result_html(self.current) if self.current else "<i>ktune panel</i>"
        bundle.setdefault("text/html", snapshot)
        if self.current is not None:  # a terminal or a text-only view gets the one-line result
            bundle["text/plain"] = run_result_text(self.current)
        return bundle

