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
"""

from __future__ import annotations

import json
from collections.abc import Iterable

#: the backends opened ahead in this process, in the order asked (what a user can check)
prepared: list[str] = []

MAGIC = "%%kernel"


def prepare(cells: Iterable[str]) -> list[str]:
    """Start opening, on threads, each backend that the ``%%kernel`` cells among ``cells``
    name (their magic line's ``--backend``, else the default), once per backend; other cells
    and backend names not registered here are passed over. Returns the backends started."""
    from jupyter_ktune.magics import line_backend, warm_worker

    started: list[str] = []
    for cell in cells:
        first, _, body = str(cell).lstrip().partition("\n")
        if not (first.startswith(MAGIC) and first[len(MAGIC):len(MAGIC) + 1] in ("", " ", "\t")):
            continue
        line = first[len(MAGIC):]
        backend = line_backend(line)
        if backend in started or backend in prepared:
            continue
        if warm_worker(line, body) is not None:
            started.append(backend)
    prepared.extend(started)
    return started


def prepare_json(text: str) -> list[str]:
    """:func:`prepare` for the cells as a JSON list of strings (what the labextension sends)."""
    cells = json.loads(text)
    if not isinstance(cells, list):
        raise TypeError("[ktune] prepare_json wants a JSON list of cell sources")
    return prepare(cells)
