"""Browser tests of the labextension (Galata in headless Debian chromium) and its jest tests.

``test_browser`` builds nothing: it needs the labextension built into ``jupyter_ktune/labextension``
(``pip install .`` or ``jlpm build:prod`` does that) and runs ``jlpm playwright test`` in
``ui-tests/`` against ``/usr/bin/chromium``, installing the ui-tests' npm packages first
(without a browser download). It is skipped only when ``/usr/bin/chromium`` is absent
(``apt-get install -y chromium``). Screenshots land in ``ui-tests/test-results/screenshots/``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
UI = ROOT / "ui-tests"
CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))


def _jlpm() -> list[str]:
    exe = shutil.which("jlpm", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                     os.environ.get("PATH", "")]))
    if exe is None:
        pytest.skip("jlpm not found (it comes with jupyterlab)")
    return [exe]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # the server and its kernels: this interpreter's jupyter and the package under test (the
    # installed one; conftest.py puts the checkout on PYTHONPATH only for KTUNE_TEST_SOURCE=1)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD"] = "1"
    env["YARN_ENABLE_IMMUTABLE_INSTALLS"] = "false"
    env.pop("CI", None)  # keep Playwright's list reporter and Yarn's non-immutable install
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int) -> None:
    proc = subprocess.run(cmd, cwd=cwd, env=env, timeout=timeout, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-12000:]}"


def test_jest_unit_tests():
    """The labextension's pure functions (mimeFor, bundle parsing, decoration ranges)."""
    jest = ROOT / "node_modules" / ".bin" / "jest"
    if not jest.exists():
        pytest.skip("node_modules not installed (pip install . or jlpm install does it)")
    _run([str(jest), "--ci"], ROOT, _env(), 600)


@pytest.mark.ui
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} absent (apt-get install chromium)")
# its own limits are the two subprocess timeouts below; the suite's 600 s default cut it off in
# CI (here the npm install and the 15 browser tests took 521 s on 2 cores, beside light other work)
@pytest.mark.timeout(900 + 2400 + 60)
def test_browser():
    """Highlighting, compile-error marks and the gutter, in JupyterLab in chromium."""
    from jupyter_core.paths import jupyter_path

    if not any((Path(p) / "jupyter-ktune" / "package.json").is_file()
               for p in jupyter_path("labextensions")):
        pytest.fail("the labextension is not installed: run `pip install .`")
    env = _env()
    env["KTUNE_UI_PORT"] = str(_free_port())
    if not (UI / "node_modules" / "@jupyterlab" / "galata").exists():
        _run(_jlpm() + ["install"], UI, env, 900)
    _run(_jlpm() + ["playwright", "test"], UI, env, 2400)  # panel.spec.ts runs kernels: ~6 min
