"""Read a published kernel's source out of an installed package, without importing the package.

The corpus copies no third-party code into this repository: every cell is assembled at test
time from the files that ``pip`` installed. Packages are located with ``find_spec`` of their
top-level name only, which does not execute them (FlagGems, for one, refuses to import on a
machine without a GPU), and the kernel is cut out of the file with ``ast`` (Python) or by
brace matching (CUDA C++), so what the cell holds is byte for byte what the package ships.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
from pathlib import Path

IMPORTS = "imports"  # in Entry.take: every top-level import of the module, in file order


class NotInstalled(LookupError):
    """The package that holds a corpus kernel is not installed here."""


def package_root(top: str) -> Path:
    """The folder of an installed top-level package (the package is not imported)."""
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        raise NotInstalled(top)
    return Path(next(iter(spec.submodule_search_locations)))


def module_file(module: str) -> Path:
    """The ``.py`` file of a dotted module name inside an installed package."""
    top, *rest = module.split(".")
    base = package_root(top).joinpath(*rest)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    raise NotInstalled(module)


def resource_file(path: str) -> Path:
    """A file shipped inside an installed package, e.g. a CUDA header: ``top/sub/file.h``."""
    top, _, rest = path.partition("/")
    found = package_root(top) / rest
    if not found.is_file():
        raise NotInstalled(path)
    return found


def version(dist: str) -> str:
    """The installed version of a distribution, or raise NotInstalled."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        raise NotInstalled(dist) from None


def _is_import_block(node: ast.stmt) -> bool:
    """An import, or an ``if``/``try`` whose branches only import (a libdevice fallback)."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        return True
    if isinstance(node, ast.If | ast.Try):
        inner = [*node.body, *node.orelse, *getattr(node, "finalbody", [])]
        for handler in getattr(node, "handlers", []):
            inner.extend(handler.body)
        return bool(inner) and all(_is_import_block(n) or isinstance(n, ast.Pass | ast.Expr)
                                   for n in inner)
    return False


def _defines(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Assign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def python_segments(path: Path, take: tuple[str, ...]) -> str:
    """The top-level statements of ``path`` that define the names in ``take``, verbatim.

    Statements keep their file order, decorators and comments inside them; ``"imports"`` in
    ``take`` selects every top-level import (and import-only ``if``/``try`` blocks); a later
    assignment that binds a taken name again comes with it.
    """
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text)
    wanted, taken, chunks = set(take), set(), []
    for node in tree.body:
        # a name taken is taken with every later statement that binds it again, as the module
        # runs them: unsloth's ``kernel = triton.jit(kernel)``, then ``triton.heuristics(...)``
        if ((IMPORTS in wanted and _is_import_block(node)) or _defines(node) & wanted
                or (isinstance(node, ast.Assign) and _defines(node) & taken)):
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
            chunks.append("\n".join(lines[first - 1:node.end_lineno]))
            taken |= _defines(node) & wanted
            wanted -= _defines(node)
    missing = sorted(wanted - {IMPORTS})
    if missing:
        raise LookupError(f"{path}: no top-level {', '.join(missing)}")
    return "\n\n\n".join(chunks)


_CUDA_DEF = (r"(?:template\s*<[^{;]*?>\s*)?(?:static\s+)?__global__\s+(?:void|\w+)\s+"
             r"(?:__launch_bounds__\s*\([^)]*\)\s*)?NAME\s*\(")


def cuda_function(path: Path, name: str) -> str:
    """The definition of ``name`` (with its ``template<...>`` line) from a CUDA source file: a
    ``__global__`` kernel, or a helper function the kernel calls."""
    text = path.read_text()
    m = re.search(_CUDA_DEF.replace("NAME", re.escape(name)), text)
    if m is None:  # e.g. "__global__ static\n__launch_bounds__(...)\nvoid\nNAME(", or a
        # helper "__device__ __forceinline__ int NAME(": the definition (with its template
        # line) starts after the previous blank line
        m = re.search(rf"^(?:[A-Za-z_][\w:<>*&]*[ \t]+)*{re.escape(name)}\s*\(", text,
                      flags=re.M)
        if m is None:
            raise LookupError(f"{path}: no function {name}")
        start = text.rfind("\n\n", 0, m.start()) + 2
    else:
        start = text.rfind("\n", 0, m.start()) + 1
    depth, i = 0, text.index("{", m.end())
    while True:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i + 1]
        i += 1


def cuda_segments(path: Path, take: tuple[str, ...]) -> str:
    """Several functions (or ``"imports"``: the file's ``#include`` lines) from a CUDA file."""
    chunks = []
    for name in take:
        if name == IMPORTS:
            chunks.append("\n".join(ln for ln in path.read_text().splitlines()
                                    if ln.startswith("#include")))
        else:
            chunks.append(cuda_function(path, name))
    return "\n\n".join(chunks)
