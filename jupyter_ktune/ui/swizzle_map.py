"""(f) The swizzle bank map: the shared-memory bank of each element of the cell's own tile.

The tile is the cell's ``smem_tile`` statement (:mod:`jupyter_ktune.smem_tile`) evaluated for
the config the controls show; banks and conflict degrees come from
:mod:`jupyter_ktune.swizzle`'s model, whose degrees match ncu's shared-load wavefronts on the
H200 (bench/results/swizzle_bank_conflicts, checked by tests/test_smem_tile.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from bokeh.models import ColumnDataSource, HoverTool, Range1d
from bokeh.palettes import Category20, Category20b
from bokeh.plotting import figure

from jupyter_ktune.errors import CellError
from jupyter_ktune.smem_tile import SWIZZLE_NAMES, SmemTile, TileShape
from jupyter_ktune.swizzle import Swizzle, bank_map
from jupyter_ktune.ui.axes import quiet_axes

_W, _H = 330, 260

#: 32 distinct colours, one per shared-memory bank
BANK_COLOURS = tuple(Category20[20]) + tuple(Category20b[20][::2]) + tuple(Category20b[20][1:4:2])


class SwizzlePanel:
    """(f) Shared-memory bank of each element of the cell's tile after swizzling, with conflicts.

    The tile is the cell's ``smem_tile`` statement evaluated for the config the controls show
    (rows, columns, element size, bytes a thread reads, swizzle mode), so the map follows the
    sliders with or without a device: it is the model of :mod:`jupyter_ktune.swizzle`, whose
    conflict degrees match ncu's shared-load wavefronts on the H200
    (bench/results/swizzle_bank_conflicts). Without the statement the map is a generic tile,
    and says so.
    """

    #: the generic tile drawn when the cell declares none: 16 rows of 128 bytes of bf16,
    #: read 16 bytes a thread (an MMA operand tile)
    GENERIC = (16, 64, 2, 16, "bfloat16")
    #: at most this many rows and columns are drawn (the counts cover the whole tile)
    MAX_DRAWN = (64, 128)

    def __init__(self, tile: SmemTile | None = None) -> None:
        self.tile = tile
        self.source = ColumnDataSource({"r": [], "c": [], "bank": [], "colour": []})
        f = figure(width=_W, height=_H, toolbar_location=None, y_range=Range1d(16.5, -0.5),
                   x_range=Range1d(-0.5, 64.5), x_axis_label="element (column)",
                   y_axis_label="row")
        f.rect("c", "r", 1, 1, source=self.source, fill_color="colour", line_color=None)
        f.add_tools(HoverTool(tooltips=[("row", "@r"), ("col", "@c"), ("bank", "@bank")]))
        quiet_axes(f)
        self.fig = f
        self.counts: dict[str, int] = {}  # the conflict degrees drawn now: row, column

    def shape(self, config: Mapping[str, Any]) -> TileShape:
        """The tile drawn for ``config``: the cell's, or the generic one with its swizzle."""
        if self.tile is not None:
            return self.tile.shape(config)
        rows, cols, elem, vec, dtype = self.GENERIC
        mode = next((config[n] for n in SWIZZLE_NAMES if n in config), "none")
        return TileShape(rows, cols, elem, vec, dtype, Swizzle.parse(mode))

    def show(self, config: Mapping[str, Any]) -> None:
        """Draw the tile of ``config``; a tile that does not fit says why in the title."""
        try:
            shape = self.shape(config)
            self.counts = shape.conflicts()
        except (CellError, ValueError) as exc:
            self.source.data = {"r": [], "c": [], "bank": [], "colour": []}
            self.counts = {}
            self.fig.title.text = str(exc).splitlines()[0]
            return
        rows, cols = min(shape.rows, self.MAX_DRAWN[0]), min(shape.cols, self.MAX_DRAWN[1])
        banks = bank_map(rows, cols, shape.elem_bytes, shape.swizzle)
        r, c = np.indices(banks.shape)
        self.source.data = {"r": r.ravel().tolist(), "c": c.ravel().tolist(),
                            "bank": banks.ravel().tolist(),
                            "colour": [BANK_COLOURS[b] for b in banks.ravel()]}
        self.fig.y_range.start, self.fig.y_range.end = rows - 0.5, -0.5
        self.fig.x_range.start, self.fig.x_range.end = -0.5, cols - 0.5
        cut = (f" (first {rows} of {shape.rows} rows, {cols} of {shape.cols} columns drawn)"
               if (rows, cols) != (shape.rows, shape.cols) else "")
        self.fig.xaxis.axis_label = "element (column)" + cut if self.tile is not None else \
            "a generic tile: declare the kernel's with smem_tile = (ROWS, COLS, DTYPE)"
        what = shape.label() if self.tile is not None else "generic " + shape.label()
        self.fig.title.text = (f"{what}\nrow read {self.counts['row']}-way, column read "
                               f"{self.counts['column']}-way bank conflict")
