"""Errors that name the cell line and the fix.

Every error a user can cause in a ``%%kernel`` cell is a :class:`CellError`: it carries the line of
the notebook cell (1 = the ``%%kernel`` line itself) and a suggested fix, so the message reads like
``[ktune] cell line 3: 'TILE' is not a parameter. Add it: // ktune: TILE in [64, 128]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PREFIX = "[ktune]"


class KtuneError(Exception):
    """Base class of the errors this package raises on purpose."""


class CellError(KtuneError, ValueError):
    """Bad input in a ``%%kernel`` cell, with the cell line and the fix.

    Parameters
    ----------
    message
        What is wrong, in one sentence.
    line
        Line of the notebook cell (1-based, the ``%%kernel`` line is 1), or None when the problem
        is not tied to one line (a missing argument, say).
    fix
        What to write instead.
    """

    def __init__(self, message: str, *, line: int | None = None, fix: str | None = None):
        self.message = message
        self.line = line
        self.fix = fix
        where = f"cell line {line}: " if line is not None else ""
        tail = f" {fix}" if fix else ""
        end = "" if message.endswith(".") else "."
        super().__init__(f"{PREFIX} {where}{message}{end}{tail}")


@dataclass(frozen=True)
class Diagnostic:
    """One compiler message mapped to the cell: line, severity and text."""

    line: int | None
    severity: str
    message: str
    column: int | None = None

    def to_dict(self) -> dict:
        """Return a JSON-ready dict (the labextension draws these as editor marks)."""
        return {"line": self.line, "column": self.column, "severity": self.severity,
                "message": self.message}


@dataclass
class CompileFailure(KtuneError):
    """A variant that did not compile, with the compiler's messages mapped to cell lines."""

    backend: str
    log: str
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def __str__(self) -> str:
        first = next((d for d in self.diagnostics if d.severity == "error"), None)
        if first is None:
            return f"{PREFIX} {self.backend} compile failed:\n{self.log.strip()}"
        where = f"cell line {first.line}: " if first.line is not None else ""
        return f"{PREFIX} {where}{first.message}"


class OutOfResources(KtuneError):
    """A variant the device cannot launch: too many threads for its registers, too much smem."""


class CannotRun(KtuneError):
    """A variant that needs a device this machine lacks (a Mosaic GPU kernel without a Hopper GPU).

    Raised by a backend's ``compile``; the variant's status is "cannot run here", not an error.
    """
