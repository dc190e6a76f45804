"""Whether a panel is docked beside the notebook: one synced flag on the panel's root widget.

The labextension (labextension/src/dock.ts) does the docking: when the flag is set it moves the
panel's own live view (the same widgets, the same Bokeh views, not a second copy) into a tab
split to the right of the notebook (JupyterLab) or into the right side panel (Notebook 7), and
leaves a one-line placeholder in the output; closing that tab moves the view back and clears
the flag. The flag lives in the kernel's widget state, so after a page reload the panel comes
back docked, and once closed it stays closed.

``sidecar`` was used before and could not do this: a Sidecar re-opens its tab whenever its
model is restored (every reload, even after the user closed it), and it shows a *second* view
of the panel, whose Bokeh documents start from the first serialisation and drift from the
first view's (stale histogram, one-colour heatmap); after a reload it was also created before
BokehJS was loaded ("Cannot read properties of undefined (reading 'require')").
"""

from __future__ import annotations

import ipywidgets as w
from traitlets import Bool, Unicode


class PanelRoot(w.VBox):
    """The panel's outermost box, carrying the dock state the labextension acts on.

    ``docked``: the panel should show beside the notebook (set by :meth:`KernelPanel.dock`
    or the Dock button, cleared by the frontend when the user closes the dock).
    ``dock_title``: the dock tab's label.
    """

    docked = Bool(False).tag(sync=True)
    dock_title = Unicode("ktune").tag(sync=True)


def dock_button(root: PanelRoot) -> w.Button:
    """The Dock / Undock button of a panel, kept in step with ``root.docked``."""
    button = w.Button(layout=w.Layout(width="120px"))

    def show(_change: object = None) -> None:
        if root.docked:
            button.description, button.icon = "Undock", "window-restore"
            button.tooltip = "Put the panel back under its cell"
        else:
            button.description, button.icon = "Dock", "columns"
            button.tooltip = ("Show this panel beside the notebook (JupyterLab: a tab split to "
                              "the right; Notebook 7: the right side panel)")

    def toggle(_b: object) -> None:
        root.docked = not root.docked

    root.observe(show, names="docked")
    button.on_click(toggle)
    show()
    return button
