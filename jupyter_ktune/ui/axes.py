"""Axes and legends of the panel's small Bokeh figures: labels that never overlap, legends that
never cover a point (issue 35: 41 heatmap tick labels ran into one strip; the history's legend sat
on its points).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bokeh.models import CustomJSTickFormatter, Legend, LegendItem

#: pixels a tick label needs per character, and between two labels (8-9 pt text)
CHAR_PX, GAP_PX = 7, 8
#: pixels a label needs along a vertical axis (one line of text)
LINE_PX = 14


def quiet_axes(f: Any) -> None:
    """Few ticks and plain numbers, so labels never run into each other."""
    for axis in (f.xaxis, f.yaxis):
        axis.ticker.desired_num_ticks = 4
        if hasattr(axis.formatter, "use_scientific"):
            axis.formatter.use_scientific = False
    f.title.text_font_size = "10pt"


def label_step(factors: Sequence[str], length_px: float, vertical: bool = False) -> int:
    """Label every ``step``-th factor so that the labels fit ``length_px`` side by side.

    A horizontal axis needs the longest label's width per label, a vertical one a line each.

    Examples
    --------
    >>> label_step([str(v) for v in range(41)], 280)   # 41 labels of up to 2 digits
    4
    >>> label_step(["64", "128", "256"], 280)
    1
    """
    if not factors:
        return 1
    per = LINE_PX if vertical else max(len(f) for f in factors) * CHAR_PX + GAP_PX
    fit = max(int(length_px // per), 1)
    return max(-(-len(factors) // fit), 1)


def thin_labels(axis: Any, factors: Sequence[str], length_px: float,
                vertical: bool = False) -> int:
    """Show every ``step``-th label of a categorical axis (the first included); return the step.

    Every factor keeps its tick and its cell, and the hover still names it; only the label text
    of the others is left blank. Bokeh's categorical axis takes no label overrides, so a
    formatter does it in the browser.
    """
    step = label_step(factors, length_px, vertical)
    axis.formatter = CustomJSTickFormatter(args={"step": step},
                                           code="return index % step == 0 ? tick : ''")
    return step


def legend_below(f: Any, renderer: Any, field: str) -> Legend:
    """A legend grouped by ``field``, laid out in a row under the plot, outside the data area."""
    legend = Legend(items=[LegendItem(label={"field": field}, renderers=[renderer])],
                    orientation="horizontal", location="center", label_text_font_size="8pt",
                    padding=2, spacing=6, margin=2, border_line_alpha=0)
    f.add_layout(legend, "below")
    return legend
