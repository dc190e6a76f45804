"""The package under test is the installed wheel, with its data files, in every process.

conftest.py stops a run that imports the checkout; these tests say the same in the report, and
check what only the wheel can get wrong: the data files it ships (``include/ktune.cuh``, the
labextension) and the package the worker and child interpreters import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata, resources
from pathlib import Path

import pytest

import jupyter_ktune
from jupyter_ktune.backends.cuda.source import include_dir

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path(jupyter_ktune.__file__).resolve().parent
wheel_only = pytest.mark.skipif(os.environ.get("KTUNE_TEST_SOURCE") == "1",
                                reason="KTUNE_TEST_SOURCE=1 tests the checkout's source")


def package_file() -> str:
    """Return where this interpreter imported jupyter_ktune from (run in the worker too)."""
    import jupyter_ktune

    return str(Path(jupyter_ktune.__file__).resolve())


@wheel_only
def test_the_package_is_imported_from_the_installed_wheel_not_the_checkout():
    assert ROOT not in PACKAGE.parents, PACKAGE
    assert not (PACKAGE.parent / "pyproject.toml").exists(), PACKAGE  # no source tree around it
    files = {str(f) for f in metadata.distribution("jupyter_ktune").files or []}
    assert "jupyter_ktune/__init__.py" in files  # the wheel's own record lists it


def test_the_worker_and_child_interpreters_import_the_same_package(worker):
    assert worker.call(package_file) == package_file()
    code = "import jupyter_ktune; print(jupyter_ktune.__file__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=60)
    assert Path(out.stdout.strip()).resolve() == Path(package_file())


def test_the_cuda_header_ships_in_the_package():
    header = resources.files("jupyter_ktune") / "include" / "ktune.cuh"
    assert header.is_file(), f"{header} is missing from the installed package"
    assert include_dir().resolve() == PACKAGE / "include", include_dir()  # what nvcc gets as -I
    assert "KT_SCOPE" in header.read_text()


@wheel_only
def test_the_labextension_is_installed_where_jupyterlab_finds_it():
    from jupyter_core.paths import jupyter_path

    found = [Path(p) / "jupyter-ktune" for p in jupyter_path("labextensions")
             if (Path(p) / "jupyter-ktune" / "package.json").is_file()]
    assert found, f"no jupyter-ktune labextension in {jupyter_path('labextensions')}"
    ext = found[0].resolve()
    assert ROOT not in ext.parents, ext
    meta = json.loads((ext / "package.json").read_text())
    assert meta["name"] == "jupyter-ktune" and meta["version"] == jupyter_ktune.__version__
    assert list((ext / "static").glob("remoteEntry.*.js")), sorted((ext / "static").iterdir())
