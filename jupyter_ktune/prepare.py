"""Open the backends a notebook's ``%%kernel`` cells name as soon as its kernel starts.

A fresh worker's first device request pays its backend's imports and the device context
(torch's import alone took 3.5-4.6 s on the H100 host, run 2026-12-05-1839): a first cell that
starts them pays them on its clock, however early ``%load_ext`` ran, since only the cell says
which backend to open. The notebook does know: the labextension reads its ``%%kernel`` cells
when the kernel starts (or restarts) and sends them here in a silent request
(``labextension/src/prepare.ts``), so the worker imports exactly those backends, and the
compile pool's fork server its compiler, while the user reads; a first cell run later finds
them open. Nothing is registered in the notebook (``%load_ext`` still does that), no name is
left in its namespace, and an error here is never the user's: the cell reports it when it runs.

The worker serves one request at a time, so the backends are opened one after another, in the
notebook's order, from one thread, and none is begun once a ``%%kernel`` cell has started
(``magics.CELL_STARTED``): a Run All pressed at once waits for at most the opening in flight,
which is its first cell's own, and each later cell opens its backend as it would have.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterable

#: the backends whose opening began here, in order (what a user can check)
prepared: list[str] = []
#: the thread opening them (joined by tests and by anyone who wants to wait)
opening: threading.Thread | None = None

MAGIC = "%%kernel"


def prepare(cells: Iterable[str]) -> list[str]:
    """Open, on a thread, in order, each backend that the ``%%kernel`` cells among ``cells``
    name (their magic line's ``--backend``, else the default), once per backend; other cells,
    backend names not registered here and backends opened here before are passed over.
    Returns the backends to open."""
    global opening
    from jupyter_ktune.backends import backend_names
    from jupyter_ktune.magics import line_backend

    wanted: dict[str, tuple[str, str]] = {}  # backend -> (line, body) of the first naming it
    for cell in cells:
        first, _, body = str(cell).lstrip().partition("\n")
        if not (first.startswith(MAGIC) and first[len(MAGIC):len(MAGIC) + 1] in ("", " ", "\t")):
            continue
        backend = line_backend(first[len(MAGIC):])
        if backend in backend_names() and backend not in wanted and backend not in prepared:
            wanted[backend] = (first, body)
    if wanted:
        from jupyter_ktune.ui.start import import_widgets_soon

        import_widgets_soon()  # the panels' widget stack, beside the backends' opening
        opening = threading.Thread(target=_open_in_order, args=(list(wanted.items()),),
                                   name="ktune-prepare", daemon=True)
        opening.start()
    return list(wanted)


def _open_in_order(backends: list[tuple[str, tuple[str, str]]]) -> None:
    from jupyter_ktune.magics import CELL_STARTED, start_compile_processes
    from jupyter_ktune.runner.client import get_worker
    from jupyter_ktune.runner.describe import open_device

    for i, (backend, (line, body)) in enumerate(backends):
        if i and CELL_STARTED.is_set():  # a cell runs: it opens what it needs, in its order
            return
        prepared.append(backend)
        with contextlib.suppress(Exception):  # the cell reports what went wrong
            start_compile_processes(backend, body, line)
            open_device(get_worker(), backend)  # its parts kept for the first result


def prepare_json(text: str) -> list[str]:
    """:func:`prepare` for the cells as a JSON list of strings (what the labextension sends)."""
    cells = json.loads(text)
    if not isinstance(cells, list):
        raise TypeError("[ktune] prepare_json wants a JSON list of cell sources")
    return prepare(cells)
