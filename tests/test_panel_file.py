"""Saved panels are data (issue 34 item 2): loading a file never runs code from it.

``load_panel`` unpickled the file before checking its format, so a shared "results" file could
run ``os.system``. The file is JSON now; a pickle gets one ``[ktune]`` line and is not unpickled.
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_ktune.results import Status
from jupyter_ktune.ui import panel_file
from jupyter_ktune.ui.panel_file import PanelFileError

SAVED_H200 = (Path(__file__).resolve().parents[1] / "bench" / "results" / "panel_gpu_snapshot"
              / "2026-12-01-0850" / "h200_matmul.panel.json")


class _Payload:
    """Unpickling this runs ``os.system``: the attack on a shared results file."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("protocol", [0, 2, pickle.HIGHEST_PROTOCOL])
def test_a_pickled_panel_with_an_os_system_payload_runs_nothing(tmp_path, protocol):
    from jupyter_ktune.ui.replay import load_panel

    marker = tmp_path / "ran"
    path = tmp_path / "shared.panel.pkl"
    path.write_bytes(pickle.dumps({"format": 1, "history": [_Payload(marker)]}, protocol))
    with pytest.raises(PanelFileError) as e:
        load_panel(path)
    assert not marker.exists()
    text = str(e.value)
    assert text.startswith(f"[ktune] {path}") and "\n" not in text
    assert "older ktune" in text or "not a saved ktune panel" in text


@pytest.mark.parametrize("tag", [
    lambda m: {"$dataclass": "os:system", "fields": {"command": f"touch {m}"}},
    lambda m: {"$dataclass": "subprocess:Popen", "fields": {"args": ["touch", str(m)]}},
    lambda m: {"$enum": "builtins:eval", "value": f"open({str(m)!r}, 'w')"},
    lambda m: {"$dataclass": "jupyter_ktune.results:os.system",
               "fields": {"command": f"touch {m}"}},
    lambda m: {"$array": "O", "data": [1]}])
def test_a_json_file_naming_another_type_is_refused(tmp_path, tag):
    marker = tmp_path / "ran"
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"magic": panel_file.MAGIC, "format": panel_file.FORMAT,
                                "history": [tag(marker)]}))
    with pytest.raises(PanelFileError, match=r"^\[ktune\] .*nothing in it was run"):
        panel_file.load(path)
    assert not marker.exists()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["$dataclass", "$enum", "$map", "$tuple", "$array", "$config", "$bytes",
                         "fields", "value", "data", "x"]), inner, max_size=3),
    max_leaves=12)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(json_values)
def test_any_json_is_read_or_refused_in_one_line(tmp_path, value):
    path = tmp_path / "any.json"
    path.write_text(json.dumps({"magic": panel_file.MAGIC, "format": panel_file.FORMAT,
                                "history": value}))
    try:
        panel_file.load(path)
    except PanelFileError as exc:
        assert str(exc).startswith("[ktune]") and "\n" not in str(exc)


def test_the_saved_h200_panel_round_trips_as_data(tmp_path):
    data = panel_file.load(SAVED_H200)
    assert len(data["history"]) == 29 and data["spec"].inputs is None
    first = data["history"][0]
    assert first.status is Status.OK and first.measurement.provenance.device == "NVIDIA H200"
    again = panel_file.load(panel_file.dump(data, tmp_path / "again.json"))
    assert again["history"][0].median_ms == first.median_ms
    assert again["spec"].space == data["spec"].space
    assert again["history"][0].static == first.static


def test_the_saved_h200_panel_replays(tmp_path):
    pytest.importorskip("bokeh")
    from jupyter_ktune.ui.replay import load_panel

    replay = load_panel(SAVED_H200)
    assert replay.current is not None and replay.current.device == "NVIDIA H200"
