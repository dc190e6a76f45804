"""Build a kernel's host launcher beside its first compile, not after it (Triton 3.6).

Triton 3.6 (the H200's) builds a C launcher per kernel signature with gcc, 0.2 s, the first
time a compiled kernel is loaded. The compile pool built it after each compile
(:func:`.jit_warm.build_launcher`), so a short sweep's first result waited for compile + build
in series: the first compile came back at 0.26-0.43 s for kernels that compile in about 0.1 s
(bench/results/corpus_vs_autotune/2026-12-01-2251). The launcher's source depends only on the
kernel's signature after specialisation (argument types; constexpr values are not in it),
which the JIT knows before it compiles. So one pool task runs the JIT's binder for the first
config, stops it at the compile call, and builds the launcher from that source while other
pool processes compile; the sweep's first run waits for this task, and the compile tasks skip
their own build (``backends.base.LAUNCHER_AHEAD_ENV``). Newer Tritons launch through one generic
launcher:
there is nothing to build, and this reports False, as for a kernel with tensor descriptors
(their launcher also needs the compiled metadata).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from jupyter_ktune.backends.triton.jit_warm import build_launcher, compiling_for, placeholders


class _Bound(Exception):
    """Raised from the JIT's compile call: the binder's work is done, the source is caught."""


def jit_source(fn: Any, launch: Mapping[str, Any], arch: str) -> Any:
    """The ``ASTSource`` the JIT would compile for these launch arguments, without compiling
    (None where the JIT's warm-up path does not take them)."""
    from triton.runtime.jit import JITFunction

    from jupyter_ktune.backends.triton.config_arguments import DescriptorPlaceholder

    if any(isinstance(v, DescriptorPlaceholder) for v in launch.values()):
        return None
    jit = fn
    while not inspect.isfunction(getattr(jit, "fn", None)):
        jit = jit.fn
    if not isinstance(jit, JITFunction) or not hasattr(jit, "warmup"):
        return None
    caught: list[Any] = []

    def catch(src: Any, *args: Any, **kwargs: Any) -> Any:
        caught.append(src)
        raise _Bound

    from triton.runtime import driver

    try:
        with compiling_for(arch):
            # the per-device binder sets ``jit.compile`` when it is first made: make it now
            jit.device_caches[driver.active.get_current_device()]  # noqa: B018
            real = jit.compile
            jit.compile = catch
            try:
                jit.warmup(grid=(1,), **placeholders(launch))
            finally:
                jit.compile = real
    except _Bound:
        pass
    except Exception:  # noqa: BLE001 - any other failure: the compiles build it as before
        return None
    return caught[0] if caught else None


def build_ahead(fn: Any, launch: Mapping[str, Any], arch: str) -> tuple[bool, float]:
    """Build the launcher for ``fn`` at these arguments into Triton's cache; (built, seconds)."""
    clock = time.perf_counter()
    src = jit_source(fn, launch, arch)
    if src is None:
        return False, time.perf_counter() - clock
    metadata = SimpleNamespace(tensordesc_meta=None, num_ctas=1, global_scratch_size=0,
                               global_scratch_align=1, profile_scratch_size=0,
                               profile_scratch_align=1, launch_cooperative_grid=False,
                               launch_pdl=False)
    built = build_launcher(SimpleNamespace(src=src, metadata=metadata))
    return built, time.perf_counter() - clock
