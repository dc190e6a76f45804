"""The pinned-vs-current per-line stall difference, as the editor bundle's ``diff`` section.

Once a config is pinned (issue 38) and both it (A) and the current config (B) have a cycle
breakdown with per-line stall samples, the editor gutter shows, beside each cell line, how that
line's share of the stall samples moved from A to B, instead of B's plain sample bars.

What is compared, and why:

* **Shares, not counts.** Each line's samples are divided by the samples of all the cell's lines
  in the same breakdown (the plain gutter's "% of the cell"). Two profiles of different length
  (a faster config, a shorter sampling window) then compare: a line at 60 % of A's stalls and
  48 % of B's moved by -12 percentage points, whatever the totals were. A share is not a time: a
  faster B can raise a line's share while its absolute samples fall, and the gutter says that it
  is a difference of shares of samples between two configs.
* **The same cell lines.** Breakdowns give cell lines (1 = the ``%%kernel`` line). When only the
  tunables change, the source and so its line numbers are the same for A and B. Each
  breakdown is recorded with a key of the source it was taken from; when A's and B's keys
  differ there is no diff (``note`` says why) and the gutter keeps B's plain marks, since a
  line number would name different code in each. Each diff line also carries the text of the
  line as profiled: the front end shows no diff when the editor's line no longer reads so (the
  cell was edited after the run), rather than a difference beside other code.
* **Which stall reasons moved.** Per line and reason, the reason's samples as a share of the
  cell's samples, in A and in B; the front end names the ones that moved most.

When only one side (or neither) has per-line samples, :func:`diff_section` gives None and the
caller keeps the plain marks: nothing half-compared is drawn. The diff ends on unpin, or when
the current config changes to one without per-line samples (see ``ui/compare_gutter.py``).

The section, inside the bundle of :mod:`jupyter_ktune.editor`::

    "diff": {"a": "BLOCK=128", "b": "BLOCK=256", "a_total": 1000, "b_total": 800,
             "lines": {"9": {"samples": [600, 384], "share": [0.6, 0.48],
                             "text": "tl.store(y + offs, ...)",
                             "stalls": {"long_scoreboard": [0.42, 0.32], "wait": [0.0, 0.01]}}}}
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from jupyter_ktune.measure.compare import lines_diff
from jupyter_ktune.space import Config

#: what the diff is, in words, for the note and the hover text
WHAT = ("a difference of shares of stall samples between two configs (each breakdown's cell "
        "total is 100 %), not of time")


def source_key(source: str) -> str:
    """A short key of a cell source, recorded with each breakdown to match A's lines to B's."""
    return hashlib.sha1(source.encode()).hexdigest()[:12]


def cell_line_text(source: str, body_line: int) -> dict[int, str]:
    """Cell line -> its stripped text, for a spec's source that starts on cell line
    ``body_line`` (the line after ``%%kernel``)."""
    return {body_line + i: text.strip() for i, text in enumerate(source.splitlines())}


def share_diff(diff: Mapping[int, Mapping[str, Any]]) -> tuple[dict[str, dict[str, Any]], int,
                                                               int]:
    """Shares of the cell's samples per line from a ``Comparison.lines_diff``-shaped map.

    Returns ``(lines, a_total, b_total)``: ``lines`` maps a cell line (a string) to
    ``{"samples": [a, b], "share": [a, b], "stalls": {reason: [a share, b share]}}``, the totals
    are the cell's samples in A and in B (every line of either is in ``diff``, so they are the
    whole cell's).

    Examples
    --------
    >>> lines, ta, tb = share_diff({9: {"samples": (6, 2, -4), "stalls": {}},
    ...                             10: {"samples": (4, 6, 2), "stalls": {}}})
    >>> lines["9"]["share"], ta, tb
    ([0.6, 0.25], 10, 8)
    """
    a_total = sum(int(d["samples"][0]) for d in diff.values())
    b_total = sum(int(d["samples"][1]) for d in diff.values())

    def share(n: int, total: int) -> float:
        return round(n / total, 6) if total else 0.0

    out: dict[str, dict[str, Any]] = {}
    for line, d in sorted(diff.items()):
        sa, sb = int(d["samples"][0]), int(d["samples"][1])
        stalls = {str(r): [share(int(t[0]), a_total), share(int(t[1]), b_total)]
                  for r, t in dict(d.get("stalls", {})).items()}
        out[str(int(line))] = {"samples": [sa, sb],
                               "share": [share(sa, a_total), share(sb, b_total)],
                               "stalls": stalls}
    return out, a_total, b_total


def _label(config: Any) -> str:
    return Config(config).label() if isinstance(config, Mapping) else str(config)


def diff_section(a: Any, b: Any, lines_a: Mapping[int, Any] | None,
                 lines_b: Mapping[int, Any] | None, *, source_a: str = "", source_b: str = "",
                 cell_text: Mapping[int, str] | None = None) -> tuple[dict[str, Any] | None, str]:
    """The bundle's ``diff`` section for config ``b`` (current) against ``a`` (pinned), or None
    with the reason.

    ``lines_a``/``lines_b`` are the two breakdowns' per-line samples (``Breakdown.lines``);
    ``source_a``/``source_b`` the :func:`source_key` each was taken from (empty: unknown, taken
    as the same); ``cell_text`` the cell's line texts (:func:`cell_line_text`), sent so the
    front end can refuse the diff after an edit.
    """
    diff, note = lines_diff(SimpleNamespace(lines=lines_a), SimpleNamespace(lines=lines_b))
    if not diff:
        return None, note
    if source_a and source_b and source_a != source_b:
        return None, ("the pinned and the current config were profiled from different cell "
                      "sources: their line numbers name different code, so no per-line "
                      "difference is shown")
    lines, a_total, b_total = share_diff(diff)
    for line, entry in lines.items():
        text = (cell_text or {}).get(int(line))
        if text is not None:
            entry["text"] = text
    return {"a": _label(a), "b": _label(b), "a_total": a_total, "b_total": b_total,
            "lines": lines}, ""


def check_diff(diff: Mapping[str, Any]) -> dict[str, Any]:
    """Check a ``diff`` section before it goes to the browser (ValueError when malformed)."""
    out = {"a": str(diff["a"]), "b": str(diff["b"]), "a_total": int(diff["a_total"]),
           "b_total": int(diff["b_total"]), "lines": {}}
    for key, d in dict(diff["lines"]).items():
        if int(key) < 1:
            raise ValueError(f"diff line {key!r} is not a cell line")
        samples = [int(v) for v in d["samples"]]
        share = [float(v) for v in d["share"]]
        if len(samples) != 2 or len(share) != 2 or min(samples) < 0 or not all(
                0.0 <= s <= 1.0 for s in share):
            raise ValueError(f"diff line {key}: samples and shares are [A, B], counts and 0..1")
        entry: dict[str, Any] = {"samples": samples, "share": share,
                                 "stalls": {str(r): [float(v[0]), float(v[1])]
                                            for r, v in dict(d.get("stalls", {})).items()}}
        if "text" in d:
            entry["text"] = str(d["text"])
        out["lines"][str(int(key))] = entry
    return out
