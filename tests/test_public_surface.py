"""The package's public surface is the README's documented names, none shadowing a subpackage.

``jupyter_ktune.tune`` was both the function and, for ``import jupyter_ktune.tune``, the sweep
subpackage (which the function then hid), and the package re-exported names the README never
documents (``Status``, ``KernelSpec``). Issue 37 item 4.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import jupyter_ktune

README = Path(__file__).resolve().parents[1] / "README.md"
DOCUMENTED = {"RunResult", "TuneReport", "panel", "parse_cell", "run_kernel", "tma", "tune"}
IPYTHON_HOOK = {"load_ipython_extension"}  # %load_ext looks it up by this name


def test_the_public_names_are_the_documented_ones():
    public = {n for n in dir(jupyter_ktune)
              if not n.startswith("_") and not isinstance(getattr(jupyter_ktune, n), ModuleType)}
    assert set(jupyter_ktune.__all__) == DOCUMENTED
    assert public == DOCUMENTED | IPYTHON_HOOK


def test_a_module_of_the_package_imports_without_the_api():
    """The worker, its input helper and each compile-pool process import modules of the
    package, whose ``__init__`` runs first: it must not import the API (0.37 s of each start
    on a 2-core machine); the public names come on first use."""
    heavy = ("jupyter_ktune.api", "jupyter_ktune.tuning", "jupyter_ktune.runner.client",
             "jupyter_ktune.results")
    code = ("import sys, jupyter_ktune.runner.inputs_ahead, jupyter_ktune.runner.worker\n"
            f"heavy = sorted(m for m in {heavy!r} if m in sys.modules)\n"
            "import jupyter_ktune as k\n"
            "print(heavy, k.run_kernel.__module__, k.runner.get_worker.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["[]", "jupyter_ktune.api", "get_worker"]


def test_every_public_name_is_in_the_readme():
    text = README.read_text(encoding="utf-8")
    missing = [n for n in DOCUMENTED if not re.search(rf"\b{n}\b", text)]
    assert not missing, f"public but not documented in the README: {missing}"


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_no_public_name_is_also_a_subpackage(name):
    assert importlib.util.find_spec(f"jupyter_ktune.{name}") is None
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"jupyter_ktune.{name}")


def test_tune_is_the_function_and_the_sweeps_are_their_own_package():
    from jupyter_ktune.tuning import sweep

    assert jupyter_ktune.tune is sweep.tune and callable(jupyter_ktune.tune)
    assert jupyter_ktune.TuneReport.__module__ == "jupyter_ktune.tuning.report"
