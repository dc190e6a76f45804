"""A jupyter_bokeh ``BokehModel`` whose views always start from the document's current data,
and whose data the browser cannot take back to an older version.

jupyter_bokeh serialises the Bokeh document once, when the widget is made, and sends every
later change as a patch to the views that exist at that moment. A view made later (the cell's
output shown after the first result arrived, a page reload with a live kernel, a second view of
the same output) starts from that first serialisation and never sees the earlier patches: the
panel's figures were empty until the next change. Here every state request (the comm's opening
state, a reload's ``request_state``) carries a fresh serialisation, the panel pushes one when it
is displayed, and one more shortly after if patches were sent while the browser may not yet have
had a view to apply them to.

Two races made a docked panel show the previous variant's histogram under the new variant's
title, or a history missing its last point (the Galata dock spec, on a loaded CI machine):

- **Echoes.** After applying a patch, jupyter_bokeh's view sends back the document events the
  patch raised, a data source's whole ``data`` among them. The kernel takes such a message on
  the shell thread while the panel's results arrive on the session's thread, so an echo of one
  variant's data could land after the next variant's was set, and put the older data back in
  the kernel, unseen by the browser. The next redraw then appended to the old history, and the
  next full serialisation sent the old histogram. The panels' data sources are written by
  Python only (no view has an edit tool), so the browser's changes to a source's data are
  dropped; its other changes (a tap's selection, a plot's size, a pan) still reach Python.
- **Serialisation against patches.** A full serialisation (on display, a tab change, a state
  request, the settle timer) made on one thread while a result's patch was sent on another
  could reach the browser after that patch without its change, and replace the view's document
  with the older state. Sending a patch and serialising-then-sending the state now hold one
  lock, so a change missing from a serialisation is always sent after it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from bokeh.core.json_encoder import serialize_json
from bokeh.core.serialization import Deserializer, Serialized
from bokeh.models import ColumnDataSource
from jupyter_bokeh.widgets import BokehModel

#: After a display, patches sent within this many seconds may reach a model with no view yet.
SETTLE_S = 1.5
#: Browser events that change a data source's columns (``ModelChanged`` only on ``data``).
_DATA_EVENTS = ("ModelChanged", "ColumnsStreamed", "ColumnsPatched")


class LiveBokehModel(BokehModel):
    """``BokehModel`` that re-serialises its document for every new view, sends patches and
    serialisations in the order of the changes, and keeps its data sources Python's."""

    def __init__(self, model: Any, **kwargs: Any) -> None:
        self._displayed_at: float | None = None
        self._patched_since_display = False
        self._timer: threading.Timer | None = None
        #: held while a patch is sent and while the state is serialised and sent (module text)
        self._send_lock = threading.RLock()
        super().__init__(model, **kwargs)

    def get_state(self, key: Any = None) -> dict[str, Any]:
        """The widget's state, with the document as it is now rather than when it was made."""
        with self._send_lock:
            state = super().get_state(key)
            if "render_bundle" in state:
                state["render_bundle"] = serialize_json(self._model_to_traits(self._model))
            return state

    def send_state(self, key: Any = None) -> None:
        """Serialise and send under the lock: no patch goes out between the two."""
        with self._send_lock:
            super().send_state(key)

    def _document_patched(self, event: Any) -> None:
        with self._send_lock:
            super()._document_patched(event)
        shown = self._displayed_at
        if shown is not None and time.monotonic() - shown < SETTLE_S:
            self._patched_since_display = True

    def _sync_model(self, model: BokehModel, content: dict[str, Any], buffers: list[Any]) -> None:
        """Apply a browser event, unless it would change a data source's data (module text)."""
        if self._changes_source_data(content):
            return
        if content.get("event") == "jsevent" and content.get("kind") == "ModelChanged":
            self._apply_change(content)
        else:
            super()._sync_model(model, content, buffers)

    def _apply_change(self, content: dict[str, Any]) -> None:
        """A property the browser changed, set with this widget as its setter (no echo back).

        jupyter_bokeh sets it and then calls the property's Python callbacks once more itself,
        though setting it had called them: a heatmap tap asked for its config twice (the
        session serves only the newest pending request, so the first mostly gave way, but not
        once the worker had taken it: then the config ran twice for one tap)."""
        assert self._document is not None
        body = {k: v for k, v in content.items() if k != "event"}
        event = Deserializer(list(self._document.models), setter=self).deserialize(
            Serialized(content=body, buffers=[]))
        target, attr = event["model"], event["attr"]
        descriptor = target.lookup(attr)
        new = descriptor.property.prepare_value(target, descriptor.name, event["new"])
        descriptor._set(target, descriptor._get(target), new, setter=self)  # noqa: SLF001

    def _changes_source_data(self, content: dict[str, Any]) -> bool:
        kind = content.get("kind")
        if content.get("event") != "jsevent" or kind not in _DATA_EVENTS:
            return False
        if kind == "ModelChanged" and content.get("attr") != "data":
            return False
        ref = content.get("model")
        doc = self._document
        target = doc.get_model_by_id(ref.get("id")) if isinstance(ref, dict) and doc else None
        return isinstance(target, ColumnDataSource)

    def refresh(self) -> None:
        """Send the whole document to every view (they re-render from it)."""
        with self._send_lock:
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
