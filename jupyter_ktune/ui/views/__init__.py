"""The panel's views, one module each, registered here in the order of the panel's tabs.

To add a view: write a module here with a :class:`~jupyter_ktune.ui.views.base.View` subclass
(``title`` and the hooks it needs) and register it below, where its tab should stand; code
outside the package (an extension, a test) calls :func:`register` the same way. The panel
(:mod:`jupyter_ktune.ui.app`) makes every registered view and names none of them.
"""

from __future__ import annotations

from jupyter_ktune.ui.views.base import PanelState, View, register, registered, unregister
from jupyter_ktune.ui.views.breakdown import BreakdownTab
from jupyter_ktune.ui.views.compare import CompareTab
from jupyter_ktune.ui.views.heatmap import HeatmapTab
from jupyter_ktune.ui.views.report import ReportTab
from jupyter_ktune.ui.views.roofline import RooflineTab
from jupyter_ktune.ui.views.swizzle import SwizzleTab
from jupyter_ktune.ui.views.timing import TimingTab

__all__ = ["PanelState", "View", "register", "registered", "unregister"]

register(TimingTab)
register(HeatmapTab)
register(RooflineTab)
register(SwizzleTab)
register(ReportTab)
register(BreakdownTab)
register(CompareTab)
