"""Controls generated from the Space: a slider per numeric tunable, a dropdown per choice.

Sliders step through the *allowed values* only (a SelectionSlider), so a drag never asks for a
value the cell did not declare; the readout is the value alone (``1024``), never cut. A config
that breaks a ``require`` line is never requested: the controls stay where the user put them and a
banner says so, with the numbers, and names the config the badge and plots still show (the last
one run), so the sliders and the plots never disagree silently.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from html import escape
from typing import Any

import ipywidgets as w

from jupyter_ktune.space import Param, ParamValue, Space
from jupyter_ktune.tunable_values import value_text


def value_label(p: Param, value: ParamValue) -> str:
    """Label a value for a slider readout: the value itself, short enough never to be cut
    (``""`` for an empty name_prefix, ``[--use_fast_math]`` for a list of flags)."""
    return value_text(value)


def control_for(p: Param, value: ParamValue, name_px: int = 110) -> w.ValueWidget:
    """One widget for one tunable, starting at ``value``; ``name_px`` fits the longest name."""
    options = [(value_label(p, v), v) for v in p.values]
    layout = w.Layout(width="370px")
    style = {"description_width": f"{name_px}px"}
    if p.numeric and len(p.values) > 1:
        slider = w.SelectionSlider(options=options, value=value, description=p.name,
                                   continuous_update=True, layout=layout, style=style)
        slider.add_class("ktune-slider")  # the labextension keeps arrow keys on it (Notebook 7)
        return slider
    return w.Dropdown(options=options, value=value, description=p.name, layout=layout,
                      style=style)


class Controls:
    """All tunables' widgets plus a line that says whether the combination is allowed.

    ``on_change(values)`` is called with the full config for every allowed combination the user
    sets; a combination that breaks a constraint updates the status line only.

    ``violations(values)`` is the one check of a combination's ``require`` lines per move
    (``Space.violations`` under the limits the worker gave: its device's and the inputs'
    values the lines name), made here rather than in the worker so a refused position is
    explained at once, not after the variant being timed. Its outcome is kept
    (:meth:`outcome`): the banner's refresh on each result and the request, which carries it to
    the worker in place of a second check, read it (issue 37). ``explain(values, reasons)``
    words a refusal for the banner (default: the reasons as they are).
    """

    def __init__(self, space: Space, start: Mapping[str, ParamValue],
                 violations: Callable[[Mapping[str, Any]], list[str]],
                 on_change: Callable[[dict[str, ParamValue]], None],
                 explain: Callable[[Mapping[str, Any], list[str]], list[str]] | None = None):
        self.space = space
        self._violations, self._on_change = violations, on_change
        self._explain = explain or (lambda _values, reasons: reasons)
        self._checked: tuple[dict[str, ParamValue], list[str]] | None = None  # values, outcome
        name_px = min(180, max(60, 8 * max((len(p.name) for p in space.params), default=4) + 12))
        self.widgets = {p.name: control_for(p, start[p.name], name_px) for p in space.params}
        for p in space.params:
            two = " (powers of two)" if p.powers_of_two else ""
            self.widgets[p.name].tooltip = p.name + two
        self.status = w.HTML(layout=w.Layout(display="none"))
        self.status.add_class("ktune-refusal")
        #: label of the config the badge and plots show (set by the panel on every new result)
        self.shown_label = ""
        for widget in self.widgets.values():
            widget.observe(self._changed, names="value")
        self.box = w.VBox([*self.widgets.values()])  # the panel shows ``status`` on top
        self._show(self.values)

    def showing(self, label: str) -> None:
        """Say which config the badge and plots show now; a refusal banner names it."""
        self.shown_label = label
        self._show(self.values)

    @property
    def values(self) -> dict[str, ParamValue]:
        """The config the controls show now."""
        return {name: widget.value for name, widget in self.widgets.items()}

    def set_values(self, values: Mapping[str, ParamValue]) -> None:
        """Move the controls (e.g. after a heatmap click); fires one request at the end."""
        with self._hold():
            for name, v in values.items():
                if name in self.widgets:
                    self.widgets[name].value = v
        self._changed(None)

    def _hold(self) -> Any:
        controls = self

        class _Hold:
            def __enter__(self) -> None:
                controls._holding = True

            def __exit__(self, *exc: object) -> None:
                controls._holding = False

        return _Hold()

    _holding = False

    def _changed(self, _change: Any) -> None:
        if self._holding:
            return
        values = self.values
        if self._show(values):
            self._on_change(values)

    def outcome(self, values: Mapping[str, ParamValue]) -> list[str]:
        """What the check says of ``values`` (empty: allowed), kept from the last check when
        they are the combination it checked: a move is checked once."""
        values = dict(values)
        if self._checked is None or self._checked[0] != values:
            self._checked = (values, self._violations(values))
        return self._checked[1]

    def _show(self, values: Mapping[str, ParamValue]) -> bool:
        reasons = self.outcome(values)
        if reasons:
            reasons = self._explain(values, reasons)
            shown = (f" The badge and plots show <code>{escape(self.shown_label)}</code>, "
                     "the last config run." if self.shown_label else "")
            self.status.layout.display = None
            self.status.value = (
                "<div style='background:#fff8c5;border:1px solid #d4a72c;border-radius:6px;"
                "padding:3px 8px;white-space:normal;line-height:1.4'><b>not run</b> — not "
                "allowed on this device: " + "; ".join(escape(r) for r in reasons) + "."
                + shown + "</div>")
            return False
        self.status.value = ""
        self.status.layout.display = "none"
        return True
