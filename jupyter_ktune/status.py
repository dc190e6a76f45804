"""The outcome of one variant, as a value: the vocabulary results, renderers and stores share.

Its own module so that :mod:`jupyter_ktune.render` can colour a status without importing
:mod:`jupyter_ktune.results`, which imports the renderer for its ``_repr_html_``.
"""

from __future__ import annotations

import enum


class Status(str, enum.Enum):
    """Outcome of one variant. Failures are values, shown greyed, never ``inf``."""

    OK = "ok"
    WRONG = "wrong result"
    COMPILE_ERROR = "compile error"
    OUT_OF_RESOURCES = "out of resources"
    RUNTIME_ERROR = "runtime error"
    CRASHED = "worker crashed"
    TIMEOUT = "timed out"
    WRONG_ARCH = "wrong architecture"  # built for another GPU, or an instruction its target lacks
    CANNOT_RUN = "cannot run here"
    NOT_ALLOWED = "not allowed"

    @property
    def failed(self) -> bool:
        """True for every status that is not OK or CANNOT_RUN (a static-only result is fine)."""
        return self not in (Status.OK, Status.CANNOT_RUN)
