"""The view protocol: what one tab of the panel is, and the registry that orders the tabs.

A view used to touch six places: its figures were made in ``ui/app.py``, fed from the panel's
delivery code, hidden from its ``_adapt``, drawn into the snapshot from ``snapshot.py``, given a
tab in ``sections.py`` and saved from ``replay.py``. Now the panel (:mod:`jupyter_ktune.ui.app`)
names no view: it makes one instance of each registered :class:`View` and calls the hooks
below, in registration order (the order of the tabs). A new view is one module implementing
:class:`View` plus one :func:`register` call (the built-in ones are registered in
:mod:`jupyter_ktune.ui.views`).

Every hook has a default that does nothing, so a view overrides only what it needs::

    class Occupancy(View):
        title = "Occupancy"
        def widget(self): return self.note          # the tab's content, built once
        def show(self, result): self.note.value = ...   # each new current result

    register(Occupancy)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from jupyter_ktune.results import RunResult


@dataclass(frozen=True)
class PanelState:
    """What the panel can do now, given to :meth:`View.adapt` after each current result.

    ``ran``: some result ran (not every one was "cannot run"); ``timed``: some result has a
    timing; ``compiled``: some config built; ``replay``: saved results, nothing runs here;
    ``gpu``: the current result was timed on a GPU (not host time); ``failed``: the current
    result has no timing. ``results``: how many results the panel holds.
    """

    current: RunResult | None
    results: int
    ran: bool
    timed: bool
    compiled: bool
    replay: bool
    gpu: bool
    failed: bool


class View:
    """One tab of the panel; subclass it, set :attr:`title` and :func:`register` the class.

    The panel makes one instance per panel (``View(panel)``) before the tabs are laid out, so a
    view may read ``panel.session``, ``panel.controls`` and ``panel.results`` in its constructor
    and may subscribe to the controls; it must not assume any other view exists, except those
    it names through :meth:`exports` of views registered before it.
    """

    #: the tab's title (unique among registered views)
    title: ClassVar[str] = ""
    #: the tab's figures stay hidden, with the panel's "no timed result yet" line shown
    #: instead, until some result is timed
    needs_timing: ClassVar[bool] = False
    #: this view's :meth:`actions` stand before the panel's own Dock button (else after it)
    actions_before_dock: ClassVar[bool] = False
    #: names of this view's attributes the panel answers for as its own (``panel.heatmap``):
    #: what notebooks, benches and tests read from a panel
    exports: ClassVar[tuple[str, ...]] = ()

    def __init__(self, panel: Any) -> None:
        self.panel = panel

    def widget(self) -> Any:
        """The tab's content, built once when the panel lays out its tabs; None: no tab for
        this panel. May be ``(widget, LiveBokehModel)``: that Bokeh model's document is sent
        again whenever its tab is shown (a figure laid out while hidden gets its real size)."""
        return None

    def actions(self) -> list[Any]:
        """Buttons for the panel's action row, under the controls."""
        return []

    def add(self, result: RunResult, kind: str) -> None:
        """Every result delivered, current or not (``kind``: current, stale or sweep)."""

    def show(self, result: RunResult) -> None:
        """A new current result (the one the badge shows)."""

    def complete(self, result: RunResult) -> None:
        """The current result again, now with the static report that followed it."""

    def adapt(self, state: PanelState) -> None:
        """After each current result: show, hide or disable what can or cannot work now."""

    def snapshot(self, current: RunResult, history: Sequence[RunResult]) -> list[str]:
        """Static figures (HTML/SVG, no JavaScript) for the panel's saved snapshot."""
        return []

    def saved(self) -> dict[str, Any]:
        """Entries this view adds to a saved panel file (plain data, see ``ui.panel_file``)."""
        return {}


#: the registered views, in tab order
VIEWS: list[type[View]] = []


def register(view: type[View], *, before: str | None = None) -> type[View]:
    """Add a view class as a tab: last, or ``before`` the tab of that title. Returns the class,
    so it may be used as a decorator. A panel made from then on shows it."""
    if not (isinstance(view, type) and issubclass(view, View)) or not view.title:
        raise TypeError(f"[ktune] {view!r} is not a View subclass with a title")
    if any(v.title == view.title for v in VIEWS):
        raise ValueError(f"[ktune] a view titled {view.title!r} is already registered")
    titles = [v.title for v in VIEWS]
    VIEWS.insert(titles.index(before) if before is not None else len(VIEWS), view)
    return view


def unregister(view: type[View]) -> None:
    """Remove a registered view class (panels made before keep their tab)."""
    VIEWS.remove(view)


def registered() -> tuple[type[View], ...]:
    """The registered view classes, in tab order."""
    return tuple(VIEWS)
