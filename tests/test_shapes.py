"""Tuning over shapes: a sweep per shape, winners side by side, dispatch-table exports."""

from __future__ import annotations

import ast

import numpy as np
import pytest

from jupyter_ktune.api import parse_cell
from jupyter_ktune.results import Status
from jupyter_ktune.space import Config, Param, Space
from jupyter_ktune.tuning import tune
from jupyter_ktune.tuning.report import Evaluation, TuneReport
from jupyter_ktune.tuning.shapes import ShapesReport
from jupyter_ktune.tuning.store import StoredResult

SPACE = Space((Param("BLOCK", (16, 64, 128)), Param("num_warps", (4, 8))))


def one(block, warps, ms):
    r = StoredResult(Config({"BLOCK": block, "num_warps": warps}), Status.OK,
                     times_ms=np.full(10, ms), kernel="mm", backend="triton", device="H200")
    return TuneReport("mm", "triton", "greedy", SPACE, "H200", (Evaluation(r, 0.0),),
                      valid_configs=6)


def shapes_report():
    shapes = (dict(M=512, N=512), dict(M=4096, N=4096), dict(M=3000, N=4000), dict(M=64, N=64))
    reports = (one(16, 4, 0.010), one(128, 8, 1.0), one(128, 8, 0.9), one(16, 4, 0.001))
    return ShapesReport(shapes, reports)


def test_the_triton_dispatch_lists_each_distinct_winner_once_with_the_key():
    text = shapes_report().export("triton")
    ast.parse(text)
    assert text.count("triton.Config(") == 2 and "key = ['M', 'N']" in text
    assert "triton.Config({'BLOCK': 128}, num_warps=8)" in text
    assert "M=4096 N=4096: BLOCK=128 num_warps=8 (1000.00 µs)" in text


def test_the_cpp_dispatch_switches_over_shape_buckets():
    text = shapes_report().export("cpp")
    # buckets ceil(log2): 512 -> 9, 4096 -> 12, 3000 -> 12, 4000 -> 12, 64 -> 6; key b_M*64 + b_N
    assert "case 585: return {16, 4};" in text          # 9 * 64 + 9
    assert "case 780: return {128, 8};" in text         # 12 * 64 + 12 (4096 and 3000x4000)
    assert text.count("case 780") == 1                  # two shapes, one bucket: listed once
    assert text.count("case ") == 3 and "M=3000" not in text   # 3000 and 4000 round up to 4096
    assert "case 390: return {16, 4};" in text          # 6 * 64 + 6
    assert "default: return {16, 4};" in text           # ties: the first of the most common
    assert "switch (kt_bucket(M) * 64 + kt_bucket(N) * 1)" in text
    assert "struct kt_mm_config { int BLOCK; int num_warps; };" in text


def test_the_pallas_dispatch_is_keyed_by_kernel_device_and_shape():
    table = shapes_report().export("pallas")
    ns: dict = {}
    exec(table, ns)
    assert ns["TUNED_BLOCK_SIZES"][("mm", "H200", 4096, 4096)] == {"BLOCK": 128, "num_warps": 8}
    assert len(ns["TUNED_BLOCK_SIZES"]) == 4
    with pytest.raises(ValueError, match="Choose one of: cpp, pallas, triton"):
        shapes_report().export("cuda")


def test_the_winners_table_shows_every_shape():
    r = shapes_report()
    lines = r.text().splitlines()
    assert lines[0].split() == ["shape", "winner", "median", "µs", "evaluated"]
    assert "M=3000 N=4000" in lines[3] and "BLOCK=128 num_warps=8" in lines[3]
    assert r._repr_html_().count("<tr>") == 5


def inputs(n=256):
    x = np.random.rand(n)
    return dict(x=x, y=np.empty_like(x), n=n)


def reference(x, y, n):
    return 2 * x


# the best BLOCK depends on n: 1 for small inputs, 8 for large ones
SRC = """# ktune: BLOCK in [1, 2, 4, 8]
import time
def scale(x, y, n):
    best = 1 if n < 1000 else 8
    t = time.perf_counter() + 1e-4 * (1 + abs(BLOCK - best)) ** 2
    while time.perf_counter() < t:
        pass
    y[:] = 2 * x
"""


def test_tune_over_shapes_gives_each_shape_its_own_winner(worker, tmp_path):
    spec = parse_cell("scale --backend fake --inputs inputs --reference reference --out y "
                      "--budget-ms 4", SRC, {"inputs": inputs, "reference": reference})
    report = tune(spec, "exhaustive", store=tmp_path, workers=[worker], top_k=0,
                  shapes=[dict(n=256), dict(n=4096)])
    assert [w.config["BLOCK"] for w in report.winners] == [1, 8]
    assert not any(e.cached for e in report.reports[1].evaluations)  # shapes never share rows
    assert "key = ['n']" in report.export("triton")
    with pytest.raises(TypeError, match="shapes must be a list of dicts"):
        tune(spec, shapes=dict(n=4))


def test_the_winners_chart_has_a_bar_per_shape_coloured_by_winner():
    """Issue 21: winners per shape as a plot beside the table: a bar per shape at its winner's
    time (log axis: the 64x64 shape's 1 µs bar is the shortest, the 4096² one's 1 ms the
    tallest), one colour per distinct winner, a legend naming each winner once."""
    import re
    import xml.etree.ElementTree as ET

    svg = shapes_report().svg()
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    bars = [r for r in root.iter(f"{ns}rect") if r.get("class") == "winner"]
    assert [b.find(f"{ns}title").text for b in bars] == [
        "M=512 N=512: BLOCK=16 num_warps=4, 10 µs", "M=4096 N=4096: BLOCK=128 num_warps=8, 1 ms",
        "M=3000 N=4000: BLOCK=128 num_warps=8, 900 µs", "M=64 N=64: BLOCK=16 num_warps=4, 1 µs"]
    heights = [float(b.get("height")) for b in bars]
    assert heights.index(max(heights)) == 1 and heights.index(min(heights)) == 3
    assert min(heights) > 10  # the fastest shape's bar shows too (a decade below it)
    assert heights[0] > heights[3] and heights[1] > heights[2]  # ordered by time on a log axis
    fills = [b.get("fill") for b in bars]
    assert fills[0] == fills[3] != fills[1] == fills[2]
    legend = re.findall(r"<text x=\"\d+\" y=\"\d+\">(BLOCK=[^<]+)</text>", svg)
    assert legend == ["BLOCK=16 num_warps=4", "BLOCK=128 num_warps=8"]
    assert svg in shapes_report()._repr_html_()


def test_the_winners_chart_fits_long_winners_and_writes_no_exponent():
    """Seen on liger's dyt tuned over three shapes in Triton's interpreter: the legend's
    winners (``BLOCK_N=2048 num_stages=2 num_warps=16``) ran past the chart's edge, and the
    1000 ms grid line read ``1e+03 ms``."""
    import xml.etree.ElementTree as ET

    from jupyter_ktune.tuning.shapes_chart import winners_svg

    long = "BLOCK_N=2048 num_stages=2 num_warps=16"
    svg = winners_svg([("M=4 N=300", long, 5.35), ("M=64 N=4096", long + "x", 186.2)])
    assert "e+" not in svg and ">1 s<" in svg
    assert float(ET.fromstring(svg).get("width")) >= 64 + 14 + 6.5 * len(long + "x")
