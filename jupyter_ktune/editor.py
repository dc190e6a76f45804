"""The editor bundle: compiler messages and per-line data for the cell editor.

The ``%%kernel`` magic displays one MIME bundle beside its result when there is something to mark
in the cell's editor. The JupyterLab extension (``labextension/src/renderer.ts``) renders it as a
one-line note ("2 compiler messages marked in the editor") and draws the marks in the editor of
the cell that owns the output; clearing the output or re-running the cell removes them.

MIME type ``application/vnd.jupyter-ktune.editor+json``, version 1::

    {
      "version": 1,
      "backend": "cuda",
      "diagnostics": [{"line": 7, "column": 3, "severity": "error", "message": "..."}],
      "lines": {"9": {"samples": 340, "stalls": {"long_scoreboard": 210, "wait": 40}}}
    }

Line numbers are cell lines: line 1 is the ``%%kernel`` line, so they are the editor's own line
numbers. ``column`` is 1-based or null; ``severity`` is ``error``, ``warning`` or ``note``.
``lines`` maps a cell line (as a string, JSON keys are strings) to the samples attributed to it
and their stall reasons; the cycle-breakdown feature fills it, and an empty map draws nothing.
Two optional keys: ``diff``, the pinned-vs-current per-line stall difference that the gutter
shows instead of the plain bars (its shape and what it compares: :mod:`jupyter_ktune.editor_diff`),
and ``note``, a line for the output's note (why there is no diff, say). A front end that does
not know them draws ``lines``, the current config's own samples.
Diagnostics without a line (a linker message, say) are left out: they stay in the result's table.
Front ends without the extension show the ``text/plain`` part instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

MIME_TYPE = "application/vnd.jupyter-ktune.editor+json"
VERSION = 1

_SEVERITIES = {"error": "error", "fatal": "error", "fatal error": "error",
               "warning": "warning", "note": "note", "remark": "note", "info": "note"}


def _diagnostic(d: Any) -> dict[str, Any] | None:
    line = getattr(d, "line", None)
    if not isinstance(line, int) or line < 1:
        return None
    column = getattr(d, "column", None)
    severity = _SEVERITIES.get(str(getattr(d, "severity", "")).lower(), "note")
    return {"line": line,
            "column": column if isinstance(column, int) and column >= 1 else None,
            "severity": severity, "message": str(getattr(d, "message", ""))}


def line_data(lines: Mapping[int, Mapping[str, Any]] | None) -> dict[str, dict[str, Any]]:
    """Check and normalise per-line data to the bundle's ``lines`` shape.

    ``lines`` maps a cell line to ``{"samples": int, "stalls": {reason: int}}``. Lines below 1 and
    negative counts are refused with ValueError, so a bad producer fails here, not in the browser.
    """
    out: dict[str, dict[str, Any]] = {}
    for line, data in (lines or {}).items():
        n = int(line)
        if n < 1:
            raise ValueError(f"cell line {line!r} is not 1 or more")
        samples = int(data.get("samples", 0))
        stalls = {str(k): int(v) for k, v in dict(data.get("stalls", {})).items()}
        if samples < 0 or any(v < 0 for v in stalls.values()):
            raise ValueError(f"cell line {n}: sample counts must not be negative")
        out[str(n)] = {"samples": samples, "stalls": stalls}
    return out


def editor_payload(backend: str, diagnostics: Iterable[Any] = (),
                   lines: Mapping[int, Mapping[str, Any]] | None = None,
                   diff: Mapping[str, Any] | None = None, note: str = "") -> dict[str, Any]:
    """Return the bundle's JSON payload (``version``, ``backend``, ``diagnostics``, ``lines``;
    ``diff`` and ``note`` only when given, so a bundle without them reads as before)."""
    placed = [p for p in (_diagnostic(d) for d in diagnostics) if p is not None]
    out = {"version": VERSION, "backend": backend, "diagnostics": placed,
           "lines": line_data(lines)}
    if diff is not None:
        from jupyter_ktune.editor_diff import check_diff

        out["diff"] = check_diff(diff)
    if note:
        out["note"] = note
    return out


def _plain(payload: Mapping[str, Any]) -> str:
    rows = [f"cell line {d['line']}: {d['severity']}: {d['message']}"
            for d in payload["diagnostics"]]
    if payload.get("diff"):
        d = payload["diff"]
        rows.append(f"per-line stall share difference for {len(d['lines'])} line(s): "
                    f"{d['b']} (current) against {d['a']} (pinned)")
    elif payload["lines"]:
        rows.append(f"per-line samples for {len(payload['lines'])} line(s)")
    if payload.get("note"):
        rows.append(payload["note"])
    return "\n".join(rows)


def editor_bundle(result: Any, lines: Mapping[int, Mapping[str, Any]] | None = None,
                  diff: Mapping[str, Any] | None = None, note: str = ""
                  ) -> dict[str, Any] | None:
    """Build the MIME bundle for a RunResult, or None when there is nothing to mark.

    ``lines`` is the per-line data (see :func:`line_data`); without it the bundle carries the
    result's compiler diagnostics only. ``diff`` and ``note``: see the module's docstring.
    """
    payload = editor_payload(getattr(result, "backend", ""), getattr(result, "diagnostics", ()),
                             lines, diff, note)
    if not payload["diagnostics"] and not payload["lines"]:
        return None
    return {MIME_TYPE: payload, "text/plain": _plain(payload)}


def show_editor_marks(result: Any, lines: Mapping[int, Mapping[str, Any]] | None = None) -> bool:
    """Display the editor bundle of a result when it has something to show; True if shown."""
    bundle = editor_bundle(result, lines)
    if bundle is None:
        return False
    from IPython.display import display

    display(bundle, raw=True)
    return True
