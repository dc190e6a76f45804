"""Lint: ruff over the Python the repository holds; TypeScript's checker and ESLint over the
labextension.

ruff reads its rules from pyproject.toml (``[tool.ruff]``); it comes with the test extra. The
TypeScript checks need Node and the labextension's packages, which the wheel build installs
(``jlpm install``, into ``node_modules/`` beside package.json); without them they are skipped.
ESLint's rules are in eslint.config.js.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINTED = ["jupyter_ktune", "tests", "bench", "examples"]


def _ruff() -> list[str] | None:
    """The ruff command: the module beside this interpreter, else one on PATH."""
    probe = subprocess.run([sys.executable, "-m", "ruff", "--version"], capture_output=True)
    if probe.returncode == 0:
        return [sys.executable, "-m", "ruff"]
    exe = shutil.which("ruff")
    return [exe] if exe else None


def test_ruff_finds_nothing():
    ruff = _ruff()
    if ruff is None:
        pytest.skip('ruff is not installed (pip install ".[test]" brings it)')
    proc = subprocess.run([*ruff, "check", "--no-cache", *LINTED], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"ruff check {' '.join(LINTED)}:\n{proc.stdout}{proc.stderr}"


def _node_tool(name: str) -> Path:
    """``node_modules/.bin/<name>``; skips where Node or the packages are not installed, fails
    where the packages are but not this one (``node_modules/`` older than package.json)."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed (the labextension's build needs it too)")
    folder = ROOT / "node_modules"
    if not folder.is_dir():
        pytest.skip("no node_modules/ (jlpm install, or the wheel build, puts the tools there)")
    tool = folder / ".bin" / name
    assert tool.is_file(), f"{tool} is missing: run jlpm install (package.json lists it)"
    return tool


def test_typescript_compiles():
    tsc = _node_tool("tsc")
    proc = subprocess.run([str(tsc), "--noEmit", "-p", str(ROOT / "tsconfig.json")], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"tsc --noEmit:\n{proc.stdout}{proc.stderr}"


def test_eslint_finds_nothing():
    eslint = _node_tool("eslint")
    proc = subprocess.run([str(eslint), "--max-warnings", "0", "labextension/src"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"eslint labextension/src:\n{proc.stdout}{proc.stderr}"
