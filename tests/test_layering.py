"""The package's layering, read from its own imports (issue 14).

Every module of ``jupyter_ktune`` is parsed with ``ast``; every import counts, including those
inside functions (an import moved into a function to dodge a circle is still a circle). The
cycle rules count imports under ``if TYPE_CHECKING:`` too (a type named back is still a
dependency back, issue 37); the other rules read what runs.

The rules:

* ``measure/`` is what every backend shares; it imports no backend.
* no private name (``_x``) of one module is imported or reached (``mod._x``) from another;
* no import cycle between modules, nor between packages (``jupyter_ktune.<first component>``:
  a subpackage, or a top-level module standing for itself);
* no module over 400 lines.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "jupyter_ktune"
MAX_LINES = 400


@dataclass
class Module:
    """One module: where it is, what it imports, which private names of others it uses."""

    name: str
    path: Path
    lines: int
    imports: dict[str, int] = field(default_factory=dict)  # target module -> first line
    private: list[tuple[int, str]] = field(default_factory=list)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _runtime_nodes(tree: ast.AST, type_checking: bool = False):
    """All nodes except those under ``if TYPE_CHECKING:`` (its ``else`` branch runs), or all
    nodes with ``type_checking``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node) and not type_checking:
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def scan(root: Path = PACKAGE, type_checking: bool = False) -> dict[str, Module]:
    """Parse every module under ``root`` into its imports and cross-module private uses; with
    ``type_checking``, the imports under ``if TYPE_CHECKING:`` as well."""
    paths = sorted(root.rglob("*.py"))
    names = {module_name(p, root): p for p in paths}
    mods: dict[str, Module] = {}
    for name, path in names.items():
        text = path.read_text()
        mod = Module(name, path, len(text.splitlines()))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        bound: dict[str, str] = {}  # local name -> module it is bound to

        def add(target: str, line: int, mod: Module = mod) -> None:
            while target and target not in names:  # an object of a module: the module
                target = target.rpartition(".")[0]
            if target and target != mod.name:
                mod.imports.setdefault(target, line)

        for node in _runtime_nodes(ast.parse(text), type_checking):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == root.name:
                        add(a.name, node.lineno)
                        bound[a.asname or a.name] = a.name
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                if base.split(".")[0] != root.name:
                    continue
                for a in node.names:
                    full = f"{base}.{a.name}"
                    if full in names:
                        add(full, node.lineno)
                        bound[a.asname or a.name] = full
                        continue
                    add(base, node.lineno)
                    if _private(a.name) and base != name:
                        mod.private.append((node.lineno, f"from {base} import {a.name}"))
        for node in _runtime_nodes(ast.parse(text)):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in bound and _private(node.attr)
                    and bound[node.value.id] != name):
                mod.private.append((node.lineno, f"{bound[node.value.id]}.{node.attr}"))
        mods[name] = mod
    return mods


def cycles(mods: dict[str, Module]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in mods[v].imports:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(mods):
        if v not in index:
            visit(v)
    return out


def _where(mod: Module, line: int) -> str:
    return f"{mod.path.relative_to(PACKAGE.parent)}:{line}"


@pytest.fixture(scope="module")
def mods() -> dict[str, Module]:
    return scan()


@pytest.fixture(scope="module")
def typed() -> dict[str, Module]:
    """Every import, those for the type checker included: what the cycle rules read."""
    return scan(type_checking=True)


def test_the_scan_sees_the_package(mods) -> None:
    # guards the checker itself: a scan that found nothing would pass every rule below
    assert "jupyter_ktune.measure.timing" in mods and "jupyter_ktune.backends.base" in mods
    assert "jupyter_ktune.measure.timing" in mods["jupyter_ktune.runner.timed"].imports
    # an import inside a function counts (runner.worker imports execute in _handle)
    assert "jupyter_ktune.runner.execute" in mods["jupyter_ktune.runner.worker"].imports


def test_measure_imports_no_backend(mods) -> None:
    bad = [f"{_where(m, line)}: {m.name} imports {t}" for m in mods.values()
           if m.name.startswith("jupyter_ktune.measure")
           for t, line in m.imports.items() if t.startswith("jupyter_ktune.backends")]
    assert not bad, "measure/ is shared by every backend; move this code into the backend:\n" \
        + "\n".join(bad)


#: Runtimes one backend owns. ``torch`` is not among them: the on-device output checks
#: (``verify_device``, ``integrity``) compare torch tensors for every backend that hands them.
BACKEND_RUNTIMES = frozenset({"cupy", "cuda", "triton", "jax", "jaxlib"})


def test_measure_runs_no_backends_compiler_or_runtime(mods) -> None:
    # nvcc (the CUDA C++ static report) and CuPy (the ceilings' probe) are backends' own
    bad = []
    for m in mods.values():
        if not m.name.startswith("jupyter_ktune.measure"):
            continue
        for node in _runtime_nodes(ast.parse(m.path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                     else [])
            bad += [f"{_where(m, node.lineno)}: imports {n}" for n in names
                    if n.split(".")[0] in BACKEND_RUNTIMES]
            if isinstance(node, ast.Constant) and node.value == "nvcc":
                bad.append(f"{_where(m, node.lineno)}: runs nvcc")
    assert not bad, "measure/ is shared by every backend; move this into the backend:\n" \
        + "\n".join(bad)


#: The built-in backends: the packages under backends/ with a backend.py.
BUILT_IN = frozenset(p.name for p in (PACKAGE / "backends").iterdir()
                     if (p / "backend.py").is_file())
#: Where a built-in backend's word is another thing's name, so it stays. Each is a Python
#: module's or a user-chosen format's name, not a question about a cell's backend:
NOT_A_BACKEND = {
    # the pip table is keyed by import name (the module triton, which the Triton backend
    # imports), and the backends import this table, so it cannot ask them
    ("jupyter_ktune/requirements.py", "triton"),
    # the folder of the triton package, where its bundled ptxas and cuobjdump live
    ("jupyter_ktune/toolchain.py", "triton"),
    # the module name in ``triton.cdiv(n, BLOCK)`` that grid expressions accept
    ("jupyter_ktune/expr.py", "triton"),
    # export format names a user picks (report.export("triton"): a @triton.autotune list,
    # "pallas": a block-size table); the exporters read TuneReports, so they live in tuning/,
    # which backends/ may not import. Which one a backend writes by default is its own fact
    # (BackendBase.export_formats), never chosen here by its name
    ("jupyter_ktune/tuning/export.py", "triton"),
    ("jupyter_ktune/tuning/export.py", "pallas"),
}


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, kinds) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def test_no_code_outside_backends_names_a_builtin_backend(mods) -> None:
    # a new backend changes a default on BackendBase in its own class; code that asks
    # `backend == "cuda"` would need an edit for it (issue 37)
    assert BUILT_IN == {"cuda", "pallas", "triton"}  # the scan sees the backends
    bad, used = [], set()
    for m in mods.values():
        if m.name.startswith("jupyter_ktune.backends"):
            continue
        tree = ast.parse(m.path.read_text())
        docs = _docstrings(tree)
        rel = str(m.path.relative_to(PACKAGE.parent))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and node.value in BUILT_IN
                    and id(node) not in docs):
                if (rel, node.value) in NOT_A_BACKEND:
                    used.add((rel, node.value))
                else:
                    bad.append(f"{_where(m, node.lineno)}: {node.value!r}")
    assert not bad, "ask the backend's facts (backends/base.py BackendBase):\n" + "\n".join(bad)
    assert used == NOT_A_BACKEND, f"no longer needed: {NOT_A_BACKEND - used}"


def test_no_private_name_crosses_a_module(mods) -> None:
    bad = [f"{_where(m, line)}: {what}" for m in mods.values() for line, what in m.private]
    assert not bad, "make the name public or move the code:\n" + "\n".join(bad)


def test_no_import_cycle(typed) -> None:
    # render <-> results was a circle through a TYPE_CHECKING import alone
    assert "jupyter_ktune.spec" in typed["jupyter_ktune.backends.base"].imports  # seen
    found = cycles(typed)
    detail = []
    for group in found:
        for v in group:
            detail += [f"  {_where(typed[v], line)}: {v} -> {t}"
                       for t, line in typed[v].imports.items() if t in group]
    assert not found, "import cycles:\n" + "\n".join(detail)


def package_of(name: str) -> str:
    """``jupyter_ktune.backends.cuda.launch`` -> ``jupyter_ktune.backends``; a top-level module
    (``jupyter_ktune.spec``) and the package itself are their own node."""
    return ".".join(name.split(".")[:2])


def packages(mods: dict[str, Module]) -> tuple[dict[str, Module], dict[tuple[str, str], str]]:
    """The import graph of packages, and one module-level import behind each of its edges."""
    out: dict[str, Module] = {}
    why: dict[tuple[str, str], str] = {}
    for m in mods.values():
        p = package_of(m.name)
        node = out.setdefault(p, Module(p, m.path, 0))
        for t, line in m.imports.items():
            q = package_of(t)
            if q != p:
                node.imports.setdefault(q, line)
                why.setdefault((p, q), f"{_where(m, line)}: {m.name} -> {t}")
    return out, why


def test_no_package_cycle(typed) -> None:
    # a circle between packages (spec <-> backends: the model calling its plug-ins) layers
    # nothing even when each module-level edge is acyclic
    graph, why = packages(typed)
    assert "jupyter_ktune.backends" in graph["jupyter_ktune.runner"].imports  # the scan sees
    found = cycles(graph)
    detail = [f"  {why[a, b]}" for group in found for a in group for b in group
              if (a, b) in why]
    assert not found, "package import cycles:\n" + "\n".join(detail)


def test_no_module_over_400_lines(mods) -> None:
    big = [f"{m.path.relative_to(PACKAGE.parent)}: {m.lines} lines" for m in mods.values()
           if m.lines > MAX_LINES]
    assert not big, "split by concept:\n" + "\n".join(big)
