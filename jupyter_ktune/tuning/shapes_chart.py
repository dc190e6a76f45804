"""The winners-per-shape chart: one bar per shape, its height the winner's time, its colour the
winning config, so a reader sees at a glance where the best config changes with the shape.

Self-contained SVG (no script, no stylesheet), as the rest of the rendered output: it shows in
JupyterLab, in a notebook reopened without its kernel, and in a static HTML export. The time
axis is logarithmic because shapes of one kernel differ by orders of magnitude in work.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

#: Colours of the distinct winners, in order of first appearance (colour-blind safe: Okabe-Ito).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
           "#000000")
_BAR, _GAP, _LEFT, _TOP, _PLOT_H, _BOTTOM = 36, 14, 64, 12, 150, 70


def winners_svg(rows: Sequence[tuple[str, str | None, float | None]]) -> str:
    """An SVG bar chart of ``(shape label, winner label or None, winner's median in ms or None)``
    per shape; a shape without a winner gets an empty slot marked "none ran correctly"."""
    if not rows:
        return ""
    timed = [ms for _s, w, ms in rows if w is not None and ms]
    lo, hi = (min(timed), max(timed)) if timed else (1e-3, 1.0)
    lo_dec, hi_dec = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if math.log10(lo) - lo_dec < 0.3:  # the fastest shape's bar must show: a decade below it
        lo_dec -= 1
    hi_dec = max(hi_dec, lo_dec + 1)
    colours: dict[str, str] = {}
    for _s, w, _ms in rows:
        if w is not None and w not in colours:
            colours[w] = PALETTE[len(colours) % len(PALETTE)]
    # wide enough for the bars and for the legend's longest winner (about 6.5 px a character)
    width = max(_LEFT + len(rows) * (_BAR + _GAP) + _GAP,
                _LEFT + 14 + math.ceil(6.5 * max(map(len, colours), default=0)) + _GAP)
    legend_h = 16 * len(colours)
    height = _TOP + _PLOT_H + _BOTTOM + legend_h

    def y(ms: float) -> float:
        frac = (math.log10(ms) - lo_dec) / (hi_dec - lo_dec)
        return _TOP + _PLOT_H * (1 - frac)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11" role="img" '
           f'aria-label="winner and its time per shape">']
    for dec in range(lo_dec, hi_dec + 1):  # decade grid lines, labelled in the unit that reads
        yy = y(10.0 ** dec)
        out.append(f'<line x1="{_LEFT}" x2="{width - _GAP}" y1="{yy:.1f}" y2="{yy:.1f}" '
                   f'stroke="#ddd"/><text x="{_LEFT - 4}" y="{yy + 4:.1f}" '
                   f'text-anchor="end">{escape(_unit(10.0 ** dec))}</text>')
    base = _TOP + _PLOT_H
    for i, (shape, winner, ms) in enumerate(rows):
        x = _LEFT + _GAP + i * (_BAR + _GAP)
        cx = x + _BAR / 2
        if winner is not None and ms:
            top = y(ms)
            out.append(f'<rect class="winner" x="{x}" y="{top:.1f}" width="{_BAR}" '
                       f'height="{base - top:.1f}" fill="{colours[winner]}">'
                       f'<title>{escape(shape)}: {escape(winner)}, {escape(_unit(ms))}</title>'
                       f'</rect><text x="{cx}" y="{top - 3:.1f}" text-anchor="middle">'
                       f'{escape(_unit(ms))}</text>')
        else:
            out.append(f'<text x="{cx}" y="{base - 4}" text-anchor="middle" fill="#cf222e">'
                       'none</text>')
        out.append(f'<text x="{cx}" y="{base + 12}" text-anchor="end" '
                   f'transform="rotate(-35 {cx} {base + 12})">{escape(shape)}</text>')
    for j, (winner, colour) in enumerate(colours.items()):
        ly = base + _BOTTOM + 16 * j
        out.append(f'<rect x="{_LEFT}" y="{ly - 9}" width="10" height="10" fill="{colour}"/>'
                   f'<text x="{_LEFT + 14}" y="{ly}">{escape(winner)}</text>')
    out.append("</svg>")
    return "".join(out)


def _unit(ms: float) -> str:
    """``1.5 µs``, ``20 ms``, ``1 s``: the winner's median as a reader writes it."""
    if ms >= 1000:  # never an exponent ("1e+03 ms"): seconds
        return f"{ms / 1000:.3g} s"
    if ms >= 1:
        return f"{ms:.3g} ms"
    if ms >= 1e-3:
        return f"{ms * 1e3:.3g} µs"
    return f"{ms * 1e6:.3g} ns"
