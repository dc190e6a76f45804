"""nvcc's cubin loaded into CuPy: one build per cell, for the static report and the run alike.

A cell's static report is nvcc's build (``nvcc -cubin``, the host compiler's headers and
predefined macros, ``-lineinfo -std=c++17``, the tunables as ``-D``). The run used to be a
second build, NVRTC through CuPy, which has no host headers: ``M_PI``, ``INFINITY``,
``#include <cmath>`` compiled for the report and failed on the GPU (issue 36). So wherever nvcc
is found (:func:`nvcc_runs`; it is on the H200 image, and comes as a wheel with the ``lab``
extra) the worker loads the report's own cubin with ``cupy.RawModule(path=...)``: the static
report describes the very binary that is timed, for single runs, the panel, sweeps and
pipelines alike. The backend builds each variant once (:meth:`CudaBackend.nvcc_report` is
shared by the report thread and the run). NVRTC remains only where nvcc is absent
(:mod:`.nvrtc` gives it what nvcc's headers give).

Arch-specific targets (``--arch sm_90a``: wgmma, setmaxnreg) always need nvcc: CuPy's
``RawModule`` appends its own ``-arch=sm_<cc>`` (an integer) to NVRTC's options.

A sweep's compile pool builds every config's static report with nvcc in other processes; when
that report's cubin is for the device's own architecture the worker loads it
(:func:`load_prebuilt`) instead of compiling the config again, serially, on the sweep's critical
path: on Kernel Tuner's convolution that recompile was most of the sweep's wall time
(bench/results/convolution_vs_kernel_tuner/2026-12-03-0717: 36.8 s of 44.2 s).
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jupyter_ktune.backends.cuda.launch import CudaVariant
from jupyter_ktune.backends.cuda.pipeline import PipelineVariant, kernels
from jupyter_ktune.backends.cuda.source import cell_constants, name_expression
from jupyter_ktune.backends.cuda.templates import type_arguments
from jupyter_ktune.errors import CellError
from jupyter_ktune.space import Config
from jupyter_ktune.spec import KernelSpec
from jupyter_ktune.toolchain import ToolNotFound, find_tool

_ARCH_SPECIFIC = re.compile(r"sm_\d+[af]")


def is_arch_specific(arch: str) -> bool:
    """``sm_90a``, ``sm_100a``, ``sm_100f``: targets NVRTC-through-CuPy cannot build."""
    return bool(_ARCH_SPECIFIC.fullmatch(arch))


def nvcc_runs(arch: str) -> bool:
    """Whether the run loads nvcc's cubin (the static report's build): an arch-specific target,
    or any target where nvcc is found. Else NVRTC builds the run's variant."""
    if is_arch_specific(arch):
        return True
    try:
        find_tool("nvcc")
    except ToolNotFound:
        return False
    return True


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


def load_cubin(backend: Any, spec: KernelSpec, config: Config, report: Any
               ) -> CudaVariant | PipelineVariant:
    """Load ``report``'s cubin (nvcc's build of the variant) and return the variant, or the
    pipeline of every stage's kernel from the one cubin."""
    import cupy

    cxx = spec.space.cxx_env(config)
    # the cubin just built, loaded from a fresh private folder (mkdtemp: mode 0700, a random
    # name): never a file found in a shared place (issue 15, the compile cache)
    with tempfile.TemporaryDirectory(prefix="ktune-cubin-") as tmp:
        path = Path(tmp) / f"{spec.name}-{hashlib.sha256(report.cubin).hexdigest()[:16]}.cubin"
        path.write_bytes(report.cubin)
        module = cupy.RawModule(path=str(path))
        loaded = []
        for one, sig in kernels(spec):
            types = type_arguments(one, sig)
            expr = name_expression(one, sig, cxx, types)
            fn = module.get_function(kernel_symbol(report.kernels, one, expr))
            fn.num_regs  # loads the module now, not at the first launch  # noqa: B018
            loaded.append((one, sig, types, expr, fn))
    return cell_variant(backend, spec, cxx, module, loaded)


def cell_variant(backend: Any, spec: KernelSpec, cxx: dict[str, int], module: Any,
                 loaded: list[tuple[KernelSpec, Any, dict[str, str], str, Any]]
                 ) -> CudaVariant | PipelineVariant:
    """The variant of a loaded module, from each kernel's (spec, signature, types, name
    expression, function): the one kernel, or the pipeline of the stages."""
    variants = []
    for one, sig, types, expr, fn in loaded:
        variant = CudaVariant(one, sig, cxx, fn, expr, backend.device().limits, types)
        # the module stays loaded as long as the variant lives; its __constant__ symbols get
        # inputs
        variant.module, variant.constants = module, cell_constants(spec)
        variants.append(variant)
    if spec.pipeline is None:
        return variants[0]
    return PipelineVariant(spec, variants, backend.timer())


def load_prebuilt(backend: Any, spec: KernelSpec, config: Config, report: Any
                  ) -> CudaVariant | PipelineVariant | None:
    """The variant from a static report built ahead (a sweep's pool), or None where that
    report cannot be loaded: no cubin, a cubin for another architecture, or a kernel not
    found in it."""
    if not getattr(report, "cubin", b""):
        return None
    if not runs_on(getattr(report, "arch", ""), backend.device()):
        return None
    try:
        return load_cubin(backend, spec, config, report)
    except CellError:
        return None


def compile_with_nvcc(backend: Any, spec: KernelSpec, config: Config,
                      extra_defines: Mapping[str, str] | None = None
                      ) -> CudaVariant | PipelineVariant:
    """Build the variant with nvcc (the backend's static report, built once) and load its
    cubin; ``extra_defines`` for the scope trace's build (``variant.module`` its globals)."""
    # raises CompileFailure with cell lines; loaded while the report thread reads its SASS
    report = backend.nvcc_report(spec, config, extra_defines=extra_defines, cubin_only=True)
    return load_cubin(backend, spec, config, report)
