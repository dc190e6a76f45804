"""The package's public surface is the README's documented names, none shadowing a subpackage.

``jupyter_ktune.tune`` was both the function and, for ``import jupyter_ktune.tune``, the sweep
subpackage (which the function then hid), and the package re-exported names the README never
documents (``Status``, ``KernelSpec``). Issue 37 item 4.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

import jupyter_ktune

README = Path(__file__).resolve().parents[1] / "README.md"
DOCUMENTED = {"RunResult", "TuneReport", "panel", "parse_cell", "run_kernel", "tma", "tune"}
IPYTHON_HOOK = {"load_ipython_extension"}  # %load_ext looks it up by this name


def test_the_public_names_are_the_documented_ones():
    public = {n for n, v in vars(jupyter_ktune).items()
              if not n.startswith("_") and not isinstance(v, ModuleType)}
    assert set(jupyter_ktune.__all__) == DOCUMENTED
    assert public == DOCUMENTED | IPYTHON_HOOK


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
