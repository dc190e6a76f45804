"""The editor bundle: its shape, what it leaves out, and that the magic displays it."""

from __future__ import annotations

import json

import pytest

from jupyter_ktune.editor import MIME_TYPE, editor_bundle, editor_payload, line_data
from jupyter_ktune.errors import Diagnostic
from jupyter_ktune.results import RunResult, Status


def _result(*diagnostics: Diagnostic) -> RunResult:
    return RunResult(name="scale", backend="cuda", config={}, status=Status.COMPILE_ERROR,
                     diagnostics=diagnostics)


def test_bundle_carries_cell_line_diagnostics_in_the_documented_shape():
    r = _result(Diagnostic(7, "error", 'identifier "xx" is undefined', 21),
                Diagnostic(3, "warning", "unused variable"),
                Diagnostic(None, "error", "ptxas fatal"))  # no line: stays in the result table
    bundle = editor_bundle(r)
    assert set(bundle) == {MIME_TYPE, "text/plain"}
    payload = bundle[MIME_TYPE]
    assert payload == {
        "version": 1, "backend": "cuda",
        "diagnostics": [
            {"line": 7, "column": 21, "severity": "error",
             "message": 'identifier "xx" is undefined'},
            {"line": 3, "column": None, "severity": "warning", "message": "unused variable"}],
        "lines": {}}
    json.dumps(bundle)  # JSON-ready
    assert "cell line 7: error" in bundle["text/plain"]


def test_nothing_to_show_gives_no_bundle():
    assert editor_bundle(_result()) is None
    assert editor_bundle(_result(Diagnostic(None, "error", "link failed"))) is None


def test_per_line_data_is_keyed_by_cell_line():
    lines = {9: {"samples": 340, "stalls": {"long_scoreboard": 210, "wait": 40}}, 3: {"samples": 1}}
    bundle = editor_bundle(_result(), lines)
    assert bundle[MIME_TYPE]["lines"] == {
        "9": {"samples": 340, "stalls": {"long_scoreboard": 210, "wait": 40}},
        "3": {"samples": 1, "stalls": {}}}
    assert "per-line samples for 2 line(s)" in bundle["text/plain"]


def test_severities_are_normalised_and_bad_line_data_refused():
    p = editor_payload("triton", [Diagnostic(2, "fatal error", "x"), Diagnostic(4, "remark", "y")])
    assert [d["severity"] for d in p["diagnostics"]] == ["error", "note"]
    with pytest.raises(ValueError, match="not 1 or more"):
        line_data({0: {"samples": 1}})
    with pytest.raises(ValueError, match="must not be negative"):
        line_data({2: {"samples": 1, "stalls": {"wait": -1}}})


def test_the_magic_displays_the_bundle_for_a_compile_error(monkeypatch):
    """The hook in magics.py: a compile error's diagnostics go out as the editor bundle."""
    from IPython.core.interactiveshell import InteractiveShell

    import jupyter_ktune.magics as magics

    shown = []
    monkeypatch.setattr(magics, "run_kernel", lambda spec: _result(Diagnostic(5, "error", "bad")))
    monkeypatch.setattr("IPython.display.display", lambda obj, raw=False: shown.append((obj, raw)))
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jupyter_ktune")
    r = ip.run_cell_magic("kernel", "scale --no-panel", "__global__ void scale() {}\n")
    assert r.status is Status.COMPILE_ERROR
    assert len(shown) == 1 and shown[0][1] is True
    assert shown[0][0][MIME_TYPE]["diagnostics"][0]["line"] == 5


def test_no_bundle_is_displayed_when_the_result_has_no_diagnostics(monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell

    import jupyter_ktune.magics as magics

    shown = []
    monkeypatch.setattr(magics, "run_kernel", lambda spec: _result())
    monkeypatch.setattr("IPython.display.display", lambda obj, raw=False: shown.append(obj))
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jupyter_ktune")
    ip.run_cell_magic("kernel", "scale --no-panel", "__global__ void scale() {}\n")
    assert shown == []
