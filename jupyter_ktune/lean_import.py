"""Import a kernel's package without running its packages' ``__init__`` files first.

A cell holding a package's kernel (pasted, or cut out with ``--from``,
:mod:`jupyter_ktune.from_package`) imports what it uses from the package's modules
(``from fla.ops.utils.op import exp``), and Python runs every ``__init__.py`` above the module
named: ``fla/ops/__init__.py`` imports all of fla's ops, ``liger_kernel/ops/__init__.py`` all
of Liger's. On an H100 the cell's module took 7.5-10.1 s to import in the worker after torch
and Triton were in (``97a80e6:bench/results/corpus_vs_autotune/2026-12-05-1801``), most of the
first result, and every compile-pool process paid it again before its first compile.

Inside :func:`lean`, a package of the named top-level packages is created without executing
its ``__init__.py``; its modules import as usual. The package's ``__init__`` runs the first
time anything asks it for a name it does not have (a module ``__getattr__``, PEP 562), so
``from fla.ops import chunk_gla`` still works, later, at the cost it always had; a submodule
asked for by attribute is imported alone. A package's ``__init__`` side effects that the
kernel relies on without naming anything of it are the one thing this can miss: such a cell
fails or verifies wrong, and ``KTUNE_LEAN_IMPORT=0`` turns the lean import off.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

LEAN_ENV = "KTUNE_LEAN_IMPORT"  # "0": run every package's __init__ as Python does
_lock = threading.RLock()
_packages: dict[str, int] = {}  # top-level package name -> how many lean() hold it


def enabled() -> bool:
    return os.environ.get(LEAN_ENV, "1") != "0"


class _DeferredInit(importlib.abc.Loader):
    """Creates a package module whose ``__init__.py`` runs on the first name it lacks."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, get_source, get_data...
        return getattr(self.real, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None  # the default module

    def exec_module(self, module: types.ModuleType) -> None:
        lock = threading.RLock()
        real = self.real

        def __getattr__(name: str) -> Any:  # noqa: N807 - PEP 562's module hook
            if name in _PROBES:
                raise AttributeError(name)  # tooling's questions (inspect, typing), not the API
            sub = f"{module.__name__}.{name}"
            if is_lean(module) and importlib.util.find_spec(sub) is not None:
                return importlib.import_module(sub)
            with lock:
                if is_lean(module):
                    module.__ktune_lean__ = False  # type: ignore[attr-defined]
                    module.__dict__.pop("__getattr__", None)
                    real.exec_module(module)  # the package's own __init__, now
            try:
                return module.__dict__[name]
            except KeyError:
                hook = module.__dict__.get("__getattr__")
                if hook is not None and hook is not __getattr__:
                    return hook(name)
                raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}") \
                    from None

        module.__getattr__ = __getattr__  # type: ignore[attr-defined]
        module.__ktune_lean__ = True  # type: ignore[attr-defined]


class _LeanFinder(importlib.abc.MetaPathFinder):
    """Finds the packages of the held top-level names and defers their ``__init__``."""

    def find_spec(self, fullname: str, path: Any = None,
                  target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".", 1)[0] not in _packages:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.submodule_search_locations is None \
                or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return None  # a module, a namespace package or a compiled one: as Python does
        spec.loader = _DeferredInit(spec.loader)
        return spec


_finder = _LeanFinder()
#: names a package is asked for by tools (inspect, typing, doctest) rather than by code using it
_PROBES = frozenset({"__wrapped__", "__signature__", "__test__", "__mro_entries__", "__code__",
                     "__func__", "__self__", "__qualname__", "__origin__", "__loader__"})


@contextlib.contextmanager
def lean(*packages: str) -> Iterator[None]:
    """Inside, the packages of the top-level names ``packages`` (``"fla"``) that are not yet
    imported are created without running their ``__init__``. Off with ``KTUNE_LEAN_IMPORT=0``."""
    names = [p for p in packages if p] if enabled() else []
    if not names:
        yield
        return
    with _lock:
        for p in names:
            _packages[p] = _packages.get(p, 0) + 1
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
    try:
        yield
    finally:
        with _lock:
            for p in names:
                _packages[p] -= 1
                if not _packages[p]:
                    del _packages[p]
            if not _packages and _finder in sys.meta_path:
                sys.meta_path.remove(_finder)


def forget(package: str) -> None:
    """Drop every module of ``package`` from ``sys.modules``, to import it again as Python does
    after a lean import failed."""
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[name]


def is_lean(module: Any) -> bool:
    """Whether ``module`` is a package created here whose ``__init__`` has not run yet."""
    return bool(getattr(module, "__dict__", {}).get("__ktune_lean__"))


#: packages whose ``__init__`` is the package (a C library loaded, a config set up): never
#: deferred, whatever a cell imports of them; nor is the backend's compiler (``never``)
FOUNDATIONS = frozenset({
    "torch", "numpy", "jax", "jaxlib", "cupy", "cupyx", "scipy", "tensorflow", "numba",
    "cutlass", "jupyter_ktune", "IPython", "einops", "packaging"})


def cell_packages(source: str, origin: str = "", never: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The top-level packages a cell's module may import leanly: those of whose submodules it
    imports one (``from fla.ops.utils.op import exp``: ``fla``), and a ``--from`` cell's own
    (``origin``), less :data:`FOUNDATIONS` and the top-level packages of the modules ``never``
    (the backend's compiler modules). A package imported whole (``import fla``) is
    asked for by name, so deferring its ``__init__`` would gain nothing."""
    import ast

    names = {origin.split(":", 1)[0].split(".", 1)[0].strip()} if origin else set()
    never = FOUNDATIONS | {m.split(".", 1)[0] for m in never}
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return tuple(sorted(n for n in names if n and n not in never))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level \
                and "." in node.module:
            names.add(node.module.split(".", 1)[0])
        elif isinstance(node, ast.Import):
            names.update(a.name.split(".", 1)[0] for a in node.names if "." in a.name)
    return tuple(sorted(n for n in names if n and n not in never))


def load_leanly(load: Callable[[], Any], packages: tuple[str, ...]) -> Any:
    """``load()`` (a cell's module) with the ``__init__`` files of ``packages`` deferred
    (:func:`lean`); where that raises and a package's modules were created lean, those
    packages are forgotten and ``load()`` runs again as Python imports, so a package whose
    modules need its ``__init__`` run first costs one more import, not the cell."""
    if not packages or not enabled():
        return load()
    try:
        with lean(*packages):
            return load()
    except Exception:
        tried = [p for p in packages if any(
            is_lean(m) for n, m in list(sys.modules.items()) if n == p or n.startswith(p + "."))]
        if not tried:
            raise
        for p in tried:
            forget(p)
        return load()
