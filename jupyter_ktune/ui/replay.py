"""A panel over saved results: render a GPU run's panel on a machine without the GPU.

The docs' H200 screenshot is made here, in a browser on a CPU machine, from results measured
on the H200: on the GPU machine, :func:`save_panel` writes the panel's spec, limits, device
ceilings and every result delivered (JSON, :mod:`~jupyter_ktune.ui.panel_file`: loading a file
runs nothing from it, issue 34); here, :func:`load_panel` builds a
:class:`~jupyter_ktune.ui.app.KernelPanel` over a :class:`ReplaySession` that serves those
saved results. Sliders and heatmap taps then show the saved result of the config asked for (or
say it was not measured); nothing is compiled or run.

Examples
--------
>>> save_panel(p, "h200_gemm.panel.json")       # on the H200, after p.tune(...)  # doctest: +SKIP
>>> load_panel("h200_gemm.panel.json")          # here, as a cell's last line     # doctest: +SKIP
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from jupyter_ktune.results import RunResult, Status
from jupyter_ktune.session import Delivery
from jupyter_ktune.space import Config
from jupyter_ktune.ui import panel_file


def save_panel(panel: Any, path: str | Path) -> Path:
    """Write a live panel's spec, limits, history and current config to ``path``, with what
    each view adds (``View.saved``: the roofline's ceilings). JSON; the cell's inputs and
    reference functions are not saved: a replay runs nothing."""
    session = panel.session
    data = {"spec": session.spec, "limits": dict(session.limits)}
    for view in panel.views:
        data.update(view.saved())
    data.update({"history": list(panel.history),
                 "current": dict(panel.current.config) if panel.current is not None else None})
    return panel_file.dump(data, Path(path))


class ReplaySession:
    """The part of :class:`~jupyter_ktune.session.TuningSession` a panel uses, over saved results.

    ``request`` delivers the newest saved result of that config as current, or a
    ``cannot run`` result saying it was not measured; every request is answered at once.
    """

    def __init__(self, spec: Any, results: list[RunResult], limits: Mapping[str, Any]):
        self.spec, self.limits, self.worker = spec, dict(limits), None
        self.saved: dict[Config, RunResult] = {Config(r.config): r for r in results}
        self.history: list[Delivery] = []
        self._subscribers: list[Callable[[Delivery], None]] = []
        self._ticket = 0
        self._lock = threading.Lock()

    def subscribe(self, callback: Callable[[Delivery], None]) -> None:
        """Call ``callback(delivery)`` for every result served."""
        self._subscribers.append(callback)

    def request(self, values: Mapping[str, Any], violations: list[str] | None = None) -> int:
        """Serve the saved result of ``values`` (or a not-measured result) as current; the
        panel's check (``violations``) is not needed: nothing runs."""
        config = self.spec.space.config(values)
        with self._lock:
            self._ticket += 1
            r = self.saved.get(config) or RunResult(
                name=self.spec.name, backend=self.spec.backend, config=dict(config),
                status=Status.CANNOT_RUN, reason="not measured in the saved run")
            now = time.perf_counter()
            d = Delivery(r, self._ticket, True, now, now, precompiled=True)
            self.history.append(d)
        for cb in self._subscribers:
            cb(d)
        return d.ticket

    def violations(self, values: Mapping[str, Any]) -> list[str]:
        """Why a config is not allowed under the saved limits: the panel's one check per move."""
        return self.spec.space.violations(self.spec.space.config(values), self.limits)

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Return True: requests are served at once."""
        return True

    def wait_reports(self, timeout: float = 300.0) -> bool:
        """Return True: saved results have whatever report they were saved with."""
        return True

    def close(self) -> None:
        """Nothing to stop."""


def load_panel(path: str | Path) -> Any:
    """Build a KernelPanel over the results saved by :func:`save_panel` (display it in a cell).

    The file is read as data only; an older (pickled) file is one ``[ktune]`` line, never
    unpickled (:class:`~jupyter_ktune.ui.panel_file.PanelFileError`).
    """
    from jupyter_ktune.ui.app import KernelPanel

    data = panel_file.load(Path(path))
    history: list[RunResult] = data["history"]
    session = ReplaySession(data["spec"], history, data["limits"])
    start = data["current"] or (dict(history[-1].config) if history else None)
    start_config = session.spec.space.config(start or {})
    panel = KernelPanel(session, start_config, data.get("ceilings"))  # type: ignore[arg-type]
    current = panel.current
    for r in history:  # the saved history, in order, then the saved current config again
        panel.show_result(r)
    if current is not None:
        session.request(dict(current.config))
    return panel
