"""Controls generated from the Space: a slider per numeric tunable, a dropdown per choice.

Sliders step through the *allowed values* only (a SelectionSlider), so a drag never asks for a
value the cell did not declare; powers of two are labelled as such (``128 = 2^7``). A config
that breaks a ``require`` line is shown as not allowed, with the reason, and is never requested.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as w

from jupyter_ktune.space import Param, ParamValue, Space


def value_label(p: Param, value: ParamValue) -> str:
    """Label a value for a slider: ``128 = 2^7`` for powers of two, the value otherwise."""
    if p.powers_of_two and isinstance(value, int):
        return f"{value} = 2^{value.bit_length() - 1}"
    return str(value)


def control_for(p: Param, value: ParamValue) -> w.ValueWidget:
    """One widget for one tunable, starting at ``value``."""
    options = [(value_label(p, v), v) for v in p.values]
    layout = w.Layout(width="360px")
    style = {"description_width": "110px"}
    if p.numeric and len(p.values) > 1:
        return w.SelectionSlider(options=options, value=value, description=p.name,
                                 continuous_update=True, layout=layout, style=style)
    return w.Dropdown(options=options, value=value, description=p.name, layout=layout,
                      style=style)


class Controls:
    """All tunables' widgets plus a line that says whether the combination is allowed.

    ``on_change(values)`` is called with the full config for every allowed combination the user
    sets; a combination that breaks a constraint updates the status line only.
    """

    def __init__(self, space: Space, start: Mapping[str, ParamValue],
                 violations: Callable[[Mapping[str, Any]], list[str]],
                 on_change: Callable[[dict[str, ParamValue]], None]):
        self.space = space
        self._violations, self._on_change = violations, on_change
        self.widgets = {p.name: control_for(p, start[p.name]) for p in space.params}
        self.status = w.HTML()
        for widget in self.widgets.values():
            widget.observe(self._changed, names="value")
        self.box = w.VBox([*self.widgets.values(), self.status])
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

    def _show(self, values: Mapping[str, ParamValue]) -> bool:
        reasons = self._violations(values)
        if reasons:
            self.status.value = ("<span style='color:#9a6700'>not allowed on this device: "
                                 + "; ".join(reasons) + " (not run)</span>")
            return False
        self.status.value = ""
        return True
