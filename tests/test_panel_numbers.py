"""Every number the panel shows agrees with the others (issue 35), one test per pair.

Most run on the H200 results saved by bench/panel_gpu_snapshot.py (a bf16 matmul at 4096³
after a 24-config sweep), replayed here without a GPU; the sweep-summary pair runs a sweep on
the fake backend.
"""

from __future__ import annotations

import dataclasses
import html
import re
from pathlib import Path

import numpy as np
import pytest

from jupyter_ktune.api import parse_cell
from jupyter_ktune.measure.breakdown import Breakdown, Event
from jupyter_ktune.render import counted, fmt_time, run_result_html
from jupyter_ktune.session import TuningSession
from jupyter_ktune.space import Param
from jupyter_ktune.ui.app import KernelPanel
from jupyter_ktune.ui.panels import HeatmapPanel
from jupyter_ktune.ui.replay import load_panel
from jupyter_ktune.ui.roofline import RooflinePanel
from jupyter_ktune.ui.snapshot import heatmap_svg, history_svg, snapshot_html

H200 = (Path(__file__).resolve().parents[1] / "bench" / "results" / "panel_gpu_snapshot"
        / "2026-12-01-0850" / "h200_matmul.panel.json")


@pytest.fixture(scope="module")
def h200():
    panel = load_panel(H200)
    yield panel
    panel.session.close()


def _text(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", markup))


def test_the_card_says_what_was_subtracted_not_the_floor(h200):
    t = h200.current.measurement.timing
    said = float(re.search(r"minus the event overhead ([\d.]+) us", t.method).group(1))
    card = _text(run_result_html(h200.current))
    subtracted = re.search(r"Event overhead\s+([\d.]+) µs subtracted", card)
    assert subtracted, card
    assert float(subtracted.group(1)) == pytest.approx(said, abs=0.006)  # 2.28, as the method
    assert fmt_time(t.event_floor_ms) in card and "2.82 µs" in card  # the floor, named as such
    assert "Event floor" not in card.split("Event overhead")[0]  # no "floor ... subtracted"
    # every run is its event time less exactly that figure
    assert np.allclose(t.event_times_ms - t.times_ms, t.event_overhead_ms)


def test_a_fresh_measurement_keeps_the_figure_it_subtracted(worker):
    spec = parse_cell(LINE, SRC, NS)
    r = worker.run(spec, spec.space.default({"SMEM_PER_BLOCK": 1000}))
    t = r.measurement.timing
    if t.event_overhead_ms is None:
        pytest.skip("this clock subtracts nothing")
    said = re.search(r"minus the (?:event overhead|cost of an empty call) ([\d.]+) us", t.method)
    assert t.subtracted_ms is not None
    assert t.subtracted_ms * 1e3 == pytest.approx(float(said.group(1)), abs=0.006)


def test_one_time_unit_for_the_histogram_the_history_and_the_heatmap(h200):
    dist, hist = h200.timing.figures
    units = {re.search(r"\((\S+)\)", dist.xaxis.axis_label).group(1),
             re.search(r"\((\S+)\)", hist.yaxis.axis_label).group(1),
             h200.heatmap.colorbar.title}
    assert units == {"ms"}, units  # the medians reach 1.56 ms; the current runs 0.185 ms
    med = h200.current.median_ms
    assert dist.x_range.start < med < dist.x_range.end  # the bars sit at 0.18 (ms), not 185
    snapshot = h200.snapshot_html()  # the saved figures too: their axis texts
    assert ">ms</text>" in snapshot and ">median (ms)</text>" in snapshot
    assert ">µs</text>" not in snapshot
    # a slower sweep result moves every figure to the new unit together
    assert h200.timing.unit([2500.0])[0] == "s"


def test_the_roofline_ceiling_is_never_below_the_achieved_rate(h200):
    achieved = h200.current.measurement.tflops
    assert achieved == pytest.approx(743.3, abs=0.1)
    assert h200.roofline.ceilings["tflops"] < achieved  # the measured cuBLAS figure, 729
    drawn = h200.roofline.drawn_ceilings()["tflops"]
    assert drawn >= achieved and max(h200.roofline.roof.data["tflops"]) >= achieved
    title = h200.roofline.fig.title.text
    assert "TFLOP/s raised to the achieved (measured 729)" in title
    assert f"{drawn:,.0f} TFLOP/s" in title


def test_the_roofline_draws_the_point_or_says_why_not(h200):
    # the matmul cell gives flops but no bytes: a dashed level at the achieved rate, and why
    assert h200.roofline.point.data["ai"] == []
    assert "no point: 743 TFLOP/s achieved (dashed), but no bytes =" in h200.roofline.fig.title.text
    level = h200.roofline.level
    assert level.visible and level.location == pytest.approx(743.3, 0.01)


def test_a_roofline_with_bytes_places_the_point(worker):
    body = SRC.replace("# ktune: require", "# ktune: flops = 8 * n; bytes = 16 * n; require")
    spec = parse_cell(LINE, body, NS)
    session = TuningSession(spec, worker, {"SMEM_PER_BLOCK": 1000}, prefetch=False)
    p = KernelPanel(session, spec.space.default({"SMEM_PER_BLOCK": 1000}),
                    ceilings={"bandwidth_gbps": 1.0, "tflops": 1e-9})
    r = p.result
    session.close()
    if "host time" in r.measurement.timing.method:
        assert "interpreter host time is not GPU time" in p.roofline.fig.title.text
        assert p.roofline.point.data["ai"] == []
    else:
        assert p.roofline.point.data["ai"] == [0.5] and not p.roofline.note


def test_the_sweep_summary_names_the_badges_number(worker):
    spec = parse_cell(LINE, SRC, NS)
    session = TuningSession(spec, worker, {"SMEM_PER_BLOCK": 1000}, prefetch=False)
    p = KernelPanel(session, spec.space.default({"SMEM_PER_BLOCK": 1000}), ceilings=None)
    report = p.tune("exhaustive", budget=4)
    for _ in range(50):  # the winner's live run arrives after the report
        if "run again live" in p.autotune.label.value:
            break
        import time
        time.sleep(0.1)
    session.close()
    summary = _text(p.autotune.label.value)
    badge = _text(p.badge.value)
    assert p.current.config == dict(report.best.config)
    live = fmt_time(p.current.median_ms)
    assert live in badge  # the badge shows the live run ...
    assert f"run again live (the badge): {live}" in summary  # ... and the summary names it
    assert f"{fmt_time(report.best.median_ms)} re-timed in the sweep" in summary


def test_41_heatmap_labels_are_thinned_to_what_fits():
    params = [Param("K", tuple(range(0, 41)), 2), Param("M", (1, 2), 2)]
    h = HeatmapPanel(params)
    h.set_axes("K", "M", [])
    step = h.fig.xaxis.formatter.args["step"]
    shown = len(range(0, 41, step))
    assert step > 1 and shown * (2 * 7 + 8) <= h.fig.width - 90  # 2-digit labels fit
    assert len(h.fig.x_range.factors) == 41  # every cell keeps its place
    h.set_axes("M", "K", [])
    assert h.fig.yaxis.formatter.args["step"] > 1
    svg = heatmap_svg({}, [str(v) for v in range(41)], ["1", "2"], ("K", "M"))
    assert 1 < svg.count("text-anchor='middle'") <= 12  # the saved snapshot thins them too


def test_the_history_legend_sits_outside_the_points(h200):
    hist = h200.timing.figures[1]
    assert hist.legend and all(lg in hist.below for lg in hist.legend)
    assert not any(lg in hist.center for lg in hist.legend)


@pytest.mark.parametrize(("n", "text"), [(1, "1 block"), (2, "2 blocks"), (1200, "1,200 blocks")])
def test_counts_take_their_nouns_number(n, text):
    assert counted(n, "block") == text


def test_one_of_a_thing_is_singular_everywhere_it_is_counted(h200):
    one = h200.history[:1]
    assert "1 result ·" in history_svg(one) and "1 results" not in snapshot_html(one[0], one)
    bd = Breakdown.from_events([Event("load", 0, 0, 0, 0, 100, 0.0, 100.0)], kernel="k",
                               source="test", unit_kind="warp", sm_clock_mhz=1000.0,
                               clock_source="test")
    assert "1 scope event from 1 block," in bd.summary()


SRC = """# ktune: BLOCK in [1, 2]; SWIZZLE in [none, 128B]
# ktune: require BLOCK * 300 <= SMEM_PER_BLOCK
def scale(x, y, n):
    y[:] = 2 * x
"""
NS = {"inputs": lambda: dict(x=np.random.rand(64), y=np.empty(64), n=64),
      "reference": lambda x, y, n: 2 * x}
LINE = "scale --backend fake --inputs inputs --reference reference --out y --budget-ms 5"


def test_a_roofline_with_nothing_to_draw_is_a_line_of_text_not_empty_axes(worker):
    """No ceilings (no GPU) and no point (an interpreter's host time): the tab says why instead
    of showing empty axes; once ceilings come the roof is drawn, point or not."""
    body = SRC.replace("# ktune: require", "# ktune: flops = 8 * n; bytes = 16 * n; require")
    spec = parse_cell(LINE, body, NS)
    r = worker.run(spec, spec.space.default({"SMEM_PER_BLOCK": 1000}))
    m = r.measurement
    host = dataclasses.replace(r, measurement=dataclasses.replace(
        m, timing=dataclasses.replace(m.timing, method="interpreter host time (wall clock)")))
    roofline = RooflinePanel(None)
    roofline.show(r if "host time" in m.timing.method else host)
    assert not roofline.fig.visible
    assert roofline.empty_note.layout.display is None
    assert "interpreter host time is not GPU time" in roofline.empty_note.value
    roofline.set_ceilings({"bandwidth_gbps": 1.0, "tflops": 1.0})
    assert roofline.fig.visible and roofline.empty_note.layout.display == "none"
    assert RooflinePanel(None).fig.visible is False  # nothing run yet: nothing drawn either
