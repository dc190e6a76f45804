"""nvcc's cubin loaded into CuPy: for arch-specific targets, and for a sweep's precompiled configs.

wgmma and setmaxnreg exist only in code built for the arch-specific target sm_90a, and CuPy's
``RawModule`` cannot build for it: it appends its own ``-arch=sm_<cc>`` (an integer) to
NVRTC's options. So for a cell whose magic line says ``--arch sm_90a`` (or another ``a``/``f``
target) the worker builds the variant exactly as the static report does (nvcc,
``-gencode=arch=compute_90a,code=sm_90a -lineinfo``, the same macros), which also means the
static report describes the very binary that is timed, and loads that cubin with
``cupy.RawModule(path=...)``. nvcc must be on the GPU machine's PATH (it is on the H200 image).

A sweep's compile pool builds every config's static report with nvcc anyway (the same source,
macros, ``-lineinfo`` and ``-std=c++17`` as NVRTC's build). When that report's cubin is for the
device's own architecture the worker loads it (:func:`load_prebuilt`) instead of NVRTC-compiling
the config again, serially, on the sweep's critical path: on Kernel Tuner's convolution that
recompile was most of the sweep's wall time (bench/results/convolution_vs_kernel_tuner/
2026-12-03-0717: 36.8 s of 44.2 s). Here too the static report describes the binary timed.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jupyter_ktune.backends.cuda.launch import CudaVariant
from jupyter_ktune.backends.cuda.source import cell_constants, name_expression, parse_signature
from jupyter_ktune.backends.cuda.templates import type_arguments
from jupyter_ktune.errors import CellError
from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec

_ARCH_SPECIFIC = re.compile(r"sm_\d+[af]")


def is_arch_specific(arch: str) -> bool:
    """``sm_90a``, ``sm_100a``, ``sm_100f``: targets NVRTC-through-CuPy cannot build."""
    return bool(_ARCH_SPECIFIC.fullmatch(arch))


#: ``(int)256`` as cu++filt writes a template's integer argument, and literal suffixes
#: (``4u``, ``8ul``): what an expression like ``scale<256, 4>`` does not say.
_CASTS = re.compile(r"\((?:unsigned |signed )?(?:int|long|long long|short|char|bool)\)")
_SUFFIX = re.compile(r"(?<=\d)(?:ull|ul|ll|u|l)\b", re.IGNORECASE)


def _compact(name: str) -> str:
    """A kernel's name as compared: no spaces, casts or literal suffixes, no parameter list."""
    bare = _SUFFIX.sub("", _CASTS.sub("", re.sub(r"\s+", " ", name))).replace(" ", "")
    depth = 0
    for i, ch in enumerate(bare):  # cut at the parameter list: the first "(" outside <...>
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "(" and depth == 0:
            return bare[:i]
    return bare


def kernel_symbol(kernels: Mapping[str, Any], spec: KernelSpec, expr: str) -> str:
    """Find the cubin's symbol of the cell's kernel.

    That is ``expr`` itself for an ``extern "C"`` kernel, else the one mangled entry whose
    demangled name ends in ``expr`` (the explicit instantiation of the template), compared
    without the casts and suffixes cu++filt adds (``scale<(int)256, 4u>``).
    """
    if expr in kernels:
        return expr
    want = _compact(expr)
    found = [name for name, k in kernels.items()
             if _compact(getattr(k, "demangled", "") or name).endswith(want)]
    if len(found) != 1:
        raise CellError(f"cannot find the kernel {expr} in the nvcc cubin (entries: "
                        f"{', '.join(kernels) or 'none'})", line=1,
                        fix=f'Declare the kernel extern "C" or name it on the magic line: '
                            f"%%kernel {spec.name}.")
    return found[0]


def runs_on(report_arch: str, device: Any) -> bool:
    """Whether a cubin built for ``report_arch`` (``sm_90``, ``sm_90a``) is for the device's own
    compute capability (9.0): one of another major or minor is not loaded (NVRTC builds that)."""
    cc = getattr(device, "compute_capability", "") or ""
    return bool(cc) and re.sub(r"[af]$", "", report_arch or "") == "sm_" + cc.replace(".", "")


def load_cubin(backend: Any, spec: KernelSpec, config: Config, report: Any) -> CudaVariant:
    """Load ``report``'s cubin (nvcc's build of the variant) and return the variant."""
    import cupy

    sig = parse_signature(spec)
    cxx = spec.space.cxx_env(config)
    types = type_arguments(spec, sig)
    expr = name_expression(spec, sig, cxx, types)
    symbol = kernel_symbol(report.kernels, spec, expr)
    # the cubin just built, loaded from a fresh private folder (mkdtemp: mode 0700, a random
    # name): never a file found in a shared place (issue 15, the compile cache)
    with tempfile.TemporaryDirectory(prefix="ktune-cubin-") as tmp:
        path = Path(tmp) / f"{spec.name}-{hashlib.sha256(report.cubin).hexdigest()[:16]}.cubin"
        path.write_bytes(report.cubin)
        module = cupy.RawModule(path=str(path))
        fn = module.get_function(symbol)
        fn.num_regs  # loads the module now, not at the first launch  # noqa: B018
    variant = CudaVariant(spec, sig, cxx, fn, expr, backend.device().limits, types)
    # the module stays loaded as long as the variant lives; its __constant__ symbols get inputs
    variant.module, variant.constants = module, cell_constants(spec)
    return variant


def load_prebuilt(backend: Any, spec: KernelSpec, config: Config, report: Any
                  ) -> CudaVariant | None:
    """The variant from a static report built ahead (a sweep's pool), or None where that
    report cannot be what NVRTC would have built: a pipeline (several kernels, shared
    constants), no cubin, a cubin for another architecture, or a kernel not found in it."""
    if spec.pipeline is not None or not getattr(report, "cubin", b""):
        return None
    if not runs_on(getattr(report, "arch", ""), backend.device()):
        return None
    try:
        return load_cubin(backend, spec, config, report)
    except CellError:
        return None


def compile_arch_specific(backend: Any, spec: KernelSpec, config: Config,
                          extra_defines: Mapping[str, str] | None = None) -> CudaVariant:
    """Build the variant with nvcc (through the backend's static report) and load its cubin;
    ``extra_defines`` for the scope trace's build (``variant.module`` gives its globals)."""
    # raises CompileFailure with cell lines
    report = backend.nvcc_report(spec, config, extra_defines=extra_defines)
    return load_cubin(backend, spec, config, report)
