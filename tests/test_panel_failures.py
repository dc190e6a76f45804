"""The panel when a variant fails, when nothing ever built and in a replay (issue 35 item 4), and
its tabs (item 1): the reason stands where the timing plots were, actions that cannot work are
disabled with the reason as their tooltip, and the selected tab stays across slider moves."""

from __future__ import annotations

import pytest
from test_panel import (
    LINE,
    NS,
    SRC,
    panel,  # noqa: F401 - the live panel fixture
)

from jupyter_ktune.api import parse_cell
from jupyter_ktune.results import Status
from jupyter_ktune.session import TuningSession
from jupyter_ktune.ui.app import KernelPanel

# BLOCK=2 does not build (a syntax error on cell line 5, only there); the others run
FAILS_AT_2 = SRC.replace("import time\n", "import time\n#if BLOCK == 2\ndef broken(:\n"
                                            "#endif\n")
NEVER_BUILDS = SRC.replace("import time\n", "import time\ndef broken(:\n")


def _panel(worker, src):
    spec = parse_cell(LINE, src, NS)
    limits = {"SMEM_PER_BLOCK": 1000}
    session = TuningSession(spec, worker, limits, prefetch=False)
    return KernelPanel(session, spec.space.default(limits), ceilings=None), session


def test_a_failed_variant_shows_its_reason_where_the_timing_plots_were(worker):
    p, session = _panel(worker, FAILS_AT_2)
    try:
        assert p.result.status is Status.OK
        assert p.timing_plots.layout.display is None and p.no_plots.layout.display == "none"
        p.controls.widgets["BLOCK"].value = 2
        assert p.result.status is Status.COMPILE_ERROR
        assert p.timing_plots.layout.display == "none"  # no empty 0-1 axes
        assert p.no_plots.layout.display is None
        assert "compile error" in p.no_plots.value and "BLOCK=2" in p.no_plots.value
        # the reason itself, not just a status
        assert "cell line" in p.no_plots.value or "line 5" in p.no_plots.value
        assert not p.autotune.start_button.disabled  # BLOCK=1 built: a sweep can work
        p.controls.widgets["BLOCK"].value = 1
        assert p.result.status is Status.OK
        assert p.timing_plots.layout.display is None and p.no_plots.layout.display == "none"
    finally:
        session.close()


def test_autotune_is_disabled_with_the_reason_until_something_compiles(worker):
    p, session = _panel(worker, NEVER_BUILDS)
    try:
        assert p.result.status is Status.COMPILE_ERROR
        assert p.autotune.start_button.disabled
        assert "compiled" in p.autotune.start_button.tooltip
        assert p.breakdown.button.disabled and "GPU" in p.breakdown.button.tooltip
        # no timed result: the heatmap and roofline say so instead of drawing empty axes
        assert p.no_results.layout.display is None
        assert p.tabs.plots["Heatmap"].layout.display == "none"
    finally:
        session.close()


def test_a_replay_disables_autotune_and_the_breakdown_with_the_reason(panel, tmp_path):  # noqa: F811
    from jupyter_ktune.ui.replay import load_panel, save_panel

    replay = load_panel(save_panel(panel, tmp_path / "run.panel.pkl"))
    assert replay.breakdown.button.disabled
    assert "replay" in replay.breakdown.button.tooltip
    start = replay.autotune.start_button
    assert start.disabled and "replay" in start.tooltip


def test_the_selected_tab_stays_across_slider_moves(panel):  # noqa: F811
    assert panel.tabs.titles[0] == "Timing" and panel.tabs.tab.selected_index == 0
    panel.tabs.select("Heatmap")
    for block in (2, 1):
        panel.controls.widgets["BLOCK"].value = block
        assert panel.result.config["BLOCK"] == block
    assert panel.tabs.tab.get_state()["selected_index"] == panel.tabs.titles.index("Heatmap")


def test_showing_a_tab_re_sends_its_figures(panel, monkeypatch):  # noqa: F811
    sent = []
    plots = panel.tabs.plots["Roofline"]
    monkeypatch.setattr(plots, "refresh", lambda: sent.append("roofline"))
    panel.tabs.select("Roofline")
    assert sent == ["roofline"]


@pytest.mark.parametrize("title", ["Heatmap", "Report", "Breakdown"])
def test_the_views_beyond_the_first_screen_are_tabs(panel, title):  # noqa: F811
    assert title in panel.tabs.titles
    assert panel.tabs.tab in panel.body.children  # beside the controls, not below them


def test_a_panel_where_nothing_can_run_opens_on_its_report():
    from jupyter_ktune.ui.replay import ReplaySession

    spec = parse_cell(LINE, SRC, NS)
    session = ReplaySession(spec, [], {"SMEM_PER_BLOCK": 1000})  # nothing measured
    p = KernelPanel(session, spec.space.default({"SMEM_PER_BLOCK": 1000}), ceilings=None)
    assert p.current.status is Status.CANNOT_RUN
    assert p.tabs.titles[p.tabs.tab.selected_index] == "Report"
    p.tabs.select("Heatmap")  # the user's choice is kept from then on
    p.controls.widgets["BLOCK"].value = 2
    assert p.tabs.titles[p.tabs.tab.selected_index] == "Heatmap"
