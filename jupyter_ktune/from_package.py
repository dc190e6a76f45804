"""``%%kernel --from package.module:kernel``: a kernel's source read from an installed package.

Kernel engineers tune the kernels their models already use. The package is located with
``find_spec`` of its top-level name, which does not execute it (FlagGems refuses to import on a
machine without a GPU), and the kernel is cut out of its module file with ``ast``: the kernel
with its decorators, and, transitively, every top-level statement that defines a name it (or
what it needs) uses: helpers, config lists, constants and the imports that bind them. Nothing
else of the module is taken, so unrelated module code (autograd classes, launchers) never runs.
The text is byte for byte what the package ships; the export names the distribution and its
version.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jupyter_ktune.errors import CellError

_FIX = ("Write --from package.module:kernel, e.g. "
        "liger_kernel.ops.rms_norm:_rms_norm_forward_kernel.")


def module_file(module: str) -> Path:
    """The ``.py`` file of a dotted module name, found without importing the package."""
    top, *rest = module.split(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise CellError(f"--from: no installed package '{top}'", line=1,
                        fix=f"pip install the package that provides {top}, or check the name.")
    roots = list(spec.submodule_search_locations or [])
    if not roots:  # a single-file module
        if rest:
            raise CellError(f"--from: '{top}' is a module, not a package", line=1, fix=_FIX)
        if spec.has_location and spec.origin and spec.origin.endswith(".py") \
                and Path(spec.origin).is_file():
            return Path(spec.origin)
        # os is frozen, sys built in, a C extension is a .so: no text to read (issue 34:
        # --from os:system gave FileNotFoundError: 'frozen')
        kind = spec.origin if spec.origin in ("frozen", "built-in") else "compiled"
        raise CellError(f"--from: '{top}' is a {kind} module, with no Python source to read",
                        line=1, fix="Name a kernel defined in a package's .py file. " + _FIX)
    base = Path(roots[0]).joinpath(*rest)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    raise CellError(f"--from: package '{top}' has no module '{module}'", line=1, fix=_FIX)


def distribution(module: str) -> str:
    """``liger-kernel 0.8.5`` for a module of an installed distribution ('' when unknown).

    Only the distributions installed beside the module are read, and of each only its
    ``top_level.txt`` or ``RECORD`` until one names the module's package: the standard
    library's ``packages_distributions()`` parses every installed distribution's metadata,
    0.7 s per ``--from`` cell on a 2-core machine with the test extras (the parse of fla's
    matmul cell took 0.78 s in a notebook whose backend was open, on the H200:
    eec153a:bench/results/first_minute/2026-12-06-0056)."""
    top = module.split(".")[0]
    dist = installed_beside(top)
    if dist is not None:
        return f"{dist.metadata['Name']} {dist.version}"
    # elsewhere (an editable install's source tree): every distribution, as the library reads
    for name in importlib.metadata.packages_distributions().get(top, []):
        try:
            meta = importlib.metadata.metadata(name)
            return f"{meta['Name']} {meta['Version']}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return ""


def installed_beside(top: str, spec: Any = None) -> importlib.metadata.Distribution | None:
    """The distribution whose dist-info, beside top-level package (or module) ``top``, names it
    (None for one not installed there): a lookup of milliseconds, where the standard library's
    ``packages_distributions()`` reads every installed distribution. ``spec``: ``top``'s
    module spec where the caller has it (an import finder must not ask the finders again)."""
    if spec is None:
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            return None
    places = list(spec.submodule_search_locations or []) if spec is not None else []
    if spec is not None and spec.origin and not places:
        places = [spec.origin]
    for site in dict.fromkeys(str(Path(p).parent) for p in places):
        for dist in importlib.metadata.distributions(path=[site]):
            if _names_package(dist, top):
                return dist
    return None


def _names_package(dist: importlib.metadata.Distribution, top: str) -> bool:
    """Whether ``dist`` installs package (or module) ``top``: its ``top_level.txt``, else a
    file of its ``RECORD`` under ``top/`` or named ``top.py``."""
    listed = dist.read_text("top_level.txt")
    if listed is not None:
        return top in listed.split()
    record = dist.read_text("RECORD") or ""
    return any(line.startswith((f"{top}/", f"{top}.py,")) for line in record.splitlines())


def _defines(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, ast.If | ast.Try):  # import fallbacks: if/try blocks that bind names
        inner = [*node.body, *node.orelse, *getattr(node, "finalbody", [])]
        for handler in getattr(node, "handlers", []):
            inner.extend(handler.body)
        return set().union(*(_defines(n) for n in inner)) if inner else set()
    return set()


def _uses(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def segments(text: str, kernel: str) -> str:
    """The statements of module ``text`` that ``kernel`` needs, in file order, verbatim."""
    return segments_with_lines(text, kernel)[0]


def segments_with_lines(text: str, kernel: str) -> tuple[str, list[int | None]]:
    """:func:`segments`, and for each of its lines the module file's line (None between
    statements), so the read-only view can say where each line lives in the package."""
    tree = ast.parse(text)
    lines = text.splitlines()
    top = [n for n in tree.body if not (isinstance(n, ast.Expr) and n is tree.body[0])]
    wanted: set[str] = {kernel}
    chosen: set[int] = set()
    changed = True
    while changed:
        changed = False
        for i, node in enumerate(top):
            if i not in chosen and _defines(node) & wanted:
                chosen.add(i)
                wanted |= _uses(node)
                changed = True
    if not any(kernel in _defines(top[i]) for i in chosen):
        raise LookupError(kernel)
    chunks: list[str] = []
    where: list[int | None] = []
    for i in sorted(chosen):
        node = top[i]
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        if chunks:
            where.extend([None, None])  # the two blank lines "\n\n\n" puts between chunks
        chunks.append("\n".join(lines[first - 1:node.end_lineno]))
        where.extend(range(first, node.end_lineno + 1))
    return "\n\n\n".join(chunks) + "\n", where


def line_map(ref: str) -> tuple[Path, list[int | None]]:
    """The module file of ``--from ref`` and, per line of the source it gives, the file's line."""
    module, _, kernel = ref.partition(":")
    path = module_file(module)
    return path, segments_with_lines(path.read_text(), kernel)[1]


def read_kernel(ref: str, backend: str, backends: Mapping[str, Any]) -> tuple[str, str, str]:
    """(source, origin, kernel name) for ``--from module:kernel``; CellErrors name line 1.

    ``backends``: the registry's backends by name (``spec.CellSyntax``), asked whether their
    cells are Python (``python_cells``); the others only when the error names those that are."""
    module, sep, kernel = ref.partition(":")
    if not sep or not module or not kernel.isidentifier():
        raise CellError(f"--from {ref}: expected module:kernel", line=1, fix=_FIX)
    if not backends[backend].python_cells:
        python = " or ".join(f"--backend {n}" for n in backends if backends[n].python_cells)
        raise CellError(f"--from reads Python modules; --backend {backend} cells are C++",
                        line=1, fix=f"Use --from with {python}.")
    path = module_file(module)
    try:
        source = segments(path.read_text(encoding="utf-8"), kernel)
    except LookupError:
        raise CellError(f"--from: {module} ({path}) has no top-level '{kernel}'", line=1,
                        fix=f"Check the kernel's name in {path.name}.") from None
    except SyntaxError as exc:
        raise CellError(f"--from: {path} does not parse ({exc.msg})", line=1,
                        fix="Install a version of the package for this Python.") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CellError(f"--from: cannot read {path} ({type(exc).__name__})", line=1,
                        fix="Check that the package is installed completely.") from None
    dist = distribution(module)
    origin = f"{ref} ({dist})" if dist else ref
    return source, origin, kernel
