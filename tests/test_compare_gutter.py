"""Pin and compare in the editor gutter (issue 38): the pinned-vs-current per-line stall
difference as the editor bundle's ``diff`` section, and when the panel sends it.

On the CPU there is no ncu, so the panel's breakdowns get their per-line samples from a stand-in
for ``request_breakdown`` (hand-made samples, by config), while everything after it (the button,
the Pin, the slider moves, the bundle in the button's output) is the panel's own.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from jupyter_ktune.editor import MIME_TYPE, editor_bundle
from jupyter_ktune.editor_diff import cell_line_text, diff_section, share_diff, source_key
from jupyter_ktune.measure.breakdown import Breakdown

A = {9: {"samples": 600, "stalls": {"long_scoreboard": 420, "wait": 100}},
     10: {"samples": 400, "stalls": {"math": 300}}}
B = {9: {"samples": 200, "stalls": {"long_scoreboard": 100, "wait": 60}},
     10: {"samples": 500, "stalls": {"math": 450}},
     11: {"samples": 100, "stalls": {"barrier": 100}}}


def test_the_diff_compares_shares_of_each_breakdowns_cell_total():
    d, note = diff_section({"BLOCK": 1}, {"BLOCK": 2}, A, B)
    assert note == "" and d["a"] == "BLOCK=1" and d["b"] == "BLOCK=2"
    assert (d["a_total"], d["b_total"]) == (1000, 800)
    # line 9: 60 % of A's samples, 25 % of B's: a share fell although both totals differ
    assert d["lines"]["9"]["share"] == [0.6, 0.25] and d["lines"]["9"]["samples"] == [600, 200]
    assert d["lines"]["10"]["share"] == [0.4, 0.625]
    assert d["lines"]["11"]["share"] == [0.0, 0.125]  # a line only B sampled counts 0 in A
    # stall reasons as shares of the cell's samples, in A and in B
    assert d["lines"]["9"]["stalls"]["long_scoreboard"] == [0.42, 0.125]
    assert d["lines"]["11"]["stalls"]["barrier"] == [0.0, 0.125]
    json.dumps(d)


def test_a_twice_as_long_profile_with_the_same_mix_shows_no_difference():
    doubled = {k: {"samples": 2 * v["samples"],
                   "stalls": {r: 2 * n for r, n in v["stalls"].items()}} for k, v in A.items()}
    d, _ = diff_section({}, {}, A, doubled)
    for entry in d["lines"].values():
        assert entry["share"][0] == entry["share"][1]
        assert all(a == b for a, b in entry["stalls"].values())


def test_no_diff_without_both_sides_or_from_different_sources():
    assert diff_section({}, {}, A, {}) == (None, diff_section({}, {}, A, None)[1])
    d, note = diff_section({}, {}, None, B)
    assert d is None and "for A" in note
    d, note = diff_section({}, {}, A, B, source_a=source_key("x"), source_b=source_key("y"))
    assert d is None and "different cell sources" in note
    d, _ = diff_section({}, {}, A, B, source_a=source_key("x"), source_b=source_key("x"))
    assert d is not None


def test_each_diff_line_carries_its_text_for_the_front_end_check():
    text = cell_line_text("def k():\n    x = 1\n    y = 2\n", body_line=8)
    assert text == {8: "def k():", 9: "x = 1", 10: "y = 2"}
    d, _ = diff_section({}, {}, A, B, cell_text=text)
    assert d["lines"]["9"]["text"] == "x = 1" and "text" not in d["lines"]["11"]


def test_the_bundle_carries_the_diff_beside_the_current_lines():
    r = type("R", (), {"backend": "triton", "diagnostics": ()})()
    d, _ = diff_section({"BLOCK": 1}, {"BLOCK": 2}, A, B)
    bundle = editor_bundle(r, B, diff=d)
    payload = bundle[MIME_TYPE]
    assert set(payload["lines"]) == {"9", "10", "11"}  # B's own: what an older front end draws
    assert payload["diff"] == d
    assert "stall share difference for 3 line(s): BLOCK=2 (current) against BLOCK=1" in \
        bundle["text/plain"]
    bad = json.loads(json.dumps(d))
    bad["lines"]["9"]["share"] = [1.5, 0.1]
    with pytest.raises(ValueError, match="0..1"):
        editor_bundle(r, B, diff=bad)
    noted = editor_bundle(r, B, note="no per-line difference: why")
    assert noted[MIME_TYPE]["note"] == "no per-line difference: why" and "diff" not in \
        noted[MIME_TYPE]


def test_share_diff_of_a_comparisons_lines_diff():
    lines, ta, tb = share_diff({3: {"samples": (0, 5, 5), "stalls": {"wait": (0, 5, 5)}}})
    assert (ta, tb) == (0, 5) and lines["3"]["share"] == [0.0, 1.0]


# -- the panel -------------------------------------------------------------------------------
SRC = """# ktune: BLOCK in [1, 2, 4]
def scale(x, y, n):
    y[:] = 2 * x
"""
NS = {"inputs": lambda: dict(x=np.random.rand(64), y=np.empty(64), n=64),
      "reference": lambda x, y, n: 2 * x}
LINE = "scale --backend fake --inputs inputs --reference reference --out y --budget-ms 5"
#: per-line samples by BLOCK: line 4 (the store) takes less of the stalls at BLOCK=2
SAMPLES = {1: {3: {"samples": 100, "stalls": {"wait": 100}},
               4: {"samples": 300, "stalls": {"long_scoreboard": 300}}},
           2: {3: {"samples": 300, "stalls": {"wait": 250, "math": 50}},
               4: {"samples": 100, "stalls": {"long_scoreboard": 100}}}}


@pytest.fixture()
def panel(worker, monkeypatch):
    from jupyter_ktune.api import parse_cell
    from jupyter_ktune.measure.compare import summarize
    from jupyter_ktune.session import TuningSession
    from jupyter_ktune.ui import breakdown, compare_view
    from jupyter_ktune.ui.app import KernelPanel

    def stand_in(worker, spec, config, lines=False, timeout=180.0):
        if not lines:
            raise RuntimeError("no scope profiler here")
        got = SAMPLES.get(config["BLOCK"], {})
        return Breakdown.lines_only(spec.name, got, "ncu (stand-in)")

    monkeypatch.setattr(breakdown, "request_breakdown", stand_in)
    # the gutter needs no timing: the Compare tab's interleaved runs are left out here
    monkeypatch.setattr(compare_view, "compare_configs", lambda spec, worker, a, b, **kw:
                        summarize(a, b, None, reason="not timed in this test"))
    spec = parse_cell(LINE, SRC, NS)
    session = TuningSession(spec, worker, {}, prefetch=False)
    p = KernelPanel(session, spec.space.config({}), ceilings=None)
    session.wait_idle()
    assert p.result is not None and p.current is not None
    yield p
    p.compare_view.unpin()
    session.close()


def _shown(panel):
    return panel.breakdown._shown_marks[MIME_TYPE] if panel.breakdown._shown_marks else None


def _move(panel, block):
    panel.controls.widgets["BLOCK"].value = block
    panel.session.wait_idle()
    assert panel.result.config["BLOCK"] == block


def test_pin_two_breakdowns_and_the_gutter_gets_the_difference_until_unpin(panel):
    panel.breakdown.start().join(60)
    plain = _shown(panel)
    assert plain is not None and "diff" not in plain and set(plain["lines"]) == {"3", "4"}
    assert plain["note"] == "samples of BLOCK=1"  # the bars name their config
    panel.pin()  # BLOCK=1, with its breakdown
    assert "diff" not in _shown(panel)  # the current config is the pinned one
    _move(panel, 2)
    # B has no breakdown yet: A's plain marks stay, named so, and no half comparison
    assert "diff" not in _shown(panel) and _shown(panel)["note"] == "samples of BLOCK=1"
    panel.breakdown.start().join(60)
    shown = _shown(panel)
    d = shown["diff"]
    assert d["a"] == "BLOCK=1" and d["b"] == "BLOCK=2"
    assert d["lines"]["4"]["share"] == [0.75, 0.25]  # the store: -50 points, better
    assert d["lines"]["3"]["share"] == [0.25, 0.75]  # the line above: +50 points, worse
    assert d["lines"]["4"]["text"] == "y[:] = 2 * x"
    assert shown["lines"]["3"]["samples"] == 300  # B's own samples beside the diff
    # a config without a breakdown: back to the plain marks
    _move(panel, 4)
    assert "diff" not in _shown(panel)
    _move(panel, 2)
    assert "diff" in _shown(panel)
    panel.unpin()
    assert "diff" not in _shown(panel) and _shown(panel)["lines"]["3"]["samples"] == 300


def test_different_sources_say_so_and_draw_no_diff(panel):
    panel.breakdown.start().join(60)
    panel.pin()
    _move(panel, 2)
    panel.breakdown.start().join(60)
    gutter = panel.compare_view.gutter
    lines, _key = gutter.lines[panel.pinned]
    gutter.lines[panel.pinned] = (lines, source_key("another source"))
    gutter.update()
    shown = _shown(panel)
    assert "diff" not in shown and "different cell sources" in shown["note"]
