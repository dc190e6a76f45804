"""Compile a config the way Triton's JIT will look it up, so the worker's first launch is a hit.

A sweep compiles upcoming configs in a process pool while the GPU times others. Compiling with
``triton.compile(ASTSource(...))`` fills Triton's on-disk cache under a key of our making; the
JIT's own key differs (its attributes, the options it parses, the specialisations it infers), so
on the H200 every config's first launch still spent 0.9-1.0 s compiling again, serially, inside
its "verify" phase (bench/results/verify_phase_probe/2026-12-01-0934). Here the pool calls the
JIT itself, ``jit.warmup(**launch_arguments)``, with the arguments the worker will pass (arrays
as dtype placeholders): the JIT computes its key, compiles, and writes the cache entry that the
worker's launch then finds.

A pool process never launches, so it need not open the GPU: while it compiles, Triton's active
driver is a compile-only one that answers with the target arch (and device 0, stream 0). The
worker itself, which has the real driver, compiles through it when its arch is the target.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from jupyter_ktune.backends.base import (
    COMPILE_ONLY_ENV,  # noqa: F401 - re-exported
    LAUNCHER_AHEAD_ENV,
)
from jupyter_ktune.backends.triton import key_ahead


@dataclass(frozen=True)
class ArrayPlaceholder:
    """An array argument of a warm compile: only its dtype matters to Triton's specialisation
    (a ``MockTensor`` in the compiling process, 16-byte aligned as every allocation here)."""

    dtype: str


class WarmUnavailable(Exception):
    """This Triton or this kernel cannot be compiled through the JIT's warm-up; the caller
    compiles ahead of time instead (same code, only the cache key differs)."""


class CompileOnlyDriver:
    """Triton's active driver where none is, for ``arch``: what the JIT asks while it compiles
    (target, device 0, stream 0), and what module-level code asks on a machine without a GPU
    (``get_current_target()`` to pick a config list; :func:`.interpreter.install_target_driver`)."""

    def __init__(self, arch: int):
        self.arch = arch

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", self.arch, 32)

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cpu")

    def get_device_interface(self) -> Any:
        import torch

        return torch.cuda


def arch_number(arch: str) -> int:
    """``sm_90`` / ``sm_90a`` -> 90."""
    m = re.fullmatch(r"sm_(\d+)[af]?", arch)
    if m is None:
        raise ValueError(f"[ktune] arch must look like 'sm_90', got {arch!r}")
    return int(m[1])


@contextlib.contextmanager
def compiling_for(arch: str) -> Iterator[None]:
    """Let the JIT compile for ``arch``: through the real driver where it is active, targets
    ``arch`` and this is not a compile-only process; else through a :class:`CompileOnlyDriver`
    set for the duration (the previous driver, or none, is put back)."""
    from triton.runtime import driver

    number = arch_number(arch)
    if os.environ.get(COMPILE_ONLY_ENV) != "1":
        try:
            target = driver.active.get_current_target()
        except RuntimeError:  # no GPU: no active driver
            target = None
        if target is not None and getattr(target, "arch", None) == number:
            yield
            return
    previous = getattr(driver, "_active", None)
    driver.set_active(CompileOnlyDriver(number))  # type: ignore[arg-type]
    try:
        yield
    finally:
        if previous is not None:
            driver.set_active(previous)
        else:
            driver._active = None  # noqa: SLF001 - back to "not chosen yet", as we found it


class TorchDtypeName:
    """A torch dtype by name, for a process that has no torch (:mod:`.timer_ahead` keeps it
    out: its import is what the process runs beside). Triton specialises a tensor argument by
    the text of its dtype, ``torch.int32``, so a ``MockTensor`` of this compiles and keys as one
    of ``torch.int32`` would (tests/test_timer_ahead.py checks the cache entry is the same)."""

    def __init__(self, name: str):
        self.name = name

    def __str__(self) -> str:
        return f"torch.{self.name}"

    __repr__ = __str__

    def __hash__(self) -> int:
        return hash(("torch dtype", self.name))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TorchDtypeName) and other.name == self.name


def _dtype(name: str) -> Any:
    try:
        import torch
    except ImportError:  # kept out of this process, or not installed
        return TorchDtypeName(name)
    dtype = getattr(torch, name, None)
    if dtype is None:
        raise WarmUnavailable(f"torch has no dtype {name}")
    return dtype


def placeholders(launch: Mapping[str, Any]) -> dict[str, Any]:
    """The launch arguments with each ArrayPlaceholder as Triton's ``MockTensor`` (of torch's
    dtype, or of a :class:`TorchDtypeName` where torch cannot be imported)."""
    from triton.runtime.jit import MockTensor

    from jupyter_ktune.backends.triton.config_arguments import DescriptorPlaceholder

    out = {}
    for k, v in launch.items():
        if isinstance(v, DescriptorPlaceholder):
            v = v.build(MockTensor(_dtype(v.dtype), list(v.shape)))
        elif isinstance(v, ArrayPlaceholder):
            v = MockTensor(_dtype(v.dtype))
        out[k] = v
    return out


def warm_compile(fn: Any, launch: Mapping[str, Any], arch: str) -> Any:
    """Compile ``fn`` (the cell's object: jit, heuristics or autotune) through its JIT's warm-up
    with these launch arguments; returns Triton's CompiledKernel.

    Raises :class:`WarmUnavailable` when the JIT's warm-up path does not take the arguments
    (an older Triton, an argument kind MockTensor cannot stand for); a compile error of the
    kernel itself propagates, as from any compile.
    """
    import inspect

    from triton.runtime.jit import JITFunction

    jit = fn
    while not inspect.isfunction(getattr(jit, "fn", None)):
        jit = jit.fn
    if not isinstance(jit, JITFunction) or not hasattr(jit, "warmup"):
        raise WarmUnavailable("not a JITFunction with warmup (the interpreter's wrapper?)")
    kwargs = placeholders(launch)
    warm_cache_key()  # the key first: hashed by another thread, waited for, not hashed again
    with compiling_for(arch):
        try:
            kernel = jit.warmup(grid=(1,), **kwargs)
        except (TypeError, KeyError, AttributeError) as exc:
            if _is_compile_error(exc):
                raise
            raise WarmUnavailable(f"{type(exc).__name__}: {exc}") from exc
    if kernel is None or not hasattr(kernel, "asm"):
        raise WarmUnavailable("the JIT's warm-up returned no compiled kernel")
    if os.environ.get(COMPILE_ONLY_ENV) and not os.environ.get(LAUNCHER_AHEAD_ENV):
        build_launcher(kernel)  # unless a pool task builds it beside the compiles (.launcher_ahead)
    return kernel


def build_launcher(kernel: Any) -> bool:
    """Build the kernel's host launcher module into Triton's cache, as its first launch would.

    Triton 3.6 (the H200's) compiles a C launcher per kernel signature with the host compiler
    at the first launch, 0.2 s a kernel on the H200 and inside the worker's verification run
    (bench/results/sweep_profile/2026-12-01-1258, ``compile_module_from_src``). Building it
    needs no GPU, so the compile pool builds it and the worker's launch finds it cached. Newer
    Tritons launch every kernel through one generic launcher, and their ``CudaLauncher`` asks
    the (here compile-only) driver for it: then there is nothing to build and this returns
    False, as it does for any failure; the launch builds it then, as before.

    A short sweep's concurrent compiles each build the same launcher into a cold cache (its
    seconds are the compile phase "of which launcher"). One builder per kernel behind a file
    lock was tried and undone: skipping moved the build into the worker's first "verify",
    waiting for the builder kept it on the path; neither shortened a sweep on the H200
    (bench/results/corpus_vs_autotune/2026-12-01-1927 and -1930).
    """
    import time

    clock = time.perf_counter()
    try:
        from triton.backends.nvidia.driver import CudaLauncher

        CudaLauncher(kernel.src, kernel.metadata)
    except Exception:  # noqa: BLE001 - best effort: the first launch builds it otherwise
        return False
    finally:
        LAUNCHER_SECONDS["last"] = time.perf_counter() - clock
    return True


#: Seconds the last :func:`build_launcher` of this process took (a compile phase of its own).
LAUNCHER_SECONDS: dict[str, float] = {}


def _is_compile_error(exc: BaseException) -> bool:
    from triton.compiler.errors import CompilationError

    cur: BaseException | None = exc
    while cur is not None:
        if isinstance(cur, CompilationError):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


_key_lock = threading.Lock()  # one thread hashes Triton's installation; the others wait


def warm_cache_key() -> bool:
    """Hash Triton's installation for its cache key now, not inside a process's first compile.

    Every compile and every JIT lookup keys its cache entry on ``triton_key()``, a hash of
    Triton's own sources and libtriton that each process computes once: 0.33 s on this
    project's CPU machine, where a fresh process's first compile of a small kernel took 0.43 s
    and the next 0.04 s (0.09 s once the hash was done). A short sweep gives each config a
    compile-pool process of its own, so the pool's warm-up and the device worker's start pay
    it instead. On the H200 the corpus bench's small sweeps did not get shorter with it
    (bench/results/corpus_vs_autotune/2026-12-01-1911 against -1919): there the first
    compile's time is mostly Triton 3.6's launcher build (gcc, 0.2 s, run 1927).
    False where this Triton has no such function, or where it fails.

    One caller hashes at a time: Triton's ``functools.lru_cache`` does not lock, so threads
    that asked at once each hashed the whole installation beside the others (the key thread,
    the timer's build and the first config's build of a fresh worker: 0.5-0.8 s of that
    compile's wait on an H100 host, aad7023:bench/results/first_minute_ab/2026-12-07-0900). A second
    caller now waits for the first's hash and finds it cached.

    In a device worker whose timer's subprocess hands the key (:mod:`.key_ahead`), the first
    caller (the key thread) waits for it instead of hashing, holding the lock: a caller that
    came meanwhile would otherwise hash beside the wait, which is what the handoff saves.
    """
    with _key_lock:
        key_ahead.take()  # once per process; where it installs nothing, the hash below
        # any failure: on the key thread it would print a traceback in the worker's log, and
        # the compile that needs the key raises it again where it is reported
        with contextlib.suppress(Exception):
            key_ahead.key_home().triton_key()
            return True
    return False
