"""The CUDA C++ static report: nvcc compiles a ``.cu`` file to a cubin, ptxas says what it
allocated, the disassembler what it emitted; no GPU needed.

Running nvcc is this backend's own (it was in ``measure/``, which every backend shares); the
report it builds, the ptxas log reader and the SASS counting stay there
(:mod:`jupyter_ktune.measure.static`, :mod:`jupyter_ktune.measure.sass`).

Examples
--------
>>> from jupyter_ktune.backends.cuda.static import compile_static
>>> rep = compile_static("vadd.cu", arch="sm_90", defines={"BLOCK": "256"})  # doctest: +SKIP
>>> rep.kernel("vadd").registers, rep.kernel("vadd").sass.global_load_bits  # doctest: +SKIP
(22, {128: 2})
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from jupyter_ktune.errors import PREFIX, KtuneError
from jupyter_ktune.measure.sass import SassMix, disassemble, disassembler_version, parse_sass
from jupyter_ktune.measure.static import (
    SASS_SKIPPED,
    KernelResources,
    KernelStatic,
    StaticReport,
    in_sweep_pool,
    parse_ptxas_verbose,
)
from jupyter_ktune.toolchain import (
    CompilerDiagnostic,
    ToolNotFound,
    find_tool,
    parse_diagnostics,
    tool_version,
)

_NVCC_TIMEOUT_S = 300


class CompileError(KtuneError, RuntimeError):
    """nvcc failed; carries the raw log, the parsed diagnostics and the command line.

    The message names the first error, so a traceback already says what is wrong.
    """

    def __init__(self, log: str, diagnostics: Sequence[CompilerDiagnostic], command: Sequence[str]):
        self.log, self.diagnostics, self.command = log, list(diagnostics), list(command)
        first = next((d for d in self.diagnostics if d.severity == "error"), None)
        if first is None:
            summary = log.strip().splitlines()[-1] if log.strip() else "no output"
        else:
            where = f"{first.file}({first.line})" if first.line is not None else first.file
            summary = f"{where}: {first.message}"
        super().__init__(f"{PREFIX} nvcc failed: {summary}")


@functools.lru_cache(maxsize=256)
def _demangle(names: tuple[str, ...]) -> tuple[str, ...]:
    # cu++filt knows CUDA's mangling extensions; binutils c++filt handles ordinary kernels.
    try:
        tool = str(find_tool("cu++filt"))
    except ToolNotFound:
        tool = shutil.which("c++filt")
    if not tool or not names:
        return names
    try:
        proc = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True,
                              text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return names
    out = proc.stdout.splitlines()
    return tuple(out) if proc.returncode == 0 and len(out) == len(names) else names


def compile_static(source_path: str | Path, *, arch: str = "sm_90",
                   defines: Mapping[str, str | int] | None = None,
                   include_dirs: Iterable[str | Path] = (), extra_flags: Sequence[str] = (),
                   threads_per_block: int | None = None, sass: bool = True) -> StaticReport:
    """Compile a ``.cu`` file to a cubin and report registers, smem, spills and SASS per kernel.

    Runs ``nvcc -cubin -arch=<arch> -lineinfo -Xptxas -v``; architecture-specific targets
    (``sm_90a``, ``sm_100a``) use ``-gencode=arch=compute_90a,code=sm_90a`` because ``-arch``
    alone does not enable their wgmma/TMA/tcgen05 instructions.

    Parameters
    ----------
    source_path
        The CUDA source file.
    arch
        ``"sm_90"``, ``"sm_90a"``, ``"sm_100a"`` ...
    defines
        ``-D`` macros, e.g. the tuning parameters ``{"TILE_M": "128"}``.
    include_dirs
        ``-I`` folders.
    extra_flags
        Further nvcc flags, e.g. ``("-std=c++17", "--use_fast_math")``.
    threads_per_block
        Block size, when known, so the HTML view can show occupancy.
    sass
        False: leave the SASS mix for :func:`~jupyter_ktune.measure.sass.with_sass`
        (``sass_error`` says so), so a run can load the cubin while the disassembler reads it.

    Returns
    -------
    StaticReport

    Raises
    ------
    CompileError
        nvcc failed; ``.diagnostics`` holds file, line, severity and message of each problem.
    ToolNotFound
        nvcc is missing. A missing disassembler only sets ``sass_error``.
    TypeError, ValueError, FileNotFoundError
        Bad arguments.
    """
    source = Path(source_path)
    if not source.is_file():
        raise FileNotFoundError(f"{PREFIX} CUDA source {source} does not exist")
    cmd_tail = _nvcc_args(arch, defines or {}, include_dirs, extra_flags)
    nvcc = find_tool("nvcc")
    with tempfile.TemporaryDirectory(prefix="ktune-static-") as tmp:
        out = Path(tmp) / f"{source.stem}.cubin"
        cmd = [str(nvcc), "-cubin", *cmd_tail, "-o", str(out), str(source)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=_NVCC_TIMEOUT_S,
                              check=False)
        log = proc.stdout + proc.stderr
        if proc.returncode != 0 or not out.is_file():
            raise CompileError(log, parse_diagnostics(log), cmd)
        cubin = out.read_bytes()
        mixes, sass_error, versions = {}, "", {"nvcc": tool_version("nvcc")}
        if in_sweep_pool() or not sass:
            sass_error = SASS_SKIPPED
        else:
            try:
                mixes = parse_sass(disassemble(out))
                versions["disassembler"] = disassembler_version()
            except (ToolNotFound, RuntimeError, subprocess.TimeoutExpired) as exc:
                sass_error = str(exc)
    kernels = _kernel_entries(parse_ptxas_verbose(log), mixes)
    return StaticReport(arch=arch, versions=versions, kernels=kernels, ptxas_log=log,
                        diagnostics=tuple(parse_diagnostics(log)),
                        threads_per_block=threads_per_block, sass_error=sass_error, cubin=cubin)


def _nvcc_args(arch: str, defines: Mapping[str, str | int], include_dirs: Iterable[str | Path],
               extra_flags: Sequence[str]) -> list[str]:
    if not isinstance(arch, str) or not (m := re.fullmatch(r"sm_(\d+)([af]?)", arch)):
        raise ValueError(f"{PREFIX} arch must look like 'sm_90' or 'sm_90a', got {arch!r}")
    if not isinstance(defines, Mapping):
        raise TypeError(f"{PREFIX} defines must be a mapping such as {{'TILE': '64'}}")
    if isinstance(extra_flags, str) or isinstance(include_dirs, str | Path):
        raise TypeError(f"{PREFIX} extra_flags and include_dirs must be sequences, not one string")
    target = (f"-gencode=arch=compute_{m[1]}{m[2]},code={arch}" if m[2] else f"-arch={arch}")
    args = [target, "-lineinfo", "-Xptxas", "-v"]
    for key, value in defines.items():
        if not re.fullmatch(r"[A-Za-z_]\w*", str(key)):
            raise ValueError(f"{PREFIX} define name {key!r} is not a C identifier")
        args.append(f"-D{key}={value}")
    args += [f"-I{d}" for d in include_dirs]
    return args + [str(flag) for flag in extra_flags]


def _kernel_entries(resources: Mapping[str, KernelResources],
                    mixes: Mapping[str, SassMix]) -> dict[str, KernelStatic]:
    entries = [r for r in resources.values() if r.is_entry]
    demangled = _demangle(tuple(r.name for r in entries))
    return {r.name: KernelStatic(
        name=r.name, demangled=pretty, registers=r.registers, smem_static=r.smem,
        spill_stores=r.spill_stores, spill_loads=r.spill_loads, stack_frame=r.stack_frame,
        local_memory=max(r.cumulative_stack, r.stack_frame), barriers=r.barriers,
        sass=mixes.get(r.name)) for r, pretty in zip(entries, demangled, strict=True)}
