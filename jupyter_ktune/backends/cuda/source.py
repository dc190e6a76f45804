"""CUDA C++ cell source, host side: the kernel's signature, template arguments and macros.

Nothing here touches a GPU, so it runs (and is tested) everywhere. The cell body is compiled
behind a ``#line`` directive, so NVRTC, nvcc and ncu's source view all report the notebook cell's
own line numbers.

Tunables reach the kernel in one of two ways, chosen per parameter:

* **template arguments** when the kernel is a template whose parameter names are tunables
  (``template <int BLOCK, int SWIZZLE> __global__ void scale(...)``): the kernel is instantiated
  as ``scale<256, 128>`` (NVRTC name expression; explicit instantiation for nvcc);
* **macros** (``-DBLOCK=256``) for every other tunable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from jupyter_ktune.errors import CellError, Diagnostic
from jupyter_ktune.spec import KernelSpec

CELL_FILE = "cell"

# C scalar types a cell's kernel may take by value, and the NumPy type passed for them.
SCALAR_TYPES: dict[str, type] = {
    "int": np.int32, "int32_t": np.int32, "signed": np.int32, "signed int": np.int32,
    "unsigned": np.uint32, "unsigned int": np.uint32, "uint32_t": np.uint32,
    "long long": np.int64, "long long int": np.int64, "int64_t": np.int64, "long": np.int64,
    "unsigned long long": np.uint64, "uint64_t": np.uint64, "size_t": np.uint64,
    "unsigned long": np.uint64, "short": np.int16, "unsigned short": np.uint16,
    "char": np.int8, "unsigned char": np.uint8, "bool": np.bool_,
    "float": np.float32, "double": np.float64,
}
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict)\b")


@dataclass(frozen=True)
class KernelParam:
    """One parameter of the ``__global__`` function."""

    name: str
    ctype: str
    pointer: bool

    @property
    def scalar_type(self) -> type | None:
        """NumPy type for a by-value scalar, None for pointers or unknown types."""
        return None if self.pointer else SCALAR_TYPES.get(self.ctype)


@dataclass(frozen=True)
class KernelSignature:
    """The kernel's parameters, template parameters, and the cell line of its declaration."""

    params: tuple[KernelParam, ...]
    template_params: tuple[str, ...]
    raw_params: str
    line: int


def include_dir() -> Path:
    """Folder holding ``ktune.cuh``, passed to NVRTC and nvcc as ``-I``."""
    return Path(str(resources.files("jupyter_ktune") / "include"))


def _strip_comments(src: str) -> str:
    """Blank out comments but keep line structure, so offsets still map to lines."""
    def blank(m: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r"//[^\n]*|/\*.*?\*/", blank, src, flags=re.S)


def _split_top(text: str, sep: str = ",") -> list[str]:
    out, depth, cur = [], 0, []
    for ch in text:
        depth += ch in "(<["
        depth -= ch in ")>]"
        if ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur))
    return [s.strip() for s in out]


def parse_signature(spec: KernelSpec) -> KernelSignature:
    """Find ``__global__ void NAME(...)`` in the cell and read its parameters.

    Raises a :class:`CellError` naming the fix when the kernel is missing or a parameter cannot be
    read.
    """
    src = _strip_comments(spec.source)
    pat = re.compile(
        r"(?:template\s*<(?P<tpl>[^>]*)>\s*)?"
        r"(?:extern\s+\"C\"\s+)?(?:__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void|"
        r"void\s+__global__)\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?"
        rf"{re.escape(spec.name)}\s*\((?P<params>[^)]*)\)", re.S)
    m = pat.search(src)
    if m is None:
        found = re.findall(r"(?:__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void|void\s+"
                           r"__global__)\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(", src)
        hint = f" The cell defines: {', '.join(found)}." if found else ""
        raise CellError(f"no __global__ kernel named '{spec.name}' in the cell", line=1,
                        fix=f"Name the kernel on the magic line: %%kernel <name>.{hint}")
    line = spec.body_line + src.count("\n", 0, m.start("params"))
    params = []
    for raw in _split_top(m.group("params")):
        if raw in ("", "void"):
            continue
        pointer = "*" in raw or "&" in raw
        words = re.sub(r"[*&]", " ", _QUALIFIERS.sub(" ", raw)).split()
        if len(words) < 2:
            raise CellError(f"cannot read the kernel parameter '{raw}'", line=line,
                            fix="Give every kernel parameter a type and a name.")
        params.append(KernelParam(name=words[-1], ctype=" ".join(words[:-1]), pointer=pointer))
    tpl: tuple[str, ...] = ()
    if m.group("tpl") is not None:
        names = []
        for raw in _split_top(m.group("tpl")):
            words = raw.split("=")[0].split()
            if len(words) < 2 or words[0] not in ("int", "unsigned", "bool", "long", "size_t"):
                raise CellError(f"template parameter '{raw}' is not an integer", line=line,
                                fix="Tunables are integers: template <int BLOCK>.")
            names.append(words[-1])
        tpl = tuple(names)
        missing = [t for t in tpl if t not in spec.space.names]
        if missing:
            tpl_line = spec.body_line + src.count("\n", 0, m.start("tpl"))
            raise CellError(f"template parameter {missing[0]} is not a tunable", line=tpl_line,
                            fix=f"Declare it: // ktune: {missing[0]} in [...]")
    return KernelSignature(tuple(params), tpl, m.group("params"), line)


def name_expression(spec: KernelSpec, sig: KernelSignature, config: dict[str, int]) -> str:
    """``scale<256, 128>`` for a template kernel, ``scale`` otherwise."""
    if not sig.template_params:
        return spec.name
    return f"{spec.name}<{', '.join(str(config[t]) for t in sig.template_params)}>"


def macro_defines(spec: KernelSpec, sig: KernelSignature, cxx: dict[str, int]) -> dict[str, str]:
    """Macros for the tunables that are not template parameters, plus ``KTUNE``."""
    out = {k: str(v) for k, v in cxx.items() if k not in sig.template_params}
    out["KTUNE"] = "1"
    return out


def device_source(spec: KernelSpec) -> str:
    """Cell body behind a ``#line`` directive so diagnostics use cell line numbers."""
    return f'#line {spec.body_line} "{CELL_FILE}"\n{spec.source}\n'


def static_source(spec: KernelSpec, sig: KernelSignature, cxx: dict[str, int]) -> str:
    """Source for nvcc: the cell plus an explicit instantiation of a template kernel."""
    src = device_source(spec)
    if sig.template_params:
        args = re.sub(r"\s+", " ", sig.raw_params.strip())
        src += (f'#line 1 "ktune-instantiation"\n'
                f"template __global__ void {name_expression(spec, sig, cxx)}({args});\n")
    return src


_DIAG = re.compile(r'^(?P<file>[^\n(]*?)\((?P<line>\d+)\)\s*:\s*(?P<sev>error|warning|remark)'
                   r'(?:\s*#[\w-]+)?\s*:\s*(?P<msg>.*)$', re.M)


def parse_diagnostics(log: str) -> list[Diagnostic]:
    """Read NVRTC/nvcc messages (``cell(12): error: ...``) into cell-line diagnostics.

    Lines in the cell file keep their number; messages about other files (a header, the generated
    instantiation) are kept with ``line=None`` and the file named in the text.
    """
    out = []
    for m in _DIAG.finditer(log):
        in_cell = Path(m.group("file")).name == CELL_FILE
        msg = m.group("msg").strip()
        if not in_cell:
            msg = f"{m.group('file')}({m.group('line')}): {msg}"
        out.append(Diagnostic(line=int(m.group("line")) if in_cell else None,
                              severity=m.group("sev"), message=msg))
    return out
