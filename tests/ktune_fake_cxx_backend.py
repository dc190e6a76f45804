"""The fake CPU backend with every declared fact of ``BackendBase`` changed from its default.

Registered in one line (``KTUNE_BACKEND_MODULES=...,fakecxx=ktune_fake_cxx_backend``) by
``tests/test_backend_facts.py``, and nowhere else: the generic code (the cell's reading,
``--from``, the compiler controls, the compile pool, the sweep's compile order, ``ktune
device``, verification's poisoning, the export's default format) must take each fact from here,
never from a backend's name. Its cells are the fake's (Python, run on NumPy); only what it
declares differs. It declares none of the optional hooks (``preload``, ``pool_hints``,
``launcher_ahead``, ``load_prebuilt``, ``profile_scopes``...): a sweep of it runs on
``BackendBase``'s defaults.
"""

from __future__ import annotations

from typing import ClassVar

from ktune_fake_backend import FakeBackend

#: Modules a compile-pool process of this backend imports: one that every Python has.
COMPILER_MODULE = "colorsys"


class FakeCxxBackend(FakeBackend):
    """Declares the facts the built-ins differ by, each away from its default."""

    name: ClassVar[str] = "fakecxx"
    comment: ClassVar[str] = "//"
    cxx_directives: ClassVar[bool] = True
    python_cells: ClassVar[bool] = False
    editor_mime: ClassVar[str] = "text/x-csrc"  # not CUDA's: read from here, never a name map
    language: ClassVar[str] = "Fake C++"
    compiler_controls: ClassVar[frozenset[str] | None] = frozenset({"maxnreg"})
    poisons_outputs: ClassVar[bool] = False
    precompile: ClassVar[str | None] = "nothing real: the fake's facts test"
    compiler_modules: ClassVar[tuple[str, ...]] = (COMPILER_MODULE,)
    compile_cost_order: ClassVar[bool] = True
    profile_min_capability: ClassVar[float] = 9.0
    export_formats: ClassVar[tuple[str, ...]] = ("cpp", "kernel_tuner")

    def static_capability(self, device):
        return "yes (fake)", "a note from the fake"


BACKEND = FakeCxxBackend()
