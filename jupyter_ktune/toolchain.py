"""Find the CUDA command-line tools on a machine without a GPU, and read their error messages.

Static analysis (ptxas resource usage, SASS instruction mix) needs only ``nvcc``/``ptxas`` and a
disassembler, and these often live in different places: a toolkit under ``/usr/local/cuda``, the
``nvidia-cuda-*`` PyPI wheels (``nvidia/cu13/bin`` for CUDA 13, ``nvidia/cuda_cuobjdump/bin`` and
friends for CUDA 12), or the copies Triton bundles in ``triton/backends/nvidia/bin``. This module
looks in all of them, in a fixed order, and says how to install a tool that is missing.

Examples
--------
>>> from jupyter_ktune.toolchain import find_tool, tool_version
>>> find_tool("cuobjdump")  # doctest: +SKIP
PosixPath('/venv/lib/python3.11/site-packages/nvidia/cu13/bin/cuobjdump')
>>> tool_version("nvcc")  # doctest: +SKIP
'13.0.88'
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from jupyter_ktune.errors import PREFIX, Diagnostic, KtuneError

Tool = Literal["nvcc", "ptxas", "cuobjdump", "nvdisasm", "cu++filt"]
TOOLS: tuple[str, ...] = get_args(Tool)

# Environment variables that name a toolkit root, in the order they are trusted.
_HOME_VARS = ("KTUNE_CUDA_HOME", "CUDA_HOME", "CUDA_PATH")
_DEFAULT_HOME = Path("/usr/local/cuda")

# What to install when a tool is missing. The CUDA 13 wheels put every tool in nvidia/cu13/bin.
_INSTALL_HINT = {
    "nvcc": "install the CUDA toolkit (https://developer.nvidia.com/cuda-downloads) or "
            "`pip install nvidia-cuda-nvcc`",
    "ptxas": "`pip install nvidia-cuda-nvcc` (or install the CUDA toolkit)",
    "cuobjdump": "`pip install nvidia-cuda-cuobjdump`",
    "nvdisasm": "`pip install nvidia-cuda-nvdisasm`",
    "cu++filt": "`pip install nvidia-cuda-cuxxfilt`",
}


class ToolNotFound(KtuneError, RuntimeError):
    """A CUDA tool is not on this machine; the message says where we looked and how to get it."""


def find_tool(name: Tool) -> Path:
    """Return the path of a CUDA tool, searching the usual install locations in order.

    The search order is ``$KTUNE_CUDA_HOME/bin``, ``$CUDA_HOME/bin``, ``$CUDA_PATH/bin``, ``PATH``,
    ``/usr/local/cuda/bin``, the ``nvidia-cuda-*`` wheels' ``bin`` folders, then Triton's bundled
    ``triton/backends/nvidia/bin``. ``KTUNE_CUDA_HOME`` comes first so a user can pin one toolkit
    when several are installed. The result is cached per environment, so changing the variables
    above (or ``PATH``) takes effect at once.

    Parameters
    ----------
    name
        One of ``"nvcc"``, ``"ptxas"``, ``"cuobjdump"``, ``"nvdisasm"``, ``"cu++filt"``.

    Returns
    -------
    Path
        An executable file.

    Raises
    ------
    ValueError
        ``name`` is not a known tool.
    ToolNotFound
        No candidate exists; the message lists the places searched and the install command.

    Examples
    --------
    >>> find_tool("nvcc")  # doctest: +SKIP
    PosixPath('/usr/local/bin/nvcc')
    """
    if name not in TOOLS:
        raise ValueError(f"{PREFIX} unknown tool {name!r}; expected one of {', '.join(TOOLS)}")
    env = tuple(os.environ.get(var, "") for var in (*_HOME_VARS, "PATH"))
    return _find_tool(name, env)


@functools.lru_cache(maxsize=64)
def _find_tool(name: str, env: tuple[str, ...]) -> Path:
    homes, path = env[:-1], env[-1]
    searched: list[str] = []
    for home in homes:
        if home:
            searched.append(f"{home}/bin")
            hit = _executable(Path(home) / "bin" / name)
            if hit:
                return hit
    searched.append("PATH")
    on_path = shutil.which(name, path=path or None)
    if on_path:
        return Path(on_path)
    for folder in (_DEFAULT_HOME / "bin", *_wheel_bin_dirs(), *_triton_bin_dirs()):
        searched.append(str(folder))
        hit = _executable(folder / name)
        if hit:
            return hit
    raise ToolNotFound(
        f"{PREFIX} {name} not found (searched {', '.join(searched)}). "
        f"Get it with {_INSTALL_HINT[name]}, or set KTUNE_CUDA_HOME to a CUDA toolkit folder."
    )


def _executable(path: Path) -> Path | None:
    return path if path.is_file() and os.access(path, os.X_OK) else None


def _wheel_bin_dirs() -> list[Path]:
    """Return ``bin`` folders of the ``nvidia`` namespace wheels, newest CUDA layout first.

    CUDA 13 wheels install into ``nvidia/cu13/bin``; CUDA 12 wheels use one folder per component
    (``nvidia/cuda_nvcc/bin``, ``nvidia/cuda_cuobjdump/bin``...). Sorting puts ``cu13`` before
    ``cu12`` and both before the per-component folders.
    """
    spec = _find_spec("nvidia")
    roots = list(spec.submodule_search_locations or []) if spec else []
    found = [Path(bin_dir) for root in roots for bin_dir in Path(root).glob("*/bin")]
    return sorted(set(found), key=lambda p: (not p.parent.name.startswith("cu1"),
                                             _negated_digits(p.parent.name), p.parent.name))


def _negated_digits(text: str) -> int:
    digits = re.sub(r"\D", "", text)
    return -int(digits) if digits else 0


def _triton_bin_dirs() -> list[Path]:
    spec = _find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        return []
    return [Path(root) / "backends" / "nvidia" / "bin" for root in spec.submodule_search_locations]


def _find_spec(module: str) -> importlib.machinery.ModuleSpec | None:
    # find_spec on a top-level name locates the package without importing it (no triton start-up).
    try:
        return importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None


def tool_version(name: Tool) -> str:
    """Return a tool's version, such as ``"13.0.88"``, from its ``--version`` output.

    Static reports record it because register counts and SASS change between ptxas releases, so
    two reports are only comparable when the toolchain is the same. Cached per tool path.

    Parameters
    ----------
    name
        A tool accepted by :func:`find_tool`.

    Returns
    -------
    str
        The ``V``-number (``"13.0.88"``) when the tool prints one, else its last output line.

    Raises
    ------
    ToolNotFound
        The tool is missing.
    RuntimeError
        The tool did not run.
    """
    return _version_of(find_tool(name))


@functools.lru_cache(maxsize=16)
def _version_of(path: Path) -> str:
    try:
        proc = subprocess.run([str(path), "--version"], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"{PREFIX} could not run {path} --version: {exc}") from exc
    text = proc.stdout + proc.stderr
    match = re.search(r"\bV(\d+(?:\.\d+)+)", text)
    if match:
        return match.group(1)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{PREFIX} {path} --version failed (exit {proc.returncode}): {text}")
    return lines[-1]


# ---------------------------------------------------------------------------------------------
# Reading the tools' messages. nvcc output mixes three formats: the EDG front end
# (``file(LINE): error: msg``), the host compiler (gcc ``file:LINE:COL: error: msg``, e.g. for a
# missing #include) and ptxas (``ptxas file.ptx, line N; error   : msg``).

@dataclass(frozen=True)
class CompilerDiagnostic:
    """One nvcc, host-compiler or ptxas message: where, how bad, and what.

    ``severity`` is ``"error"`` (also for ``fatal``/``catastrophic``), ``"warning"`` or
    ``"remark"`` (also for gcc ``note``). ``code`` is the EDG number such as ``"177-D"``.
    ``line`` is the file's own line, i.e. the cell line when the source starts with a
    ``#line`` directive; ptxas messages point into the temporary ``.ptx`` file instead.
    """

    file: str | None
    line: int | None
    severity: str
    message: str
    column: int | None = None
    code: str | None = None

    def to_cell(self, line_offset: int = 0) -> Diagnostic:
        """Return the package-wide :class:`~jupyter_ktune.errors.Diagnostic`, lines shifted."""
        line = None if self.line is None else self.line + line_offset
        return Diagnostic(line=line, severity=self.severity, message=self.message,
                          column=self.column)


_EDG = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<sev>catastrophic error|fatal error|error|"
                  r"warning|remark)(?: #(?P<code>[\w-]+))?: (?P<msg>.*)$")
_GCC = re.compile(r"^(?P<file>[^:\s][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>fatal error|"
                  r"error|warning|note): (?P<msg>.*)$")
_PTXAS = re.compile(r"^ptxas (?:(?P<file>\S+), line (?P<line>\d+); )?(?P<sev>fatal|error|warning)"
                    r"\s*: (?P<msg>.*)$")
_SEVERITY = {"catastrophic error": "error", "fatal error": "error", "fatal": "error",
             "note": "remark"}


def parse_diagnostics(log: str) -> list[CompilerDiagnostic]:
    """Parse nvcc front-end (``file(LINE): error: msg``), gcc and ptxas messages.

    The EDG front end echoes the source line and puts a caret under the column; that caret gives
    ``column``. Indented follow-up lines such as ``detected during instantiation of ...`` are
    appended to the message.

    Examples
    --------
    >>> d = parse_diagnostics('cell(4): error: identifier "x" is undefined')[0]
    >>> d.file, d.line, d.severity, d.message
    ('cell', 4, 'error', 'identifier "x" is undefined')
    """
    out: list[CompilerDiagnostic] = []
    lines = log.splitlines()
    for i, line in enumerate(lines):
        for pattern in (_EDG, _PTXAS, _GCC):
            if m := pattern.match(line):
                break
        else:
            continue
        fields = m.groupdict()
        message, column = fields["msg"].strip(), _int(fields.get("col"))
        if pattern is _EDG:
            message, column = _edg_tail(lines[i + 1:], message)
        out.append(CompilerDiagnostic(
            file=fields["file"], line=_int(fields["line"]),
            severity=_SEVERITY.get(fields["sev"], fields["sev"]), message=message,
            column=column, code=fields.get("code")))
    return out


def _edg_tail(following: list[str], message: str) -> tuple[str, int | None]:
    block: list[str] = []
    for line in following:
        if not line.strip() or _EDG.match(line):
            break
        block.append(line)
    caret = next((k for k, line in enumerate(block) if line.strip() == "^"), None)
    extra = [line.strip() for k, line in enumerate(block)
             if caret is None or k not in (caret, caret - 1)]
    # EDG echoes the source line indented by two spaces: caret index - 1 is the 1-based column.
    column = block[caret].index("^") - 1 if caret is not None else None
    return " ".join([message, *extra]), column


def _int(text: str | None) -> int | None:
    return int(text) if text else None
