"""Arch-specific targets (``--arch sm_90a``): the cubin that runs is nvcc's, loaded into CuPy.

wgmma and setmaxnreg exist only in code built for the arch-specific target sm_90a, and CuPy's
``RawModule`` cannot build for it: it appends its own ``-arch=sm_<cc>`` (an integer) to
NVRTC's options. So for a cell whose magic line says ``--arch sm_90a`` (or another ``a``/``f``
target) the worker builds the variant exactly as the static report does (nvcc,
``-gencode=arch=compute_90a,code=sm_90a -lineinfo``, the same macros), which also means the
static report describes the very binary that is timed, and loads that cubin with
``cupy.RawModule(path=...)``. nvcc must be on the GPU machine's PATH (it is on the H200 image).
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jupyter_ktune.backends.cuda.launch import CudaVariant
from jupyter_ktune.backends.cuda.source import name_expression, parse_signature
from jupyter_ktune.errors import CellError
from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec

_ARCH_SPECIFIC = re.compile(r"sm_\d+[af]")


def is_arch_specific(arch: str) -> bool:
    """``sm_90a``, ``sm_100a``, ``sm_100f``: targets NVRTC-through-CuPy cannot build."""
    return bool(_ARCH_SPECIFIC.fullmatch(arch))


def kernel_symbol(kernels: Mapping[str, Any], spec: KernelSpec, expr: str) -> str:
    """Find the cubin's symbol of the cell's kernel.

    That is ``expr`` itself for an ``extern "C"`` kernel, else the one mangled entry whose
    demangled name ends in ``expr`` (the explicit instantiation of the template).
    """
    if expr in kernels:
        return expr
    compact = re.sub(r"\s+", "", expr)
    found = [name for name, k in kernels.items()
             if re.sub(r"\s+", "", getattr(k, "demangled", "")).split("(")[0].endswith(compact)]
    if len(found) != 1:
        raise CellError(f"cannot find the kernel {expr} in the sm_90a cubin (entries: "
                        f"{', '.join(kernels) or 'none'})", line=1,
                        fix=f'Declare the kernel extern "C" or name it on the magic line: '
                            f"%%kernel {spec.name}.")
    return found[0]


def compile_arch_specific(backend: Any, spec: KernelSpec, config: Config,
                          extra_defines: Mapping[str, str] | None = None) -> CudaVariant:
    """Build the variant with nvcc (through the backend's static report) and load its cubin;
    ``extra_defines`` for the scope trace's build (``variant.module`` gives its globals)."""
    import cupy

    # raises CompileFailure with cell lines
    report = backend.nvcc_report(spec, config, extra_defines=extra_defines)
    sig = parse_signature(spec)
    cxx = spec.space.cxx_env(config)
    expr = name_expression(spec, sig, cxx)
    symbol = kernel_symbol(report.kernels, spec, expr)
    # the cubin just built, loaded from a fresh private folder (mkdtemp: mode 0700, a random
    # name): never a file found in a shared place (issue 15, the compile cache)
    with tempfile.TemporaryDirectory(prefix="ktune-cubin-") as tmp:
        path = Path(tmp) / f"{spec.name}-{hashlib.sha256(report.cubin).hexdigest()[:16]}.cubin"
        path.write_bytes(report.cubin)
        module = cupy.RawModule(path=str(path))
        fn = module.get_function(symbol)
        fn.num_regs  # loads the module now, not at the first launch  # noqa: B018
    variant = CudaVariant(spec, sig, cxx, fn, expr, backend.device().limits)
    variant.module = module  # keeps the module loaded as long as the variant lives
    return variant
