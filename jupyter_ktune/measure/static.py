"""Static kernel report: what ptxas allocated and which SASS instructions it emitted, no GPU needed.

This is "Tier A" of the profiling plan: every slider setting gets registers, shared memory,
spills, stack, theoretical occupancy and an instruction mix (tensor-core MMA, load widths,
local-memory traffic, TMA) from the compiler alone. These numbers explain most performance cliffs
("64 -> 128 tile spilled 1.5 KB to local memory", "LDG.128 became LDG.32") before anything runs.

The pieces are usable alone: :func:`parse_ptxas_verbose` reads ``nvcc -Xptxas -v`` logs,
:func:`parse_sass` / :func:`sass_mix` count instructions, :func:`parse_diagnostics` reads nvcc
errors, and :func:`compile_static` runs the whole thing on a ``.cu`` file. This module holds the
ptxas side and the report; SASS counting lives in :mod:`jupyter_ktune.measure.sass` and the
notebook table in :mod:`jupyter_ktune.measure.static_html`. The SASS names are re-exported here.

Examples
--------
>>> from jupyter_ktune.measure.static import compile_static
>>> rep = compile_static("vadd.cu", arch="sm_90", defines={"BLOCK": "256"})  # doctest: +SKIP
>>> rep.kernel("vadd").registers, rep.kernel("vadd").sass.global_load_bits  # doctest: +SKIP
(22, {128: 2})
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from jupyter_ktune.errors import PREFIX, KtuneError
from jupyter_ktune.measure.occupancy import Occupancy, occupancy
from jupyter_ktune.measure.sass import SASS_SKIPPED as SASS_SKIPPED
from jupyter_ktune.measure.sass import SassMix as SassMix
from jupyter_ktune.measure.sass import disassemble
from jupyter_ktune.measure.sass import parse_sass as parse_sass
from jupyter_ktune.measure.sass import sass_mix as sass_mix
from jupyter_ktune.measure.static_html import report_html
from jupyter_ktune.toolchain import (
    CompilerDiagnostic,
    ToolNotFound,
    find_tool,
    parse_diagnostics,
    tool_version,
)

__all__ = ["CompileError", "CompilerDiagnostic", "KernelResources", "KernelStatic", "SassMix",
           "StaticReport", "compile_static", "parse_diagnostics", "parse_ptxas_verbose",
           "parse_sass", "sass_mix"]

_NVCC_TIMEOUT_S = 300


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reports for one function (``-Xptxas -v``); sizes in bytes.

    ``is_entry`` is False for non-inlined ``__device__`` functions, which ptxas lists without a
    ``Compiling entry function`` line. ``cumulative_stack`` includes callees' frames; ``cmem``
    maps constant bank to bytes (CUDA 13 no longer prints it; older logs do). ``notes`` keeps
    ptxas info/warning lines that name the function, such as spill warnings or the wgmma
    serialisation notice (C7515).
    """

    name: str
    arch: str | None = None
    is_entry: bool = False
    registers: int = 0
    barriers: int = 0
    smem: int = 0
    stack_frame: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    cumulative_stack: int = 0
    cmem: Mapping[int, int] = field(default_factory=dict, hash=False)
    notes: tuple[str, ...] = ()


_COMPILING = re.compile(r"Compiling entry function '(?P<name>[^']+)' for '(?P<arch>\w+)'")
_PROPERTIES = re.compile(r"Function properties for (?P<name>\S+)")
_FRAME = re.compile(r"(?P<stack>\d+) bytes stack frame, (?P<st>\d+) bytes spill stores, "
                    r"(?P<ld>\d+) bytes spill loads")
_USED = re.compile(r"Used (?P<regs>\d+) registers(?P<rest>.*)$")
_FUNC_IN_NOTE = re.compile(r"function '(?P<name>[^']+)'")


def parse_ptxas_verbose(text: str) -> dict[str, KernelResources]:
    """Parse ``nvcc -Xptxas -v`` (or ``ptxas -v``) output into per-function resources.

    Parameters
    ----------
    text
        The compiler's stderr. Lines that are not ptxas resource lines are ignored, so the full
        nvcc log can be passed.

    Returns
    -------
    dict[str, KernelResources]
        Keyed by mangled name, in log order. Entry kernels have ``is_entry=True``.

    Examples
    --------
    >>> log = '''ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_90'
    ... ptxas info    : Function properties for _Z3fooPf
    ...     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ... ptxas info    : Used 12 registers, used 1 barriers, 1024 bytes smem'''
    >>> r = parse_ptxas_verbose(log)["_Z3fooPf"]
    >>> r.registers, r.barriers, r.smem, r.is_entry
    (12, 1, 1024, True)
    """
    found: dict[str, dict] = {}
    current: dict | None = None
    for line in text.splitlines():
        if m := _COMPILING.search(line):
            current = found.setdefault(m["name"], {"name": m["name"]})
            current.update(arch=m["arch"], is_entry=True)
        elif m := _PROPERTIES.search(line):
            current = found.setdefault(m["name"], {"name": m["name"]})
        elif (m := _FRAME.search(line)) and current is not None:
            current.update(stack_frame=int(m["stack"]), spill_stores=int(m["st"]),
                           spill_loads=int(m["ld"]))
        elif (m := _USED.search(line)) and current is not None:
            current.update(registers=int(m["regs"]), **_used_tail(m["rest"]))
        elif "ptxas" in line and (m := _FUNC_IN_NOTE.search(line)) and m["name"] in found:
            notes = found[m["name"]].setdefault("notes", ())
            found[m["name"]]["notes"] = (*notes, line.split(":", 1)[-1].strip())
    return {name: KernelResources(**fields) for name, fields in found.items()}


def _used_tail(rest: str) -> dict:
    # ", used 1 barriers, 1024 bytes smem, 360 bytes cmem[0], 64 bytes cumulative stack size"
    out: dict = {"cmem": {}}
    for item in (part.strip() for part in rest.split(",")):
        if m := re.fullmatch(r"used (\d+) barriers?", item):
            out["barriers"] = int(m[1])
        elif m := re.fullmatch(r"(\d+) bytes smem", item):
            out["smem"] = int(m[1])
        elif m := re.fullmatch(r"(\d+) bytes cmem\[(\d+)\]", item):
            out["cmem"][int(m[2])] = int(m[1])
        elif m := re.fullmatch(r"(\d+) bytes cumulative stack size", item):
            out["cumulative_stack"] = int(m[1])
    return out


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


@dataclass(frozen=True)
class KernelStatic:
    """One kernel of a :class:`StaticReport`: ptxas resources plus its SASS instruction mix.

    ``local_memory`` is the per-thread local memory in bytes (cumulative stack: spills, local
    arrays and callee frames). ``sass`` is None when no disassembler was found.
    """

    name: str
    demangled: str
    registers: int
    smem_static: int
    spill_stores: int
    spill_loads: int
    stack_frame: int
    local_memory: int
    barriers: int
    sass: SassMix | None = None

    def to_dict(self) -> dict:
        """Return a JSON-ready dict."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "sass"}
        out["sass"] = None if self.sass is None else self.sass.to_dict()
        return out


@dataclass(frozen=True)
class StaticReport:
    """Compile-time facts about every kernel of one source file for one architecture.

    Render it in a notebook (``_repr_html_``) or store it (``to_dict``). ``cubin`` holds the
    compiled code so the SASS can be re-read later; it is left out of ``repr`` and ``to_dict``.
    """

    arch: str
    versions: Mapping[str, str] = field(hash=False)
    kernels: Mapping[str, KernelStatic] = field(hash=False)
    ptxas_log: str = field(repr=False, default="")
    diagnostics: tuple[CompilerDiagnostic, ...] = ()
    threads_per_block: int | None = None
    sass_error: str = ""
    cubin: bytes = field(repr=False, default=b"")
    dynamic_smem: int | None = None  # the launch's, when the config alone gives it

    def kernel(self, name: str) -> KernelStatic:
        """Find a kernel by mangled name, demangled signature or bare name (``"vadd"``; also
        ``"cutlass_vadd"``, built under a ``name_prefix``, when no kernel is named so exactly).

        Raises
        ------
        KeyError
            No kernel, or several kernels share the bare name; the message lists them.
        """
        if name in self.kernels:
            return self.kernels[name]
        hits = [k for k in self.kernels.values()
                if name in (k.demangled, _bare_name(k.demangled))]
        # a kernel a name_prefix renamed (cutlass_scale), asked for by its cell name (scale)
        hits = hits or [k for k in self.kernels.values() if _bare_name(k.demangled).endswith(name)]
        if len(hits) == 1:
            return hits[0]
        listed = ", ".join(k.demangled for k in (hits or self.kernels.values()))
        what = "is ambiguous" if hits else "not found"
        raise KeyError(f"{PREFIX} kernel {name!r} {what}; kernels: {listed}")

    def occupancy(self, kernel: str, threads_per_block: int,
                  dynamic_smem: int | None = None) -> Occupancy:
        """Theoretical occupancy of ``kernel`` launched with this block size and dynamic smem
        (None: the launch's own, :attr:`dynamic_smem`, or 0 when unknown).

        Examples
        --------
        >>> rep.occupancy("vadd", 256).occupancy  # doctest: +SKIP
        1.0
        """
        k = self.kernel(kernel)
        dynamic = (self.dynamic_smem or 0) if dynamic_smem is None else dynamic_smem
        return occupancy(self.arch, threads_per_block, k.registers, k.smem_static + dynamic)

    def to_dict(self) -> dict:
        """Return a JSON-ready dict (cubin excluded; its size is kept)."""
        return {"arch": self.arch, "versions": dict(self.versions),
                "kernels": [k.to_dict() for k in self.kernels.values()],
                "ptxas_log": self.ptxas_log, "threads_per_block": self.threads_per_block,
                "dynamic_smem": self.dynamic_smem,
                "diagnostics": [vars(d) for d in self.diagnostics],
                "sass_error": self.sass_error, "cubin_bytes": len(self.cubin)}

    def _repr_html_(self) -> str:
        return report_html(self)


def _bare_name(demangled: str) -> str:
    """``void ns::scale<(int)256, 4>(float const*)`` -> ``scale`` (cu++filt writes ``(int)256``)."""
    m = re.match(r"^(?:[^<(]*?\s)?([A-Za-z_][\w:]*)\s*[<(]", demangled)
    head = m.group(1) if m else demangled
    return head.rsplit("::", 1)[-1]


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
                   threads_per_block: int | None = None) -> StaticReport:
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
        if in_sweep_pool():
            sass_error = SASS_SKIPPED
        else:
            try:
                mixes = parse_sass(disassemble(out))
                versions["disassembler"] = _disassembler_version()
            except (ToolNotFound, RuntimeError, subprocess.TimeoutExpired) as exc:
                sass_error = str(exc)
    kernels = _kernel_entries(parse_ptxas_verbose(log), mixes)
    return StaticReport(arch=arch, versions=versions, kernels=kernels, ptxas_log=log,
                        diagnostics=tuple(parse_diagnostics(log)),
                        threads_per_block=threads_per_block, sass_error=sass_error, cubin=cubin)


def _disassembler_version() -> str:
    try:
        return f"cuobjdump {tool_version('cuobjdump')}"
    except ToolNotFound:
        return f"nvdisasm {tool_version('nvdisasm')}"


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


#: Set in a sweep's compile-pool processes (``tune.runners.precompile``): their static reports
#: skip the SASS disassembly (0.52-0.67 s a config on the H200 in a busy pool,
#: bench/results/corpus_vs_autotune/2026-12-01-1037), which no sweep reads: limits need
#: registers and shared memory only, and a config run alone gets its full report (its SASS is
#: filled in from the kept cubin then: ``sass.with_sass``, called by the session).
SWEEP_STATIC_ENV = "KTUNE_SWEEP_STATIC"


def in_sweep_pool() -> bool:
    """Whether this process is a sweep's compile-pool process (see SWEEP_STATIC_ENV)."""
    return os.environ.get(SWEEP_STATIC_ENV) == "1"


def _kernel_entries(resources: Mapping[str, KernelResources],
                    mixes: Mapping[str, SassMix]) -> dict[str, KernelStatic]:
    entries = [r for r in resources.values() if r.is_entry]
    demangled = _demangle(tuple(r.name for r in entries))
    return {r.name: KernelStatic(
        name=r.name, demangled=pretty, registers=r.registers, smem_static=r.smem,
        spill_stores=r.spill_stores, spill_loads=r.spill_loads, stack_frame=r.stack_frame,
        local_memory=max(r.cumulative_stack, r.stack_frame), barriers=r.barriers,
        sass=mixes.get(r.name)) for r, pretty in zip(entries, demangled, strict=True)}
