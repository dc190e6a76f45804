"""What the generic code asks of the Triton backend besides the protocol's methods: its facts
(``BackendBase``'s fields, Triton's values) and the hooks that need no device.

A class of its own so :mod:`.backend` stays the protocol's implementation; ``TritonBackend``
subclasses it. Nothing here imports triton at module level: the notebook reads these facts.
"""

from __future__ import annotations

import importlib.util
from typing import ClassVar

from jupyter_ktune.backends.base import BackendBase, DeviceInfo
from jupyter_ktune.requirements import install_hint


class TritonFacts(BackendBase):
    """The Triton backend's declared facts."""

    precompile: ClassVar[str | None] = (
        "Triton's ahead-of-time triton.compile for the target arch (TTIR -> PTX -> "
        "cubin), which fills Triton's on-disk cache (TRITON_CACHE_DIR) on this host, plus "
        "the static report from that cubin; the worker's compile then hits the cache")
    compiler_modules: ClassVar[tuple[str, ...]] = (
        "triton", "triton.compiler", "triton.runtime.jit")
    compile_cost_order: ClassVar[bool] = True
    language: ClassVar[str] = "Triton"
    compiler_controls: ClassVar[frozenset[str] | None] = frozenset({"name_prefix", "maxnreg"})
    shares_pool_hints: ClassVar[bool] = True  # the argument types, one inputs() call for all
    pool_builds_cached: ClassVar[bool] = True  # the pool fills TRITON_CACHE_DIR
    builds_launcher_ahead: ClassVar[bool] = True  # Triton 3.6's launcher, a pool task of its own
    export_formats: ClassVar[tuple[str, ...]] = ("triton", "kernel_tuner")  # @triton.autotune

    def warm_compiler(self) -> None:
        """The compiler's modules, then the installation's hash, which each process's first
        compile pays (:func:`.jit_warm.warm_cache_key`)."""
        super().warm_compiler()
        from jupyter_ktune.backends.triton.jit_warm import warm_cache_key

        warm_cache_key()

    def static_capability(self, device: DeviceInfo) -> tuple[str, str]:
        """The ahead-of-time compile's report, wherever triton is installed."""
        if importlib.util.find_spec("triton") is None:
            return "no", f"no static report: triton is not installed. {install_hint('triton')}"
        return "yes (AOT, sm_90)", ""
