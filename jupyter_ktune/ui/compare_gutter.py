"""The pinned comparison in the editor gutter: per cell line, how its share of the stall samples
moved from the pinned config A to the current config B (issue 38).

The Compare tab (:mod:`jupyter_ktune.ui.compare_view`) holds one :class:`CompareGutter`. It
keeps, per config, the last cycle breakdown with per-line samples (with the key of the source it
was taken from), and gives the panel's breakdown button the bundle to show
(``BreakdownButton.marks_override``): the diff while

* a config is pinned, the current config is another one, and
* both have per-line samples taken from the same cell source;

otherwise None, and the button shows its plain marks (the last breakdown's own samples), so a
half comparison is never drawn. The diff mode so ends on unpin, when the current config moves
to one without per-line samples, or back to the pinned one; a new breakdown of either config
replaces that config's samples, and the diff is drawn again from the newest of each. It is
computed from the breakdowns alone, as soon as the sliders move: the interleaved timing of the
Compare tab is not needed for it. What is compared, and why: :mod:`jupyter_ktune.editor_diff`.
"""

from __future__ import annotations

import threading
from typing import Any

from jupyter_ktune.editor import editor_bundle
from jupyter_ktune.editor_diff import cell_line_text, diff_section, source_key
from jupyter_ktune.space import Config


class CompareGutter:
    """The editor-gutter side of one panel's Pin and compare."""

    def __init__(self, view: Any):
        self.view = view
        self.lines: dict[Config, tuple[dict[int, Any], str]] = {}  # per config: lines, source
        self.note = ""  # why the last update drew no diff ('' when it did, or nothing to say)
        # the current config as the Compare tab last saw it: its delivery comes before the
        # panel's own, so ``panel.result`` may still be the previous config then
        self.current: Any = None  # a RunResult
        self._lock = threading.Lock()
        button = view.panel.breakdown
        button.listeners.append(self.noted)
        button.marks_override = self.bundle

    def noted(self, config: Any, breakdown: Any) -> None:
        """Keep a breakdown's per-line samples under its config (ones without lines are not
        kept: the config's earlier samples stay the newest it has)."""
        lines = dict(getattr(breakdown, "lines", None) or {})
        if lines:
            with self._lock:
                self.lines[Config(config)] = ({int(k): v for k, v in lines.items()},
                                              source_key(self.view.panel.session.spec.source))

    def _lines_of(self, config: Config) -> tuple[dict[int, Any], str] | None:
        with self._lock:
            got = self.lines.get(config)
        if got is None:  # a breakdown the Compare tab noted (panel.breakdown.last) but we did not
            bd = self.view.breakdowns.get(config)
            if getattr(bd, "lines", None):
                got = ({int(k): v for k, v in bd.lines.items()}, "")
        return got

    def bundle(self) -> dict[str, Any] | None:
        """The diff bundle for the editor, or None to keep the plain marks (see the module)."""
        panel, pinned, result = self.view.panel, self.view.pinned, self.current
        self.note = ""
        if result is None:
            result = panel.result
        if pinned is None or result is None or Config(result.config) == pinned:
            return None
        current = Config(result.config)
        a, b = self._lines_of(pinned), self._lines_of(current)
        if a is None or b is None:
            return None
        spec = panel.session.spec
        diff, self.note = diff_section(pinned, current, a[0], b[0], source_a=a[1],
                                       source_b=b[1],
                                       cell_text=cell_line_text(spec.source, spec.body_line))
        if diff is None:
            # the current config's own samples, with the reason there is no difference
            return editor_bundle(result, b[0], note=self.note)
        return editor_bundle(result, b[0], diff=diff)

    def update(self, current: Any = None) -> None:
        """Redraw the editor marks after a pin, an unpin or a move to the ``current`` result."""
        if current is not None:
            self.current = current
        self.view.panel.breakdown.refresh_marks()
