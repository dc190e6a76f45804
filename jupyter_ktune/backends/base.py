"""The small protocol every backend implements, and the device description it reports.

A backend turns a (KernelSpec, Config) into a launchable variant. Everything generic - checking
constraints, verification, the timing protocol, provenance - lives in
:mod:`jupyter_ktune.runner.execute`, so a backend is one module that only knows its compiler and
runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec


@dataclass(frozen=True)
class DeviceInfo:
    """What the worker found: a device that can run this backend, or why not."""

    available: bool
    name: str
    reason: str = ""
    compute_capability: str | None = None
    limits: Mapping[str, int] = field(default_factory=dict)
    driver: str | None = None
    toolchain: Mapping[str, str] = field(default_factory=dict)


class Bound(Protocol):
    """A compiled variant bound to one set of arguments on the device."""

    def launch(self) -> None:
        """Enqueue one launch; never synchronizes."""

    def poison_outputs(self) -> None:
        """Fill the outputs with the poison value (NaN / sentinel) on the device."""

    def read_outputs(self) -> dict[str, np.ndarray]:
        """Copy the outputs back to the host (synchronizes)."""

    def launch_info(self) -> Mapping[str, Any]:
        """Grid, block, shared memory and registers of this launch, for the report."""


class Variant(Protocol):
    """A compiled kernel for one config."""

    def bind(self, host_args: Mapping[str, Any]) -> Bound:
        """Copy arguments to the device and resolve the launch geometry."""


class Backend(Protocol):
    """One backend: compile, describe the device, static report. Implemented once per module."""

    name: ClassVar[str]

    def check(self, spec: KernelSpec) -> None:
        """Validate the cell on the host (raise CellError with the line and the fix)."""

    def device(self) -> DeviceInfo:
        """Describe the device this backend would run on (called in the worker)."""

    def static_report(self, spec: KernelSpec, config: Config) -> Any:
        """Compiler resource report and SASS mix for the variant, on any machine (or None)."""

    def compile(self, spec: KernelSpec, config: Config) -> Variant:
        """Compile the variant for the device; raise CompileFailure with cell-line diagnostics."""

    def timer(self) -> Any:
        """Return the DeviceTimer the timing protocol uses."""

    def is_fatal(self, exc: BaseException) -> bool:
        """Return True when ``exc`` leaves the device context unusable (the worker must restart)."""


BackendFactory = Callable[[], Backend]
