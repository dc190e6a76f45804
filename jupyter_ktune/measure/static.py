"""Static kernel report: what ptxas allocated and which SASS instructions it emitted, no GPU needed.

This is "Tier A" of the profiling plan: every slider setting gets registers, shared memory,
spills, stack, theoretical occupancy and an instruction mix (tensor-core MMA, load widths,
local-memory traffic, TMA) from the compiler alone. These numbers explain most performance cliffs
("64 -> 128 tile spilled 1.5 KB to local memory", "LDG.128 became LDG.32") before anything runs.

This module holds what every backend that ends in ptxas shares: :func:`parse_ptxas_verbose`
reads ``-Xptxas -v`` logs, and :class:`StaticReport` is the report. Running a compiler is the
backend's: nvcc on a ``.cu`` file is :func:`jupyter_ktune.backends.cuda.static.compile_static`,
Triton's ahead-of-time compile :mod:`jupyter_ktune.backends.triton.static`. SASS counting lives
in :mod:`jupyter_ktune.measure.sass` (its names are re-exported here) and the notebook table in
:mod:`jupyter_ktune.measure.static_html`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from jupyter_ktune.errors import PREFIX
from jupyter_ktune.measure.occupancy import Occupancy, occupancy
from jupyter_ktune.measure.sass import SASS_SKIPPED as SASS_SKIPPED
from jupyter_ktune.measure.sass import SassMix as SassMix
from jupyter_ktune.measure.sass import parse_sass as parse_sass
from jupyter_ktune.measure.sass import sass_mix as sass_mix
from jupyter_ktune.measure.static_html import report_html
from jupyter_ktune.toolchain import CompilerDiagnostic, parse_diagnostics

__all__ = ["CompilerDiagnostic", "KernelResources", "KernelStatic", "SassMix",
           "StaticReport", "parse_diagnostics", "parse_ptxas_verbose",
           "parse_sass", "sass_mix"]


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


#: Set in a sweep's compile-pool processes (``tune.runners.precompile``): their static reports
#: skip the SASS disassembly (0.52-0.67 s a config on the H200 in a busy pool,
#: bench/results/corpus_vs_autotune/2026-12-01-1037), which no sweep reads: limits need
#: registers and shared memory only, and a config run alone gets its full report (its SASS is
#: filled in from the kept cubin then: ``sass.with_sass``, called by the session).
SWEEP_STATIC_ENV = "KTUNE_SWEEP_STATIC"


def in_sweep_pool() -> bool:
    """Whether this process is a sweep's compile-pool process (see SWEEP_STATIC_ENV)."""
    return os.environ.get(SWEEP_STATIC_ENV) == "1"
