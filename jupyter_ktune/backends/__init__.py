"""Backend registry: the name on the magic line -> the package that implements it.

Adding a backend is one package beside this file plus one line in ``_BACKENDS`` (STYLE.md
habit 3: a registry, not an if/elif chain); ``README.md`` here has the protocol and the steps.
This module imports no backend until one is asked for, and nothing that imports it back
(:mod:`jupyter_ktune.api` checks ``--backend`` names against it; :mod:`jupyter_ktune.spec`
imports no backend).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator, Mapping
from functools import cache
from typing import TYPE_CHECKING

from jupyter_ktune.errors import KtuneError

if TYPE_CHECKING:
    from jupyter_ktune.backends.base import Backend

_BACKENDS: dict[str, str] = {
    "cuda": "jupyter_ktune.backends.cuda.backend",
    "pallas": "jupyter_ktune.backends.pallas.backend",
    "triton": "jupyter_ktune.backends.triton.backend",
}


#: The backend of a cell whose magic line names none.
DEFAULT_BACKEND = "cuda"


def _registry() -> dict[str, str]:
    """Map backend names to modules: the built-ins plus ``KTUNE_BACKEND_MODULES``.

    ``KTUNE_BACKEND_MODULES="name=module,..."`` adds plugins in development; it is an environment
    variable because the worker is a separate process that must see them too.
    """
    extra = {}
    for item in filter(None, os.environ.get("KTUNE_BACKEND_MODULES", "").split(",")):
        name, _, module = item.partition("=")
        extra[name.strip()] = module.strip()
    return {**_BACKENDS, **extra}


@cache
def get_backend(name: str) -> Backend:
    """Return the backend instance for ``name``; unknown names list the known ones."""
    module = _registry().get(name)
    if module is None:
        raise KtuneError(f"[ktune] backend '{name}' is not available yet. "
                         f"Known backends: {', '.join(sorted(_registry()))}.")
    return importlib.import_module(module).BACKEND


def backend_names() -> tuple[str, ...]:
    """Names of the registered backends."""
    return tuple(sorted(_registry()))


class Registered(Mapping[str, "Backend"]):
    """The registry as a mapping, name -> backend, each imported only when it is looked up:
    what the model (:func:`jupyter_ktune.spec.read_cell`) is handed to read a cell's syntax."""

    def __getitem__(self, name: str) -> Backend:
        if name not in _registry():
            raise KeyError(name)
        return get_backend(name)

    def __iter__(self) -> Iterator[str]:
        return iter(backend_names())

    def __len__(self) -> int:
        return len(_registry())
