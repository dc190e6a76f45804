"""Include folders of a CUDA C++ cell, and the headers that CUDA libraries ship in wheels.

A cell names its folders with ``// ktune: include DIR`` (or ``--include DIR`` on the magic
line). ``DIR`` is a path, or ``package:folder`` inside an installed package, found without
importing it: ``// ktune: include cutlass_library:source/include`` is CUTLASS from the
``nvidia-cutlass`` wheel. When nvcc cannot open a header, :func:`header_hint` looks for it in the
include folders of the NVIDIA wheels that are installed and names the directive that finds it.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from jupyter_ktune.errors import CellError
from jupyter_ktune.spec import KernelSpec

#: Include folders inside installed wheels, as ``package:folder``: CUTLASS and its tools/util
#: (``nvidia-cutlass``), CUB/Thrust/libcu++ (``nvidia-cuda-cccl``).
WHEEL_INCLUDES = ("cutlass_library:source/include", "cutlass_library:source/tools/util/include",
                  "nvidia:cu13/include/cccl", "nvidia:cu12/include/cccl")

_MISSING = re.compile(r'cannot open source file "(?P<h>[^"]+)"|'
                      r"(?P<g>[\w./+-]+\.(?:h|hpp|cuh|hxx|inl)): No such file or directory")


def package_folders(package: str) -> list[Path]:
    """The folders of an installed top-level package (several for a namespace package such as
    ``nvidia``), found without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return [Path(p) for p in spec.submodule_search_locations]
    return [Path(spec.origin).parent] if spec.origin else []


def resolve(entry: str) -> Path | None:
    """``DIR`` or ``package:folder`` as an existing folder, or None."""
    package, sep, folder = entry.partition(":")
    if sep and re.fullmatch(r"[A-Za-z_]\w*", package):  # not a Windows drive or a URL
        candidates = [root / folder for root in package_folders(package)]
    else:
        candidates = [Path(entry).expanduser()]
    return next((p for p in candidates if p.is_dir()), None)


def include_dirs(spec: KernelSpec) -> list[Path]:
    """The cell's include folders; one that does not exist is an error on its line."""
    out = []
    for entry, line in spec.includes:
        path = resolve(entry)
        if path is None:
            raise CellError(f"include folder '{entry}' does not exist", line=line,
                            fix="Give an existing folder, or package:folder of an installed "
                            "package, e.g. // ktune: include cutlass_library:source/include")
        out.append(path)
    return out


def header_hint(message: str) -> str:
    """For nvcc's "cannot open source file" message, the directive that would find the header."""
    m = _MISSING.search(message)
    if m is None:
        return ""
    header = m.group("h") or m.group("g")
    for entry in WHEEL_INCLUDES:
        folder = resolve(entry)
        if folder is not None and (folder / header).is_file():
            return f"Add: // ktune: include {entry}  (it holds {header})"
    return f"Add the folder that holds {header}: // ktune: include DIR  (or --include DIR)"
