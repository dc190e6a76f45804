"""The worker side of a Triton cell before launch: interpreter or GPU, the module file.

Triton reads kernel source with ``inspect``, so the cell is written to a real file in the
private cache folder (:mod:`jupyter_ktune.backends.cache_folder`, named and checked by its
content hash) and the checked text is executed as a module; :func:`choose_mode` decides whether
this machine runs the interpreter, which must happen before ``import triton``.
"""

from __future__ import annotations

import linecache
import os
import sys
import threading
import types
from typing import Any

import numpy as np

from jupyter_ktune.backends.base import nvidia_gpu_visible
from jupyter_ktune.backends.cache_folder import cache_dir, cached_text, digest
from jupyter_ktune.errors import CompileFailure, Diagnostic

# Line 1 of the module file stands for the %%kernel line, so file lines equal cell lines.
PRELUDE = "import triton; import triton.language as tl; from triton import cdiv  # ktune\n"
_LOAD_LOCK = threading.Lock()


def _gpu_visible() -> bool:
    return os.environ.get("KTUNE_FORCE_INTERPRET") != "1" and nvidia_gpu_visible()


def choose_mode() -> bool:
    """Set TRITON_INTERPRET=1 when no NVIDIA GPU is visible; True when interpreting.

    Must run before ``import triton`` in the worker: Triton reads the variable then.
    """
    if "triton" not in sys.modules and not _gpu_visible():
        os.environ["TRITON_INTERPRET"] = "1"
    compile_settings()
    return os.environ.get("TRITON_INTERPRET") == "1"


def compile_settings() -> None:
    """The settings every ktune process that compiles Triton takes before importing it.

    Triton 3.9 warns that its fp-fusion default will change; keep 3.6's behaviour (enabled).
    The worker, each compile-pool process and the timer's subprocess (:mod:`.timer_ahead`) come
    here first, so their compiles agree and one's builds are cache hits for the others.
    """
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")


def fp_fusion(triton: Any) -> str:
    """Whether this Triton fuses a multiply and an add into one FMA, as a result's toolchain
    says it: ``"on"`` or ``"off"``, and why where the user's environment decided it.

    The choice changes a kernel's numbers and its error against the reference, and Triton 3.10
    turns the default off: a figure measured under one choice is not comparable with one
    under the other, so it is part of the toolchain a result (and the store's key) carries."""
    language = getattr(getattr(triton, "knobs", None), "language", None)
    if language is None or not hasattr(language, "default_fp_fusion"):
        return "on (this Triton has no switch)"
    if getattr(language, "force_disable_fp_fusion", False):
        return "off (TRITON_FORCE_DISABLE_FP_FUSION)"
    on = bool(language.default_fp_fusion)
    ours = os.environ.get("TRITON_DEFAULT_FP_FUSION") == "1"
    return ("on" if on else "off") + ("" if on and ours else " (TRITON_DEFAULT_FP_FUSION)")


_allocator_set = False


def ensure_allocator() -> None:
    """Give Triton a device allocator once per worker (torch's caching allocator).

    A kernel that builds tensor descriptors on the device (``tl.make_tensor_descriptor``, the
    TMA path on Hopper) needs global scratch for them, which Triton asks ``triton.set_allocator``
    for at launch; without one such a kernel fails with "no allocator was set". Kernels that
    need no scratch never call it.
    """
    global _allocator_set
    if _allocator_set:
        return
    import torch
    import triton

    setter = getattr(triton, "set_allocator", None)
    if setter is not None:
        setter(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    _allocator_set = True


def load_module(source: str, name: str, body_line: int = 2) -> Any:
    """Write ``source`` to a cached ``.py`` file named by its hash and execute it as a module.

    Triton reads kernel source with ``inspect``, so it must live in a real file. The file's
    first lines stand in for the magic line, so its line numbers are the cell's. The text run
    is the one checked against the file's name, and ``linecache`` holds it, so ``inspect``
    reads the same text (issue 15 item 9).
    """
    text = PRELUDE + "\n" * (body_line - 2) + source + "\n"
    stem = f"ktune_triton_{name}"
    modname = f"{stem}_{digest(text)}"
    with _LOAD_LOCK:  # the static-report thread and the run may load the same cell at once
        if modname in sys.modules:
            return sys.modules[modname]
        path, text = cached_text(cache_dir("triton"), stem, ".py", text)
        return _execute(text, modname, str(path))


def _execute(text: str, modname: str, filename: str) -> Any:
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    module = types.ModuleType(modname)
    module.__file__ = filename
    sys.modules[modname] = module
    try:
        exec(compile(text, filename, "exec"), module.__dict__)  # noqa: S102 - the user's cell
    except BaseException:
        del sys.modules[modname]
        raise
    return module


def import_failure(exc: BaseException, path_part: str) -> CompileFailure:
    if isinstance(exc, SyntaxError):
        return CompileFailure("triton (Python)", str(exc),
                              [Diagnostic(exc.lineno, "error", f"SyntaxError: {exc.msg}")])
    tb, line = exc.__traceback__, None
    while tb is not None:  # the deepest frame in the cell's file names the line
        if path_part in tb.tb_frame.f_code.co_filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return CompileFailure("triton (Python)", f"{type(exc).__name__}: {exc}",
                          [Diagnostic(line, "error", f"{type(exc).__name__}: {exc}")])


def patch_interpreter_dot() -> None:
    """Make the interpreter's ``tl.dot`` right for bfloat16 operands.

    The interpreter keeps bfloat16 as raw uint16 and multiplies those integers (seen in Triton
    3.9: a 16x16 bf16 dot gave 1.9e10 for 8.2), so a bf16 GEMM could never verify on a CPU. The
    operands are widened to float32 first, which is exact; other dtypes go through unchanged.
    """
    try:
        import triton.language as tl
        from triton.runtime.interpreter import InterpreterBuilder
    except ImportError:
        return
    original = InterpreterBuilder.create_dot
    if getattr(original, "_ktune", False):
        return

    def widen(t: Any) -> Any:
        if t.dtype.scalar == tl.bfloat16:
            bits = t.data.astype(np.uint32) << np.uint32(16)
            return type(t)(bits.view(np.float32), tl.float32)
        return t

    def create_dot(self: Any, a: Any, b: Any, *rest: Any, **kw: Any) -> Any:
        return original(self, widen(a), widen(b), *rest, **kw)

    create_dot._ktune = True  # type: ignore[attr-defined]
    InterpreterBuilder.create_dot = create_dot
