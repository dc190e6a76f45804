"""Lint: ruff over the Python the repository holds, TypeScript's checker over the labextension.

ruff reads its rules from pyproject.toml (``[tool.ruff]``); it comes with the test extra. The
TypeScript check needs the labextension's packages, which the wheel build installs
(``jlpm install``, into ``node_modules/`` beside package.json); without them it is skipped.
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


def test_typescript_compiles():
    tsc = next((p for p in (ROOT / "node_modules" / ".bin" / "tsc",
                            ROOT / "labextension" / "node_modules" / ".bin" / "tsc")
                if p.is_file()), None)
    if tsc is None:
        pytest.skip("no node_modules/ (jlpm install, or the wheel build, puts tsc there)")
    proc = subprocess.run([str(tsc), "--noEmit", "-p", str(ROOT / "tsconfig.json")], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"tsc --noEmit:\n{proc.stdout}{proc.stderr}"
