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

Inside :func:`lean` too, a top-level package that a module of those packages imports and that
their distribution does not require (an optional dependency, imported on the chance it is
installed: ``liger_kernel/utils.py`` runs ``try: import peft``, and peft imports transformers,
8.7 s of liger's first result on an H100 host, bench/results/corpus_vs_autotune/2026-12-06-0557)
is found, so the ``try`` succeeds as it would, but imported only when something reads a name of
it: the importing module gets a stand-in (:class:`_Pending`) that imports the package then, as
Python does, and hands every name on to it. Not :class:`importlib.util.LazyLoader`: that one
runs the package's ``__init__`` into the module object it handed out and fails where the
``__init__`` puts another object in ``sys.modules`` (transformers does, for its own lazy
attributes); the stand-in forwards to whatever the import left there. The standard library and
:data:`FOUNDATIONS` are never deferred, nor the names in ``$KTUNE_EAGER_IMPORTS``.
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


class _OptionalFinder(importlib.abc.MetaPathFinder):
    """Defers a top-level package that a module of a held package imports and the held
    package's distribution does not require (see the module's docstring)."""

    def find_spec(self, fullname: str, path: Any = None,
                  target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if path is not None or "." in fullname or fullname in sys.modules \
                or fullname in sys.stdlib_module_names or fullname in FOUNDATIONS \
                or fullname in _packages or fullname in _kept or fullname in _loading:
            return None
        importer = _importer().split(".", 1)[0]
        if importer not in _packages:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname)
        if spec is None or _required_by(importer, fullname, spec):
            return None
        _deferred.add(fullname)
        return importlib.machinery.ModuleSpec(fullname, _PendingLoader(), origin=spec.origin)


class _PendingLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        pending = _Pending(spec.name)
        pending.__dict__["__ktune_lock__"] = threading.RLock()  # one import per stand-in
        return pending

    def exec_module(self, module: types.ModuleType) -> None:
        module.__dict__["__ktune_armed__"] = True  # the import machinery is done with it


#: names a stand-in answers itself: the ones the import machinery and ``repr`` read
_OWN = frozenset({"__name__", "__spec__", "__loader__", "__package__", "__file__",
                  "__cached__", "__dict__", "__class__", "__repr__", "__ktune_armed__",
                  "__ktune_real__", "__ktune_lock__"})


class _Pending(types.ModuleType):
    """A deferred package: the first name read of it (``__path__`` and ``__version__`` too)
    imports the package as Python does, and from then on every name comes from what that import
    left in ``sys.modules``."""

    def __getattribute__(self, name: str) -> Any:
        own = object.__getattribute__(self, "__dict__")
        if name in _OWN or not own.get("__ktune_armed__"):
            return object.__getattribute__(self, name)
        return getattr(_real(self), name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OWN or not self.__dict__.get("__ktune_armed__"):
            object.__setattr__(self, name, value)
        else:
            setattr(_real(self), name, value)

    def __delattr__(self, name: str) -> None:
        delattr(_real(self), name)

    def __dir__(self) -> list[str]:
        return dir(_real(self))


def _real(pending: _Pending) -> types.ModuleType:
    """Import the package ``pending`` stands for (once; the stand-in leaves ``sys.modules``)."""
    own = object.__getattribute__(pending, "__dict__")
    with own["__ktune_lock__"]:  # its own lock: a package importing another's holds no other
        real = own.get("__ktune_real__")
        if real is None:
            name = own["__name__"]
            if sys.modules.get(name) is pending:
                del sys.modules[name]
            _loading.add(name)
            try:
                real = importlib.import_module(name)
            finally:
                _loading.discard(name)
            own["__ktune_real__"] = real
    return real


def _importer() -> str:
    """The ``__name__`` of the module whose code runs the import being looked up: the first
    frame outside the import machinery and this module."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name != __name__ and name.split(".", 1)[0] not in ("importlib", "_frozen_importlib",
                                                               "_frozen_importlib_external"):
            return name
        frame = frame.f_back
    return ""


_requires: dict[str, frozenset[str]] = {}  # held top-level package -> its required dist names


def _required_by(package: str, name: str, spec: importlib.machinery.ModuleSpec) -> bool:
    """Whether the distribution of ``package`` requires, with no extra, the distribution that
    installs ``name`` (where either is unknown: yes, and ``name`` imports as Python does)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    from jupyter_ktune.from_package import installed_beside

    if package not in _requires:
        dist = installed_beside(package)
        needed = {"*"} if dist is None else set()
        for line in (dist.requires or ()) if dist is not None else ():
            try:
                req = Requirement(line)
            except InvalidRequirement:
                needed.add("*")  # unreadable metadata: defer nothing of this package
                continue
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                needed.add(canonicalize_name(req.name))
        _requires[package] = frozenset(needed)
    needed = _requires[package]
    if "*" in needed:
        return True
    dist = installed_beside(name, spec)
    return dist is None or canonicalize_name(dist.metadata["Name"] or "") in needed


def deferred() -> dict[str, bool]:
    """The optional packages deferred so far, each with whether it has been imported since."""
    return {n: not isinstance(sys.modules.get(n), _Pending)
            for n in sorted(_deferred) if n in sys.modules}


_finder = _LeanFinder()
_optional = _OptionalFinder()
_deferred: set[str] = set()
_loading: set[str] = set()  # deferred packages being imported for real (not deferred again)
#: top-level names never deferred: ``KTUNE_EAGER_IMPORTS`` (comma-separated) adds to it
_kept = frozenset(n.strip() for n in os.environ.get("KTUNE_EAGER_IMPORTS", "").split(",") if n)
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
            sys.meta_path[:0] = [_finder, _optional]
    try:
        yield
    finally:
        with _lock:
            for p in names:
                _packages[p] -= 1
                if not _packages[p]:
                    del _packages[p]
            if not _packages:
                sys.meta_path[:] = [f for f in sys.meta_path if f not in (_finder, _optional)]


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
    before = set(_deferred)
    try:
        with lean(*packages):
            return load()
    except Exception:
        tried = [p for p in packages if any(
            is_lean(m) for n, m in list(sys.modules.items()) if n == p or n.startswith(p + "."))]
        tried += [n for n, ran in deferred().items() if not ran and n not in before]
        if not tried:
            raise
        for p in tried:
            forget(p)
        return load()
