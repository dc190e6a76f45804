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
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from jupyter_ktune.backends.cuda.constants import ConstantSymbol, constant_symbols
from jupyter_ktune.backends.cuda.includes import header_hint
from jupyter_ktune.backends.cuda.templates import (
    literal_pragmas,
    substitute,
    template_arguments,
    type_headers,
)
from jupyter_ktune.errors import CellError, Diagnostic
from jupyter_ktune.spec import KernelSpec
from jupyter_ktune.toolchain import parse_diagnostics as compiler_diagnostics
from jupyter_ktune.tunable_values import COMPILER_CONTROLS

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
    template_params: tuple[str, ...]  # every template parameter, in order
    raw_params: str
    line: int
    template_types: tuple[str, ...] = ()  # the ``typename``/``class`` ones among them
    template_defaults: Mapping[str, str] = field(default_factory=dict)
    template_line: int | None = None


def include_dir() -> Path:
    """Folder holding ``ktune.cuh``, passed to NVRTC and nvcc as ``-I``."""
    return Path(str(resources.files("jupyter_ktune") / "include"))


def _strip_comments(src: str) -> str:
    """Blank out comments but keep line structure, so offsets still map to lines."""
    def blank(m: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r"//[^\n]*|/\*.*?\*/", blank, src, flags=re.S)


def cell_constants(spec: KernelSpec) -> tuple[ConstantSymbol, ...]:
    """The cell's ``__constant__`` declarations (not those in comments)."""
    return constant_symbols(spec, _strip_comments(spec.source))


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


def _balanced(text: str, start: int, open_: str, close: str) -> int:
    """Index just past the bracket that closes the one at ``start``, or -1."""
    depth = 0
    for i in range(start, len(text)):
        depth += text[i] == open_
        depth -= text[i] == close
        if depth == 0:
            return i + 1
    return -1


def _declaration_head(src: str, at: int) -> str:
    """The text before a function name back to the previous ``;``, ``{`` or ``}`` outside
    parentheses, less preprocessor lines: its qualifiers, return type and template head."""
    depth, i = 0, at
    while i > 0:
        ch = src[i - 1]
        depth += ch == ")"
        depth -= ch == "("
        if depth <= 0 and ch in ";{}":
            break
        i -= 1
    lines = src[i:at].split("\n")
    while len(lines) > 1 and (lines[0].lstrip().startswith("#") or not lines[0].strip()):
        lines.pop(0)
    return "\n".join(lines)


_TEMPLATE_HEAD = re.compile(r"^\s*template\s*<")
_VALUE_KINDS = ("int", "unsigned", "bool", "long", "size_t", "short", "char", "int32_t",
                "int64_t", "uint32_t", "uint64_t")


def _kernels(src: str) -> list[tuple[str, int, str, int]]:
    """(name, offset of its parameter list, declaration head, offset of the head) of every
    ``__global__`` function."""
    out = []
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", src):
        if m.group(1) in ("__launch_bounds__", "__global__", "decltype", "sizeof", "alignas"):
            continue
        head = _declaration_head(src, m.start())
        if re.search(r"\b__global__\b", head) and "=" not in head.split("__global__")[-1]:
            out.append((m.group(1), m.end() - 1, head, m.start() - len(head)))
    return out


def _template_params(head: str) -> tuple[tuple[str, ...], tuple[str, ...], dict[str, str]]:
    """(names in order, the type parameters among them, defaults) of a ``template <...>``."""
    if not _TEMPLATE_HEAD.match(head):
        return (), (), {}
    opening = head.index("<")
    inside = head[opening + 1:_balanced(head, opening, "<", ">") - 1]
    names, types, defaults = [], [], {}
    for raw in _split_top(inside):
        decl, _, default = raw.partition("=")
        words = decl.replace("...", " ").split()
        if len(words) < 2:
            raise ValueError(raw)
        names.append(words[-1])
        if words[0] in ("typename", "class"):
            types.append(words[-1])
        elif words[0] not in _VALUE_KINDS:
            raise ValueError(raw)
        if default.strip():
            defaults[words[-1]] = default.strip()
    return tuple(names), tuple(types), defaults


def outputs_read_in_place(spec: KernelSpec) -> frozenset[str]:
    """The ``--out`` arrays the kernel also reads (``y[i] += ...``, ``... = f(y[i])``): they are
    updated in place, so they keep their input values instead of the poison (a poisoned one
    would feed NaN into the kernel). An indexing not followed by a plain ``=`` is a read."""
    src = _strip_comments(spec.source)
    found = set()
    for name in spec.outputs:
        for m in re.finditer(rf"\b{re.escape(name)}\s*\[", src):
            depth, i = 1, m.end()
            while i < len(src) and depth:
                depth += {"[": 1, "]": -1}.get(src[i], 0)
                i += 1
            rest = src[i:].lstrip()
            if not (rest.startswith("=") and not rest.startswith("==")):
                found.add(name)
                break
    return frozenset(found)


def parse_signature(spec: KernelSpec) -> KernelSignature:
    """Find ``__global__ void NAME(...)`` in the cell and read its parameters.

    Any qualifiers may stand around ``__global__`` (``static``, ``extern "C"``,
    ``__launch_bounds__(decltype(size(Layout{}))::value)``). Template parameters may be
    integers (tunables) or types (``typename T``: from a ``// ktune: T = float`` line or the
    dtype of the input passed as a ``T*``, see :mod:`.templates`).

    Raises a :class:`CellError` naming the fix when the kernel is missing or a parameter cannot be
    read.
    """
    src = _strip_comments(spec.source)
    found = _kernels(src)
    hit = next((k for k in found if k[0] == spec.name), None)
    if hit is None:
        names = list(dict.fromkeys(k[0] for k in found))
        hint = f" The cell defines: {', '.join(names)}." if names else ""
        raise CellError(f"no __global__ kernel named '{spec.name}' in the cell", line=1,
                        fix=f"Name the kernel on the magic line: %%kernel <name>.{hint}")
    _, start, head, head_at = hit
    line = spec.body_line + src.count("\n", 0, start)
    raw_params = src[start + 1:_balanced(src, start, "(", ")") - 1]
    tpl_line = spec.body_line + src.count("\n", 0, head_at + len(head) - len(head.lstrip()))
    try:
        tpl, types, defaults = _template_params(head)
    except ValueError as exc:
        raise CellError(f"template parameter '{exc}' is neither a type nor an integer",
                        line=tpl_line, fix="Write template <typename T, int BLOCK>.") from None
    params = []
    for i, raw in enumerate(_split_top(raw_params)):
        if raw in ("", "void"):
            continue
        pointer = "*" in raw or "&" in raw
        words = re.sub(r"[*&]", " ", _QUALIFIERS.sub(" ", raw.split("=")[0])).split()
        if len(words) == 1 and words[0] in types:  # an unnamed parameter of a template type
            words.append(f"<parameter {i + 1}>")
        if len(words) < 2:
            raise CellError(f"cannot read the kernel parameter '{raw}'", line=line,
                            fix="Give every kernel parameter a type and a name.")
        params.append(KernelParam(name=words[-1], ctype=" ".join(words[:-1]), pointer=pointer))
    missing = [t for t in tpl if t not in types and t not in spec.space.names
               and t not in defaults]
    if missing:
        raise CellError(f"template parameter {missing[0]} is not a tunable", line=tpl_line,
                        fix=f"Declare it: // ktune: {missing[0]} in [...]")
    return KernelSignature(tuple(params), tpl, raw_params, line, types, defaults, tpl_line)


def name_expression(spec: KernelSpec, sig: KernelSignature, config: Mapping[str, int],
                    types: Mapping[str, str] | None = None) -> str:
    """``scale<256, 128>`` (``rmsnorm<float>``) for a template kernel, ``scale`` otherwise."""
    if not sig.template_params:
        return spec.name
    return f"{spec.name}<{', '.join(template_arguments(sig, config, types or {}))}>"


def macro_defines(spec: KernelSpec, sig: KernelSignature, cxx: dict[str, int]) -> dict[str, str]:
    """Macros for the tunables that are not template parameters, plus ``KTUNE``; a compiler
    control (``maxnreg``: a flag, :mod:`.flags`) is never a macro."""
    out = {k: str(v) for k, v in cxx.items()
           if k not in sig.template_params and k not in COMPILER_CONTROLS}
    out["KTUNE"] = "1"
    return out


def device_source(spec: KernelSpec, macros: Mapping[str, Any] | None = None,
                  types: Mapping[str, str] | None = None,
                  constants: Mapping[str, int] | None = None) -> str:
    """Cell body behind a ``#line`` directive so diagnostics use cell line numbers; tunables
    that are ``macros`` are written into ``#pragma unroll`` lines as literals, and the header of
    a template type argument (``__half``: ``cuda_fp16.h``) comes first. ``constants`` become
    namespace-scope ``constexpr int``s: a pipeline's tunable that one stage takes as a template
    parameter (which hides it there) and another reads as a plain name."""
    head = type_headers((types or {}).values()) + "".join(
        f"static constexpr int {k} = {v};\n" for k, v in (constants or {}).items())
    body = literal_pragmas(spec.source, {**(constants or {}), **(macros or {})})
    return f'{head}#line {spec.body_line} "{CELL_FILE}"\n{body}\n'


def static_source(spec: KernelSpec, sig: KernelSignature, cxx: dict[str, int],
                  types: Mapping[str, str] | None = None) -> str:
    """Source for nvcc: the cell plus an explicit instantiation of a template kernel."""
    return device_source(spec, macro_defines(spec, sig, cxx), types) + instantiation(
        spec, sig, cxx, types)


def instantiation(spec: KernelSpec, sig: KernelSignature, cxx: Mapping[str, int],
                  types: Mapping[str, str] | None = None) -> str:
    """The explicit instantiation nvcc needs to emit a template kernel ("" for a plain one)."""
    if not sig.template_params:
        return ""
    values = dict(zip(sig.template_params, template_arguments(sig, cxx, types or {}),
                      strict=True))
    args = re.sub(r"\s+", " ", substitute(sig.raw_params, values).strip())
    return (f'#line 1 "ktune-instantiation"\n'
            f"template __global__ void {name_expression(spec, sig, cxx, types)}({args});\n")


_SUMMARY = re.compile(r"\s*\d+ errors? detected in the compilation of .*$")


def parse_diagnostics(log: str, kernel_line: int | None = None,
                      macros: Mapping[str, Any] | None = None) -> list[Diagnostic]:
    """Read NVRTC/nvcc/ptxas messages (``cell(12): error: ...``) into cell-line diagnostics.

    Lines in the cell file keep their number; messages about other files (a header, the generated
    instantiation) are kept with ``line=None`` and the file named in the text. A ptxas message
    about an entry function (too much shared data) goes on ``kernel_line``, the kernel's
    declaration. A header nvcc cannot open gets the ``include`` directive that finds it, and an
    error inside a header on a line that names one of the cell's ``macros`` (the tunables passed
    as ``-D``) says which tunable rewrote it.
    """
    out = []
    for d in compiler_diagnostics(log):
        in_cell = d.file is not None and Path(d.file).name == CELL_FILE
        msg = _SUMMARY.sub("", d.message)
        if d.file is None:  # ptxas
            msg = f"ptxas: {msg}"
        elif not in_cell:
            msg = f"{d.file}({d.line}): {msg}"
            if hint := macro_collision_hint(d.file, d.line, macros or {},
                                            echoed_line(log, d.file, d.line)):
                msg = f"{msg}. {hint}"
        if hint := header_hint(d.message):
            msg = f"{msg}. {hint}"
        line = d.line if in_cell else (kernel_line if "Entry function" in d.message else None)
        out.append(Diagnostic(line=line, severity=d.severity, message=msg,
                              column=d.column if in_cell else None))
    return out


def echoed_line(log: str, file: str, line: int | None) -> str | None:
    """The source line a compiler printed under its message about ``file(line)``, if any
    (NVRTC's built-in headers exist only in its log)."""
    at = log.find(f"{file}({line}):")
    if line is None or at < 0:
        return None
    rest = log[at:].split("\n", 2)
    return rest[1] if len(rest) > 1 else None


def macro_collision_hint(header: str, line: int | None, macros: Mapping[str, Any],
                         echoed: str | None = None) -> str:
    """The tunable whose ``-D`` macro rewrote an identifier on ``line`` of ``header``, if any.

    A tunable that is not a template parameter reaches the cell as a macro, and a macro rewrites
    every identifier of that name in every header after it: a tunable called ``T`` turns CUDA's
    own ``template <typename T>`` (cuda_device_runtime_api.h under nvcc, NVRTC's built-in
    header) into ``template <typename 64>``, and the error points into a header the user never
    opened. Read that header line (or, for a header that is not on disk, the line the compiler
    echoed) and name the tunable, with the two ways out.
    """
    if line is None or not macros:
        return ""
    try:  # the header's own text: nvcc echoes the line after the macros rewrote it
        text = Path(header).read_text(errors="replace").splitlines()[line - 1]
    except (OSError, IndexError):
        text = echoed or ""  # NVRTC echoes it as written
    hit = next((name for name in macros if name != "KTUNE"
                and re.search(rf"(?<![\w#]){re.escape(name)}\b", text)), None)
    if hit is None:
        return ""
    return (f"The tunable {hit} reaches the cell as the macro -D{hit}={macros[hit]}, which "
            f"rewrites the name {hit} on that line of {Path(header).name}: rename the tunable "
            f"(e.g. {hit}_SIZE), or make it a template parameter of the kernel")
