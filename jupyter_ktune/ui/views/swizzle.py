"""The Swizzle tab: the shared-memory bank map of the cell's tile (``smem_tile``), or of the
generic tile for a kernel with a swizzle tunable.

The map is the model's, not a measurement: it follows the controls (not the results), so it
works with or without a device. A kernel with neither a tile nor a swizzle tunable has no tab.
"""

from __future__ import annotations

from typing import Any

from jupyter_ktune.smem_tile import SWIZZLE_NAMES
from jupyter_ktune.ui.sections import box, figures
from jupyter_ktune.ui.swizzle_map import SwizzlePanel
from jupyter_ktune.ui.views.base import View


class SwizzleTab(View):
    """``panel.swizzle`` (the map) and ``panel.has_swizzle_map`` (whether the tab is shown)."""

    title = "Swizzle"
    exports = ("swizzle", "has_swizzle_map")

    def __init__(self, panel: Any) -> None:
        super().__init__(panel)
        spec = panel.session.spec
        self.swizzle = SwizzlePanel(spec.smem_tile)
        self.has_swizzle_map = spec.smem_tile is not None or any(
            n in spec.space.names for n in SWIZZLE_NAMES)
        if self.has_swizzle_map:
            controls = panel.controls
            for widget in controls.widgets.values():
                widget.observe(lambda _c: self.swizzle.show(controls.values), names="value")
            self.swizzle.show(controls.values)

    def widget(self) -> Any:
        if not self.has_swizzle_map:
            return None
        plots = figures(self.panel, [self.swizzle.fig])
        return box([plots]), plots
