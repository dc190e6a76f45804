"""What a backend's device opening cost, by part (:attr:`..base.DeviceInfo.opening_ms`).

A fresh worker's first ``device`` request pays the backend's imports (torch alone: 3.5-4.6 s in
the anchor processes of run 2026-12-05-1839, on an H100 host) and the device context; a cell's
first result shows those parts as phases of their own (``runner.describe.cold_phases``) instead
of one lumped "imports and device" time.
Each backend times its opening with one :class:`Opening`::

    opened = Opening()
    torch, triton = opened.imports("torch", "triton")
    ...  # the device context, its properties
    return DeviceInfo(..., opening_ms=opened.done())
"""

from __future__ import annotations

import importlib
import sys
import time
from typing import Any


class Opening:
    """A backend's device opening timed by part in the worker, ms per part: each module's first
    import in this process (``"torch import"``), then the rest (``"device context"``)."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}
        self._since = time.perf_counter()

    def imports(self, *names: str) -> list[Any]:
        """The modules ``names``, imported in order (an ImportError propagates). Each is a part,
        ``"<name> import"``, only where it was not in ``sys.modules`` before: imported already
        (by an earlier request, or by a module imported before it), it cost nothing here."""
        modules = []
        for name in names:
            new, t0 = name not in sys.modules, time.perf_counter()
            modules.append(importlib.import_module(name))
            if new:
                self.ms[f"{name} import"] = (time.perf_counter() - t0) * 1e3
        self._since = time.perf_counter()
        return modules

    def done(self, rest: str = "device context") -> dict[str, float]:
        """The parts, with the time since the last import (or since the start) named ``rest``."""
        return {**self.ms, rest: (time.perf_counter() - self._since) * 1e3}
