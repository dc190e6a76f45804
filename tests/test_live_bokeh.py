"""The panel's Bokeh widget against the two races that left a docked panel's histogram a
variant behind its title (jupyter_ktune/ui/live_bokeh.py says how): the browser's echo of a
source's data, and a full serialisation sent after a patch it does not contain.

What the browser would show is replayed here from the messages the widget sends, in their
order, into a Bokeh document (as jupyter_bokeh's view does: a state update replaces the
document, a patch's fragments are applied to it).
"""

from __future__ import annotations

import json
import threading

from bokeh.document import Document
from bokeh.models import ColumnDataSource
from bokeh.plotting import figure

from jupyter_ktune.ui.live_bokeh import LiveBokehModel


def _panel() -> tuple[LiveBokehModel, ColumnDataSource, object, list[dict]]:
    source = ColumnDataSource({"x": [1.0], "y": [1.0]})
    fig = figure(title="median 1 ms", width=200, height=200)
    fig.quad(left="x", right="y", top="y", bottom=0, source=source)
    model = LiveBokehModel(fig)
    sent: list[dict] = []
    model._send = lambda msg, buffers=None: sent.append(msg)  # what the comm would carry
    return model, source, fig, sent


def _browser(model: LiveBokehModel, sent: list[dict]) -> Document:
    """The document a view made at the widget's creation holds after ``sent``, in order."""
    doc = _from_bundle(model._model_to_traits(model._model))
    fragments: list[str] = []
    for msg in sent:
        if msg["method"] == "update" and "render_bundle" in msg["state"]:
            doc, fragments = _from_bundle(json.loads(msg["state"]["render_bundle"])), []
        elif msg["method"] == "custom" and msg["content"].get("msg") == "patch":
            fragments.append(msg["content"]["payload"])
            if len(fragments) == 3:  # header, metadata, content (these patches carry no buffers)
                doc.apply_json_patch(json.loads(fragments[2]))
                fragments = []
    return doc


def _from_bundle(bundle: dict) -> Document:
    return Document.from_json(next(iter(bundle["docs_json"].values())))


def _echo(source: ColumnDataSource, data: dict) -> dict:
    """What jupyter_bokeh's view sends back after applying a patch of ``source``'s data."""
    return {"event": "jsevent", "kind": "ModelChanged", "model": {"id": source.id},
            "attr": "data", "new": {"type": "map", "entries": [[k, v] for k, v in data.items()]}}


def test_an_echo_of_older_data_does_not_replace_the_newer_in_the_kernel() -> None:
    model, source, _fig, sent = _panel()
    source.data = {"x": [1.0, 2.0], "y": [2.0, 3.0]}  # one variant's histogram
    echo = _echo(source, dict(source.data))  # the browser applied it and echoes it
    source.data = {"x": [5.0], "y": [6.0]}  # the next variant's, set before the echo arrives
    model._sync_model(model, echo, [])
    assert source.data["x"] == [5.0]
    # what is sent next (a refresh: a display, a tab change, a reload) carries the newer data
    model.refresh()
    shown = _browser(model, sent).get_model_by_id(source.id)
    assert shown.data["x"] == [5.0]


def test_the_browsers_own_changes_still_reach_python() -> None:
    model, source, fig, _sent = _panel()
    tapped: list[list[int]] = []
    source.selected.on_change("indices", lambda _a, _o, new: tapped.append(new))
    model._sync_model(model, {"event": "jsevent", "kind": "ModelChanged",
                              "model": {"id": source.selected.id}, "attr": "indices",
                              "new": [0]}, [])
    model._sync_model(model, {"event": "jsevent", "kind": "ModelChanged",
                              "model": {"id": fig.x_range.id}, "attr": "start", "new": -3.0}, [])
    # the heatmap's tap, once: jupyter_bokeh called a property's callbacks twice per browser
    # change (in its set, then once more itself), and the tap's config ran twice
    assert tapped == [[0]]
    assert fig.x_range.start == -3.0  # a pan


def test_a_change_made_while_the_state_is_serialised_reaches_the_browser() -> None:
    model, _source, fig, sent = _panel()
    serialise = type(model)._model_to_traits
    second, release = threading.Event(), threading.Event()
    calls: list[int] = []

    def slow(m):  # refresh serialises, then send_state's get_state serialises again and sends
        bundle = serialise(m)
        calls.append(1)
        if len(calls) == 2:
            second.set()
            release.wait(1.0)  # a result's patch may come now, before this state is sent
        return bundle

    model._model_to_traits = slow
    refresh = threading.Thread(target=model.refresh)
    refresh.start()
    assert second.wait(5.0)
    result = threading.Thread(target=setattr, args=(fig.title, "text", "median 2 ms"))
    result.start()  # the session's thread: a new variant's title
    result.join(0.3)
    release.set()
    refresh.join(5.0)
    result.join(5.0)
    assert _browser(model, sent).get_model_by_id(fig.title.id).text == "median 2 ms"
