"""The panel's view protocol (issue 37): a new view is one class plus one registration.

A view defined here, and registered for one test only, must appear as a tab, receive every
result the fake backend delivers (each current one shown), add its figure to the
panel's static snapshot and its entry to a saved panel file; and ``ui/app.py`` must name no
concrete view, so that adding one never touches it.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import ipywidgets as w
import numpy as np
import pytest

import jupyter_ktune.ui.app as app
from jupyter_ktune.api import parse_cell
from jupyter_ktune.results import Status
from jupyter_ktune.session import TuningSession
from jupyter_ktune.space import Config
from jupyter_ktune.ui import panel_file
from jupyter_ktune.ui.app import KernelPanel
from jupyter_ktune.ui.replay import load_panel, save_panel
from jupyter_ktune.ui.views import View, register, registered, unregister

SRC = """# ktune: BLOCK in [1, 2, 4]
def scale(x, y, n):
    y[:] = 2 * x
"""
NS = {"inputs": lambda: dict(x=np.random.rand(64), y=np.empty(64), n=64),
      "reference": lambda x, y, n: 2 * x}
LINE = "scale --backend fake --inputs inputs --reference reference --out y --budget-ms 5"
BUILT_IN = ["Timing", "Heatmap", "Roofline", "Report", "Breakdown", "Compare"]  # no swizzle


class Probe(View):
    """A view as a user would write one: a title, a widget, the hooks it needs."""

    title = "Probe"
    exports = ("probe",)

    def __init__(self, panel):
        super().__init__(panel)
        self.probe = w.HTML()
        self.added: list[tuple[dict, str]] = []
        self.shown: list[dict] = []

    def widget(self):
        return self.probe

    def add(self, result, kind):
        self.added.append((dict(result.config), kind))

    def show(self, result):
        self.shown.append(dict(result.config))
        self.probe.value = f"<b>{Config(result.config).label()}</b>"

    def snapshot(self, current, history):
        return [f"<figure class='ktune-probe'>{len(history)} results seen</figure>"]

    def saved(self):
        return {"probe_shown": len(self.shown)}


@pytest.fixture()
def probe():
    register(Probe)  # the one registration
    try:
        yield Probe
    finally:
        unregister(Probe)
    assert Probe not in registered()


def make_panel(worker) -> KernelPanel:
    spec = parse_cell(LINE, SRC, NS)
    session = TuningSession(spec, worker, {}, prefetch=False)
    p = KernelPanel(session, spec.space.config({}), ceilings=None)
    assert p.result.status is Status.OK
    return p


def test_a_registered_view_is_a_tab_gets_every_result_and_joins_snapshot_and_file(
        probe, worker, tmp_path):
    p = make_panel(worker)
    try:
        assert p.tabs.titles == [*BUILT_IN, "Probe"]  # registered last: the last tab
        view = p.views[-1]
        assert isinstance(view, Probe) and p.probe is view.probe  # its export, on the panel
        assert p.tabs.tab.children[-1] is view.probe
        p.controls.widgets["BLOCK"].value = 2
        assert p.result.config == {"BLOCK": 2}
        assert view.shown == [{"BLOCK": 1}, {"BLOCK": 2}]
        assert [c for c, _ in view.added] == [dict(r.config) for r in p.history]
        assert view.added[-1][1] == "current"
        assert "BLOCK=2" in p.probe.value
        # a result from elsewhere (a sweep) reaches it as such, without becoming current
        p.show_result(p.history[0])
        assert view.added[-1] == ({"BLOCK": 1}, "sweep") and len(view.shown) == 2
        # the static snapshot carries its figure beside the built-in ones, above the card
        html = p._repr_mimebundle_()["text/html"]
        assert "ktune-probe'>3 results seen" in html and "<svg" in html
        assert html.index("ktune-probe") < html.index("ktune-result")
        # and a saved panel keeps its entry next to the roofline's ceilings
        path = save_panel(p, tmp_path / "probe.panel.json")
        saved = panel_file.load(path)
        assert saved["probe_shown"] == 2 and "ceilings" in saved
        replay = load_panel(path)
        assert replay.tabs.titles[-1] == "Probe" and replay.views[-1].shown
    finally:
        p.session.close()


def test_a_view_can_stand_before_another_tab_and_leaves_with_its_registration(worker):
    register(Probe, before="Report")
    try:
        p = make_panel(worker)
        assert p.tabs.titles == ["Timing", "Heatmap", "Roofline", "Probe", "Report",
                                 "Breakdown", "Compare"]
        p.session.close()
    finally:
        unregister(Probe)
    p = make_panel(worker)
    assert p.tabs.titles == BUILT_IN and not hasattr(p, "probe")
    p.session.close()


def test_a_view_may_not_take_a_name_the_panel_already_answers_for(worker):
    class Clash(View):
        title = "Clash"
        exports = ("result",)

    register(Clash)
    try:
        with pytest.raises(ValueError, match="exports 'result'"):
            make_panel(worker)
    finally:
        unregister(Clash)
    with pytest.raises(ValueError, match="already registered"):
        register(registered()[0])
    with pytest.raises(TypeError):
        register(type("Untitled", (View,), {}))


def _app_tree() -> ast.Module:
    return ast.parse(Path(app.__file__).read_text())


def _imports(tree: ast.AST) -> list[tuple[str, str | None]]:
    """``(module, name)`` for every import (``name`` None for ``import module``)."""
    out: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out += [(node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names]
    return out


#: the panel's own modules a view builds on; from these, app.py may import only what no view
#: imports (the protocol's names aside)
SHARED = {"jupyter_ktune.ui.sections", "jupyter_ktune.ui.snapshot", "jupyter_ktune.ui.views",
          "jupyter_ktune.ui.views.base"}
PROTOCOL = {"View", "PanelState"}


def test_app_names_no_concrete_view():
    """No import of a view's module or of what only views use, no view title, no export."""
    views = registered()
    assert len(views) >= 7
    # what the views' modules import from the panel's modules: their figures, their helpers
    view_uses: set[tuple[str, str | None]] = set()
    for cls in views:
        text = Path(importlib.import_module(cls.__module__).__file__).read_text()
        view_uses |= {(m, n) for m, n in _imports(ast.parse(text))
                      if m.startswith("jupyter_ktune.ui")}
    figures = {m for m, _ in view_uses} - SHARED
    assert {"jupyter_ktune.ui.panels", "jupyter_ktune.ui.compare_view"} <= figures
    tree = _app_tree()
    for module, name in _imports(tree):
        assert module not in {cls.__module__ for cls in views}, f"app.py imports {module}"
        assert module not in figures, f"app.py imports {module}, a view's figures"
        assert name not in {cls.__name__ for cls in views}, f"app.py imports {name}"
        assert name is None or name in PROTOCOL or not any(n == name for _, n in view_uses), \
            f"app.py imports {name} from {module}, which a view uses"
    titles = {cls.title for cls in views}
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
               and isinstance(n.value, str)}
    assert not titles & strings, f"app.py names the tabs {titles & strings}"
    exports = {name for cls in views for name in cls.exports}
    used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id == "self"}
    assert not exports & used, f"app.py reaches the views' exports {exports & used}"
