"""Compiler controls as tunables: the kernel's symbol name, nvcc's flags, a register cap.

Three tunable names are reserved (issue 38)::

    // ktune: name_prefix in ["", "cutlass_"]                              (CUDA C++, Triton)
    // ktune: nvcc_flags in [[], ["--use_fast_math"], ["-maxrregcount=128"]]   (CUDA C++)
    # ktune: maxnreg in [128, 168]                                  (Triton; CUDA C++ too)

They are swept, stored and shown like any tunable, but they steer the compiler and never reach
the kernel as a macro, template argument or constexpr (:data:`~jupyter_ktune.tunable_values.
NOT_FOR_KERNEL`; Triton takes ``maxnreg`` as its launch option, nvcc as ``-maxrregcount``).

``name_prefix`` renames the kernel before it is compiled (ptxas applies some optimisations to
kernels whose name contains "cutlass"): :func:`with_name_prefix` returns the spec whose ``name``
and source say ``cutlass_scale`` wherever they said ``scale``, so every later step (NVRTC's name
expression, nvcc's instantiation, the cubin's symbol lookup, Triton's module, its compiled name)
reads the new name from the spec. In C++ the kernel's identifier is renamed outside comments and
strings (and not after ``.``, ``->`` or ``::``); in Python through :mod:`tokenize` (not after a
``.``), so a host wrapper or a decorator that names the kernel follows too.
"""

from __future__ import annotations

import dataclasses
import io
import re
import tokenize
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from jupyter_ktune.errors import CellError
from jupyter_ktune.tunable_values import value_text

if TYPE_CHECKING:
    from jupyter_ktune.spec import KernelSpec

#: the reserved tunable names; which backends take each is their ``compiler_controls`` (a
#: control elsewhere is refused on its line)
CONTROLS = ("name_prefix", "nvcc_flags", "maxnreg")
_PREFIX = re.compile(r"^[A-Za-z_]\w*$")
#: nvcc flags that would change what is built or where it goes: the cell's --arch and the
#: static report own them
_OWNED = re.compile(r"^--?(o|output-file|arch|gpu-architecture|gencode|generate-code|code|"
                    r"gpu-code|cubin|ptx|fatbin|E|M|MM|c|run|lib|link|dlink|x)(=.*)?$")


def check_controls(spec: KernelSpec, backends: Mapping[str, Any]) -> None:
    """Refuse a compiler control the backend does not have, or a value it cannot take, on the
    tunable's own cell line.

    ``backends``: the registry's backends by name, asked for their ``compiler_controls`` and
    ``language`` (the others only when the error names those that take the control). A backend
    that declares none (None) is not checked: to it these are tunables like any other."""
    for p in spec.space.params:
        if p.name not in CONTROLS:
            continue
        takes = backends[spec.backend].compiler_controls
        if takes is not None and p.name not in takes:
            where = " and ".join(backends[b].language for b in backends
                                 if p.name in (backends[b].compiler_controls or ()))
            raise CellError(f"{p.name} is a compiler control of {where}; this cell is "
                            f"--backend {spec.backend}", line=p.line,
                            fix="Remove the tunable, or rename it if the kernel takes it.")
        for v in p.values:
            _check_value(p.name, v, p.line)


def _check_value(name: str, value: Any, line: int | None) -> None:
    if name == "name_prefix" and not (value == "" or isinstance(value, str)
                                      and _PREFIX.match(value)):
        raise CellError(f"name_prefix value {value_text(value)} cannot begin a C/Python name",
                        line=line, fix='Write name_prefix in ["", "cutlass_"].')
    if name == "maxnreg" and (isinstance(value, bool) or not isinstance(value, int)
                              or not 0 < value <= 255):
        raise CellError(f"maxnreg value {value_text(value)} is not a register count",
                        line=line, fix="Write maxnreg in [128, 168, 232] (at most 255).")
    if name == "nvcc_flags":
        if not isinstance(value, tuple):
            raise CellError(f"each value of nvcc_flags is a list of flags, not "
                            f"{value_text(value)}", line=line,
                            fix=f'Write nvcc_flags in [[], ["{value}"]].')
        owned = next((f for f in value if _OWNED.match(f)), None)
        if owned is not None:
            raise CellError(f"nvcc_flags value {value_text(value)} sets {owned}, which the "
                            "cell's build owns (the target is --arch, the output the cubin the "
                            "static report reads)", line=line,
                            fix="Remove the flag; set the target with --arch sm_90a.")


def controls(spec: KernelSpec, config: Mapping[str, Any]) -> dict[str, Any]:
    """The compiler controls ``config`` sets: ``{"name_prefix": "cutlass_", ...}``, only those
    the cell declares."""
    return {n: config[n] for n in CONTROLS if n in spec.space.names and n in config}


def with_name_prefix(spec: KernelSpec, config: Mapping[str, Any], *,
                     rename: Callable[[str, str, str], str]) -> KernelSpec:
    """The spec of ``config``'s kernel symbol: ``spec`` itself without a ``name_prefix`` (or
    with the prefix already applied), else the kernel (and, in a CUDA pipeline, every stage's
    kernel) renamed in the source (by ``rename``, the backend's: :func:`rename_cxx` or
    :func:`rename_python`), the pipeline directive and ``name``."""
    prefix = controls(spec, config).get("name_prefix", "")
    if not prefix or spec.symbol_prefix == prefix:
        return spec
    if spec.symbol_prefix:  # a renamed spec asked for another prefix: never stacked
        raise ValueError(f"[ktune] {spec.name} already carries the prefix {spec.symbol_prefix}")
    names = [spec.name, *(pipeline_stage_names(spec.pipeline[0]) if spec.pipeline else [])]
    source, pipeline = spec.source, spec.pipeline
    for name in dict.fromkeys(names):
        source = rename(source, name, prefix + name)
        if pipeline is not None:
            pipeline = (rename_cxx(pipeline[0], name, prefix + name), pipeline[1])
    return dataclasses.replace(spec, name=prefix + spec.name, source=source, pipeline=pipeline,
                               symbol_prefix=prefix)


def pipeline_stage_names(text: str) -> list[str]:
    """The kernels a ``pipeline = [k1(grid=...), k2(...)]`` list names, in order."""
    names, depth = [], 0
    for m in re.finditer(r"[\[\](),]|[A-Za-z_]\w*(?=\s*\()", text):
        tok = m.group(0)
        if tok in "[(":
            depth += 1
        elif tok in "])":
            depth -= 1
        elif tok != "," and depth == 1:
            names.append(tok)
    return names


_CXX_SKIP = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def rename_cxx(source: str, old: str, new: str) -> str:
    """``old`` renamed ``new`` as a C++ identifier: not inside comments, strings or character
    literals, not a member (``.old``, ``->old``) or a qualified name (``ns::old``)."""
    blank = _CXX_SKIP.sub(lambda m: " " * len(m.group(0)), source)
    out, last = [], 0
    for m in re.finditer(rf"(?<!\w){re.escape(old)}(?!\w)", blank):
        before = blank[:m.start()].rstrip()
        if before.endswith(("->", "::", ".")):
            continue
        out.append(source[last:m.start()] + new)
        last = m.end()
    return "".join(out) + source[last:]


def rename_python(source: str, old: str, new: str) -> str:
    """``old`` renamed ``new`` as a Python name (not an attribute ``x.old``, not in strings or
    comments), through :mod:`tokenize` so line and column positions hold; the source as it is
    when it does not tokenize (the compile then reports the cell's own error)."""
    lines = source.splitlines(keepends=True)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return source
    hits, prev = [], None
    for tok in tokens:
        if tok.type == tokenize.NAME and tok.string == old and not (
                prev is not None and prev.type == tokenize.OP and prev.string == "."):
            hits.append(tok.start)
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT,
                            tokenize.DEDENT):
            prev = tok
    for row, col in reversed(hits):  # right to left: earlier columns stay valid
        text = lines[row - 1]
        lines[row - 1] = text[:col] + new + text[col + len(old):]
    return "".join(lines)
