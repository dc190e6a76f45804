"""(c) The roofline: the current variant's arithmetic intensity and rate under the device's
ceilings.

The ceilings are the device's measured peaks (:mod:`jupyter_ktune.measure.ceilings`: a 1 GiB copy
and an fp16 cuBLAS product), never below a figure the panel has shown as achieved: on the H200 a
Triton bf16 matmul reached 743 TFLOP/s under a measured 729 (the cuBLAS product is timed under
the power limit), so the roof is raised to the achieved rate and the title says so, with the
measured figure (issue 35). The current variant is always drawn, or the figure says why it
cannot be: no ``bytes``, no ``flops``, interpreter host time, or no timing at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

import ipywidgets as w
import numpy as np
from bokeh.models import ColumnDataSource, HoverTool, Span
from bokeh.plotting import figure

from jupyter_ktune.results import RunResult
from jupyter_ktune.tunable_values import value_text

_W, _H = 330, 220


def _label(config: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={value_text(v)}" for k, v in config.items())


def why_no_point(r: RunResult) -> str:
    """Why the variant cannot be placed on the roofline, or "" when it can."""
    m = r.measurement
    if m is None:
        return f"no point: {r.status.value}, nothing timed"
    if "host time" in m.timing.method:
        return "no point: interpreter host time is not GPU time"
    if not m.flops and not m.bytes:
        return "no point: the cell gives neither flops = nor bytes ="
    if not m.bytes:
        return (f"no point: {m.tflops:,.0f} TFLOP/s achieved (dashed), but no bytes = "
                "for its FLOP/byte")
    if not m.flops:
        return f"no point: {m.gbps:,.0f} GB/s achieved, but no flops = for its FLOP/byte"
    return ""


class RooflinePanel:
    """Arithmetic intensity vs achieved rate, under ceilings never below what was achieved."""

    def __init__(self, ceilings: Mapping[str, Any] | None) -> None:
        self.ceilings = dict(ceilings or {})
        self.point = ColumnDataSource({"ai": [], "tflops": [], "label": []})
        self.roof = ColumnDataSource({"ai": [], "tflops": []})
        f = figure(width=_W, height=_H, x_axis_type="log", y_axis_type="log",
                   x_axis_label="FLOP/byte", y_axis_label="TFLOP/s", toolbar_location=None)
        f.line("ai", "tflops", source=self.roof, color="#57606a", line_width=2)
        f.scatter("ai", "tflops", source=self.point, size=10, color="#cf222e")
        f.add_tools(HoverTool(tooltips=[("variant", "@label"), ("TFLOP/s", "@tflops{0.000}"),
                                        ("FLOP/byte", "@ai{0.000}")]))
        #: the achieved rate of a variant with flops but no bytes: a level, not a point
        self.level = Span(dimension="width", line_dash="dashed", line_color="#cf222e",
                          visible=False, location=1.0)
        f.add_layout(self.level)
        f.title.text_font_size = "10pt"
        self.fig = f
        #: the highest rates shown as achieved so far: the roof never drops below them
        self.achieved = {"tflops": 0.0, "bandwidth_gbps": 0.0}
        self.note = ""  # why no point is drawn ("" when one is)
        #: what the tab shows instead of a figure with nothing to draw (no ceilings, no point:
        #: an interpreter's run), so no empty axes are ever on screen
        self.empty_note = w.HTML(layout=w.Layout(display="none"))
        self.empty_note.add_class("ktune-roofline-empty")
        self._draw_roof()

    def set_ceilings(self, ceilings: Mapping[str, Any] | None) -> None:
        """Take the device's ceilings once they are measured: a fresh notebook measures them
        after its first result, not before it (issue 33: 1.6-2.8 s of the first cell)."""
        self.ceilings = dict(ceilings or {})
        self._draw_roof()

    def drawn_ceilings(self) -> dict[str, float]:
        """The ceilings drawn: the measured peaks, raised to any rate achieved above them."""
        return {k: max(float(self.ceilings.get(k) or 0.0), self.achieved[k])
                for k in ("bandwidth_gbps", "tflops")}

    def _draw_roof(self) -> None:
        bw, peak = self.ceilings.get("bandwidth_gbps"), self.ceilings.get("tflops")
        if not (bw and peak):
            self.roof.data = {"ai": [], "tflops": []}
            self.title = "roofline (no measured ceilings)"
        else:
            drawn = self.drawn_ceilings()
            ai = np.logspace(-2, 4, 60)
            self.roof.data = {"ai": ai.tolist(), "tflops": np.minimum(
                ai * drawn["bandwidth_gbps"] / 1e3, drawn["tflops"]).tolist()}
            self.title = (f"roofline · {drawn['bandwidth_gbps']:,.0f} GB/s · "
                          f"{drawn['tflops']:,.0f} TFLOP/s")
            raised = [f"{unit} raised to the achieved (measured {self.ceilings[k]:,.0f})"
                      for k, unit in (("tflops", "TFLOP/s"), ("bandwidth_gbps", "GB/s"))
                      if drawn[k] > float(self.ceilings[k])]
            if raised:
                self.title += "\n" + "; ".join(raised)
        self.fig.title.text = self.title + (f"\n{self.note}" if self.note else "")
        empty = not (self.roof.data["ai"] or self.point.data["ai"] or self.level.visible)
        self.fig.visible = not empty
        self.empty_note.layout.display = None if empty else "none"
        self.empty_note.value = ("<small style='color:#57606a'>" + "<br>".join(
            escape(t) for t in self.fig.title.text.splitlines()) + "</small>") if empty else ""

    def show(self, r: RunResult) -> None:
        """Place the current variant, or say in the title why it cannot be placed."""
        m = r.measurement
        self.note = why_no_point(r)
        gpu = m is not None and "host time" not in m.timing.method
        if gpu and m.tflops:
            self.achieved["tflops"] = max(self.achieved["tflops"], float(m.tflops))
        if gpu and m.gbps:
            self.achieved["bandwidth_gbps"] = max(self.achieved["bandwidth_gbps"], float(m.gbps))
        self.level.visible = bool(gpu and m.tflops and not m.bytes)
        if self.level.visible:
            self.level.location = float(m.tflops)
        if self.note:
            self.point.data = {"ai": [], "tflops": [], "label": []}
        else:
            self.point.data = {"ai": [m.flops / m.bytes], "tflops": [m.tflops],
                               "label": [_label(r.config)]}
        self._draw_roof()
