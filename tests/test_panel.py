"""The live panel without a browser: move controls, check the session, the store of results
and the Bokeh ColumnDataSources; newest request wins and stale results never become current."""

from __future__ import annotations

import html
import re
import time

import numpy as np
import pytest
from IPython.core.interactiveshell import InteractiveShell

from jupyter_ktune.api import parse_cell
from jupyter_ktune.results import Status
from jupyter_ktune.session import TuningSession
from jupyter_ktune.ui.app import KernelPanel
from jupyter_ktune.ui.panels import central

SRC = """# ktune: BLOCK in [1, 2, 4, 8]; SWIZZLE in [none, 32B, 64B, 128B]
# ktune: require BLOCK * 300 <= SMEM_PER_BLOCK
import time
def scale(x, y, n):
    time.sleep(0.002 * BLOCK)
    y[:] = 2 * x
"""
NS = {"inputs": lambda: dict(x=np.random.rand(64), y=np.empty(64), n=64),
      "reference": lambda x, y, n: 2 * x}
LINE = "scale --backend fake --inputs inputs --reference reference --out y --budget-ms 5"


@pytest.fixture()
def panel(worker):
    spec = parse_cell(LINE, SRC, NS)
    limits = {"SMEM_PER_BLOCK": 1000}
    session = TuningSession(spec, worker, limits, prefetch=False)
    p = KernelPanel(session, spec.space.default(limits), ceilings=None)
    assert p.result.status is Status.OK
    yield p
    session.close()


def test_first_result_fills_badge_card_and_sources(panel):
    assert "correct" in panel.badge.value
    assert "ktune-result" in panel.card.value
    assert len(panel.timing.hist.data["i"]) == 1
    t = panel.current.measurement.timing
    _kept, slow = central(t.times_ms)  # far outliers are counted in the axis label instead
    assert sum(panel.timing.dist.data["count"]) == t.n - slow
    assert panel.heatmap.source.data["config"] == ["BLOCK=1 SWIZZLE=none"]


def test_moving_a_slider_runs_that_config_and_updates_the_panel(panel):
    panel.controls.widgets["BLOCK"].value = 2
    assert panel.result.config == {"BLOCK": 2, "SWIZZLE": "none"}
    assert len(panel.timing.hist.data["i"]) == 2
    assert sorted(panel.heatmap.source.data["x"]) == ["1", "2"]
    assert panel.latencies[-1]["current"] and panel.latencies[-1]["panel_s"] > 0


def test_a_combination_that_breaks_a_constraint_is_never_run(panel):
    before = len(panel.session.history)
    panel.controls.widgets["BLOCK"].value = 4   # 4 * 300 > 1000
    panel.session.wait_idle()
    status = html.unescape(panel.controls.status.value)
    assert "not run" in status and "not allowed on this device" in status
    assert "require BLOCK * 300 <= SMEM_PER_BLOCK: 1,200 > 1,000" in status  # the numbers
    # the sliders stay, and the banner names the config the badge and plots still show
    assert panel.controls.values["BLOCK"] == 4
    assert "The badge and plots show BLOCK=1 SWIZZLE=none" in re.sub("<[^>]+>", "", status)
    assert panel.current.config == {"BLOCK": 1, "SWIZZLE": "none"}
    assert "BLOCK=1 SWIZZLE=none" in panel.badge.value
    assert len(panel.session.history) == before


def test_tapping_a_heatmap_cell_selects_its_config(panel):
    panel.controls.widgets["SWIZZLE"].value = "64B"
    panel.session.wait_idle()
    index = panel.heatmap.source.data["config"].index("BLOCK=1 SWIZZLE=none")
    panel._tapped("indices", [], [index])
    assert panel.result.config == {"BLOCK": 1, "SWIZZLE": "none"}
    assert panel.controls.values == {"BLOCK": 1, "SWIZZLE": "none"}


def test_a_tap_in_the_browser_asks_for_its_config_once(panel, monkeypatch):
    """The tap as the browser sends it (the selection's change, through the heatmap's Bokeh
    widget): one request, one more point in the history. jupyter_bokeh called the tap's
    callback twice, so the panel asked twice (the session serves the newest pending request
    only, so the first was mostly superseded, but not when the worker had already taken it)."""
    panel.controls.widgets["SWIZZLE"].value = "64B"
    panel.session.wait_idle()
    before = len(panel.history)
    asked = []
    request = panel.session.request
    monkeypatch.setattr(panel.session, "request",
                        lambda *a, **k: asked.append(a) or request(*a, **k))
    index = panel.heatmap.source.data["config"].index("BLOCK=1 SWIZZLE=none")
    plots = panel.tabs.plots["Heatmap"]
    plots._sync_model(plots, {"event": "jsevent", "kind": "ModelChanged", "attr": "indices",
                              "model": {"id": panel.heatmap.source.selected.id},
                              "new": [index]}, [])
    panel.session.wait_idle()
    assert len(asked) == 1
    assert panel.result.config == {"BLOCK": 1, "SWIZZLE": "none"}
    assert len(panel.history) == before + 1


def test_a_cell_shared_by_configs_shows_the_best_and_a_tap_runs_exactly_it(worker):
    """Heatmap over BLOCK alone: SWIZZLE configs share a cell; the fastest is drawn and run."""
    src = SRC.replace("time.sleep(0.002 * BLOCK)", "time.sleep(0.002 * BLOCK + 0.0002 * SWIZZLE)")
    spec = parse_cell(LINE, src, NS)
    session = TuningSession(spec, worker, {"SMEM_PER_BLOCK": 1000}, prefetch=False)
    p = KernelPanel(session, spec.space.default({"SMEM_PER_BLOCK": 1000}), ceilings=None)
    p.result  # noqa: B018 - BLOCK=1 SWIZZLE=none, the fastest of its cell
    p.axis_y.value = "-"
    for sw in ("32B", "64B"):  # slower, and newest last
        p.controls.widgets["SWIZZLE"].value = sw
        p.session.wait_idle()
    cell = p.heatmap.source.data["x"].index("1")
    assert p.heatmap.source.data["n"][cell] == 3
    assert p.heatmap.source.data["config"][cell] == "BLOCK=1 SWIZZLE=none"
    p.controls.widgets["BLOCK"].value = 2
    p.session.wait_idle()
    p._tapped("indices", [], [p.heatmap.source.data["x"].index("1")])
    assert p.result.config == {"BLOCK": 1, "SWIZZLE": "none"}  # every tunable, not the axis only
    assert p.controls.values == {"BLOCK": 1, "SWIZZLE": "none"}
    session.close()


def test_the_history_figure_holds_every_result_a_sweep_delivers(panel):
    before = len(panel.history)
    report = panel.tune("exhaustive", budget=4)
    swept = len(panel.history) - before
    assert swept >= len(report.evaluations) >= 4
    assert len(panel.timing.hist.data["i"]) == len(panel.history)
    served = sum(1 for d in panel.latencies[before:] if d["ticket"] == 0)  # sweep deliveries
    assert panel.timing.hist.data["kind"].count("autotune sweep") == served >= 4


def test_no_panel_prefetches_while_autotune_sweeps(panel, monkeypatch):
    """A panel's neighbour compiles in the worker held an Autotune's requests behind them
    (issue 33): the press quiets every panel's prefetch; the winner's run starts it again. The
    report names what the press waited for before the sweep's clock started."""
    from jupyter_ktune import session as session_module
    from jupyter_ktune.tuning.sweep import Sweep

    seen: list = []
    run = Sweep.run

    def recording_run(self):
        seen.append(session_module._active[0])
        return run(self)

    monkeypatch.setattr(Sweep, "run", recording_run)
    assert session_module._active[0] is panel.session  # its first request
    report = panel.tune("exhaustive", budget=2)
    assert seen == [None]
    assert session_module._active[0] is panel.session  # the winner's run
    setup = report.info["setup_ms"]
    assert list(setup) == ["store and check", "compile pool", "device", "limits", "strategy"]
    assert all(ms >= 0 for ms in setup.values())


def test_swizzle_map_follows_the_swizzle_tunable(panel):
    panel.controls.widgets["SWIZZLE"].value = "128B"  # drawn from the controls, before a result
    assert "128B swizzle" in panel.swizzle.fig.title.text
    assert "generic" in panel.swizzle.fig.title.text  # this cell declares no smem_tile
    assert "column read 1-way" in panel.swizzle.fig.title.text
    assert len(set(panel.swizzle.source.data["bank"])) == 32
    panel.session.wait_idle()


def test_swizzle_map_of_the_cells_tile_follows_the_sliders_without_a_device():
    """The transpose of examples/swizzle_banks.ipynb, nothing measured (a replay of no results):
    every request is 'cannot run', the timing figures give way, the map stays and follows."""
    from test_smem_tile import transpose_spec

    from jupyter_ktune.ui.replay import ReplaySession

    spec = transpose_spec()
    session = ReplaySession(spec, [], {"SMEM_PER_BLOCK": 232448})
    p = KernelPanel(session, spec.space.config({"TILE": 32, "SWIZZLE": "none"}), ceilings=None)
    assert p.current.status is Status.CANNOT_RUN
    assert p.timing_plots.layout.display == "none"  # the timing views give way to the reason
    assert "Swizzle" in p.tabs.titles and p.tabs.plots["Swizzle"].layout.display != "none"
    assert p.swizzle.counts == {"row": 1, "column": 32}
    assert "32×32 float32" in p.swizzle.fig.title.text
    p.controls.widgets["TILE"].value = 64
    p.controls.widgets["SWIZZLE"].value = "128B"
    assert p.swizzle.counts == {"row": 1, "column": 8}  # ncu on the H200: 8.40 wavefronts
    assert "64×64 float32 · 4 B a thread · 128B swizzle" in p.swizzle.fig.title.text
    assert len(p.swizzle.source.data["r"]) == 64 * 64


def test_newest_request_wins_and_stale_results_never_become_current(worker):
    spec = parse_cell(LINE, SRC.replace("# ktune: require BLOCK * 300 <= SMEM_PER_BLOCK\n", ""), NS)
    session = TuningSession(spec, worker, {}, prefetch=False)
    seen = []
    session.subscribe(seen.append)
    session.request({"BLOCK": 8})          # slow variant starts
    time.sleep(0.05)
    for b in (1, 2, 4, 1, 2):               # a burst while it runs
        session.request({"BLOCK": b})
    assert session.wait_idle(60)
    configs = [d.result.config["BLOCK"] for d in seen]
    assert configs[0] == 8 and configs[-1] == 2
    assert len(seen) == 2                   # the burst's middle requests were dropped
    assert not seen[0].current and seen[-1].current
    session.close()


def test_magic_returns_a_live_panel_and_its_snapshot(worker):
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jupyter_ktune")
    ip.user_ns.update(NS)
    p = ip.run_cell_magic("kernel", LINE, SRC)
    assert isinstance(p, KernelPanel) and p.result.status is Status.OK
    bundle = p._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "ktune-result" in bundle["text/html"]    # what a reopened notebook shows
    p.session.close()


def test_idle_session_precompiles_neighbours_so_the_next_step_is_ready(worker):
    spec = parse_cell(LINE, SRC.replace("# ktune: require BLOCK * 300 <= SMEM_PER_BLOCK\n", ""), NS)
    session = TuningSession(spec, worker, {}, prefetch=True)
    seen = []
    session.subscribe(seen.append)
    session.request({"BLOCK": 2, "SWIZZLE": "32B"})
    session.wait_idle()
    deadline = time.time() + 20
    while time.time() < deadline and len(session._state.compiled) < 5:  # itself + 4 neighbours
        time.sleep(0.1)
    session.request({"BLOCK": 4, "SWIZZLE": "32B"})
    session.wait_idle()
    assert seen[-1].precompiled and seen[-1].result.status is Status.OK
    session.close()


def test_the_heatmap_starts_on_tunables_that_vary(worker):
    """A tunable of one value (declared first) is not a heatmap axis by default."""
    src = SRC.replace("# ktune: BLOCK in", "# ktune: HEAD_DIM in [128]; BLOCK in")
    spec = parse_cell(LINE, src, NS)
    session = TuningSession(spec, worker, {"SMEM_PER_BLOCK": 1000}, prefetch=False)
    p = KernelPanel(session, spec.space.default({"SMEM_PER_BLOCK": 1000}), ceilings=None)
    try:
        assert (p.axis_x.value, p.axis_y.value) == ("BLOCK", "SWIZZLE")
        assert "HEAD_DIM" in p.axis_x.options  # still there to choose
    finally:
        session.close()


def test_a_spec_built_in_code_gets_a_live_panel_of_its_own(worker):
    """``jupyter_ktune.panel(spec)``: a variant of a cell built with ``parse_cell`` (here one
    tunable narrowed, another start) gets the panel ``%%kernel`` would show, on its start
    config; a new panel for the kernel closes the previous one's session; a cell without
    tunables is refused in one line with the fix."""
    import jupyter_ktune
    from jupyter_ktune.errors import CellError

    spec = parse_cell(LINE + " --config BLOCK=2", SRC.replace("[1, 2, 4, 8]", "[1, 2]"), NS)
    first = jupyter_ktune.panel(spec)
    assert isinstance(first, KernelPanel) and first.result.status is Status.OK
    assert first.result.config == {"BLOCK": 2, "SWIZZLE": "none"}
    assert [v for _label, v in first.controls.widgets["BLOCK"].options] == [1, 2]
    second = jupyter_ktune.panel(spec)  # the cell that built it, run again
    assert first.session._state.closed and not second.session._state.closed
    ip = InteractiveShell.instance()  # the kernel's own cell, then the variant's panel
    ip.run_line_magic("load_ext", "jupyter_ktune")
    ip.user_ns.update(NS)
    cell = ip.run_cell_magic("kernel", LINE, SRC)
    variant = jupyter_ktune.panel(spec)
    assert second.session._state.closed  # replaced by the variant's new panel
    assert not cell.session._state.closed  # the cell's panel of the same kernel stays live
    cell.controls.widgets["BLOCK"].value = 2
    assert cell.result.config == {"BLOCK": 2, "SWIZZLE": "none"}
    for p in (cell, variant):
        p.session.close()
    with pytest.raises(CellError, match="no tunables") as err:
        jupyter_ktune.panel(parse_cell(LINE, "def scale(x, y, n):\n    y[:] = 2 * x\n", NS))
    assert "run_kernel" in err.value.fix


def test_the_first_config_runs_while_the_views_are_built(worker, monkeypatch):
    """The panel asks for its first config before it builds its views (0.4-0.7 s of Bokeh
    figures on an H100 host, issue 33), and shows the result that came back meanwhile once
    they are built. Here the views' building waits until the first result is delivered."""
    import jupyter_ktune.ui.app as app

    built = app.AutotuneBar.__init__
    seen: list[int] = []

    def slow_build(self, panel):
        deadline = time.monotonic() + 20
        while not panel.session.history and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append(len(panel.session.history))
        built(self, panel)

    monkeypatch.setattr(app.AutotuneBar, "__init__", slow_build)
    spec = parse_cell(LINE, SRC, NS)
    session = TuningSession(spec, worker, {"SMEM_PER_BLOCK": 1000}, prefetch=False)
    try:
        p = KernelPanel(session, spec.space.default({"SMEM_PER_BLOCK": 1000}), ceilings=None)
        assert seen == [1], "the first result was not delivered while the views were built"
        assert p.current is not None and "correct" in p.badge.value
        assert len(p.timing.hist.data["i"]) == 1
        assert p.heatmap.source.data["config"] == ["BLOCK=1 SWIZZLE=none"]
    finally:
        session.close()
