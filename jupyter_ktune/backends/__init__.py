"""Backend registry: the name on the magic line -> the module that implements it.

Adding a backend touches one line here (STYLE.md habit 3: a registry, not an if/elif chain).
"""

from __future__ import annotations

import importlib
from functools import cache

from jupyter_ktune.backends.base import Backend
from jupyter_ktune.errors import KtuneError

_BACKENDS: dict[str, str] = {
    "cuda": "jupyter_ktune.backends.cuda",
}


@cache
def get_backend(name: str) -> Backend:
    """Return the backend instance for ``name``; unknown names list the known ones."""
    module = _BACKENDS.get(name)
    if module is None:
        raise KtuneError(f"[ktune] backend '{name}' is not available yet. "
                         f"Known backends: {', '.join(sorted(_BACKENDS))}.")
    return importlib.import_module(module).BACKEND


def backend_names() -> tuple[str, ...]:
    """Names of the registered backends."""
    return tuple(sorted(_BACKENDS))
