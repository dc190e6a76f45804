"""A jupyter_bokeh ``BokehModel`` whose views always start from the document's current data.

jupyter_bokeh serialises the Bokeh document once, when the widget is made, and sends every
later change as a patch to the views that exist at that moment. A view made later (the cell's
output shown after the first result arrived, a page reload with a live kernel, a second view of
the same output) starts from that first serialisation and never sees the earlier patches: the
panel's figures were empty until the next change. Here every state request (the comm's opening
state, a reload's ``request_state``) carries a fresh serialisation, the panel pushes one when it
is displayed, and one more shortly after if patches were sent while the browser may not yet have
had a view to apply them to.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from bokeh.core.json_encoder import serialize_json
from jupyter_bokeh.widgets import BokehModel

#: After a display, patches sent within this many seconds may reach a model with no view yet.
SETTLE_S = 1.5


class LiveBokehModel(BokehModel):
    """``BokehModel`` that re-serialises its document for every new view."""

    def __init__(self, model: Any, **kwargs: Any) -> None:
        self._displayed_at: float | None = None
        self._patched_since_display = False
        self._timer: threading.Timer | None = None
        super().__init__(model, **kwargs)

    def get_state(self, key: Any = None) -> dict[str, Any]:
        """The widget's state, with the document as it is now rather than when it was made."""
        state = super().get_state(key)
        if "render_bundle" in state:
            state["render_bundle"] = serialize_json(self._model_to_traits(self._model))
        return state

    def _document_patched(self, event: Any) -> None:
        super()._document_patched(event)
        shown = self._displayed_at
        if shown is not None and time.monotonic() - shown < SETTLE_S:
            self._patched_since_display = True

    def refresh(self) -> None:
        """Send the whole document to every view (they re-render from it)."""
        self.render_bundle = self._model_to_traits(self._model)

    def displayed(self) -> None:
        """Called when the output holding this widget is displayed: views made from now on see
        the current data, and patches that raced the view's creation are re-sent as a whole."""
        self.refresh()
        self._displayed_at = time.monotonic()
        self._patched_since_display = False
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(SETTLE_S, self._settle)
        self._timer.daemon = True
        self._timer.start()

    def _settle(self) -> None:
        if self._patched_since_display:
            self._patched_since_display = False
            self.refresh()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        super().close()
