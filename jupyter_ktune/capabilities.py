"""What each backend can do on this machine: the table ``ktune device`` prints.

A backend's :class:`~jupyter_ktune.backends.base.DeviceInfo` says whether it can run and on
what; this module adds what else it can do here (a static report without a GPU, GPU timing, an
interpreter, a cycle breakdown), so a user sees in one table why a cell "cannot run here" and
what would change that.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jupyter_ktune.backends import get_backend
from jupyter_ktune.backends.base import DeviceInfo

COLUMNS = ("backend", "device", "static report", "run", "GPU time", "interpreter", "profile")


@dataclass(frozen=True)
class Capabilities:
    """One backend on this machine: each column of the table, and why it cannot run."""

    backend: str
    device: str
    static: str
    run: bool
    gpu_time: bool
    interpreter: bool
    profile: bool
    notes: tuple[str, ...] = ()

    def row(self) -> tuple[str, ...]:
        """Return the table row, in :data:`COLUMNS` order."""
        def yes(flag: bool) -> str:
            return "yes" if flag else "no"

        return (self.backend, self.device, self.static, yes(self.run), yes(self.gpu_time),
                yes(self.interpreter), yes(self.profile))


def capabilities(backend: str, info: DeviceInfo) -> Capabilities:
    """Say what ``backend`` can do here, given the device description its worker reported.

    Examples
    --------
    >>> capabilities("triton", DeviceInfo(True, "CPU (Triton interpreter)")).interpreter
    True
    """
    facts = get_backend(backend)
    gpu = info.available and info.compute_capability is not None
    static, note = facts.static_capability(info)
    # the scope profiler's own need (Pallas: Mosaic GPU, compute capability 9.0 or newer)
    profiled = gpu and float(info.compute_capability or 0) >= facts.profile_min_capability
    return Capabilities(backend=backend, device=info.name, static=static, run=info.available,
                        gpu_time=gpu, interpreter=info.available and not gpu, profile=profiled,
                        notes=tuple(n for n in (info.reason, note) if n))


def table(rows: Sequence[Capabilities]) -> str:
    """Render the rows as an aligned text table, then one line per backend that cannot run."""
    cells = [COLUMNS, *(r.row() for r in rows)]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in cells]
    notes = [f"{r.backend}: {n}" for r in rows for n in r.notes]
    return "\n".join(lines + ([""] + notes if notes else []))
