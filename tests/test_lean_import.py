"""A ``--from`` cell imports its package's modules without the package's ``__init__`` files,
and a package that needs them still imports (``jupyter_ktune.lean_import``, issue 33).

Each case runs in a fresh interpreter: what is imported is the point, and pytest's process has
imported the corpus packages already. The packages are the installed fla-core and
liger-kernel (the corpus's), plus small packages written here for the fallback's cases.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LOAD_CELL = """
import json, os, sys, time
sys.path.insert(0, {tests!r})
os.environ["KTUNE_FORCE_INTERPRET"] = "1"
from corpus.entries import BY_ID
from jupyter_ktune.backends import Registered, get_backend
from jupyter_ktune.spec import read_cell
e = BY_ID[{kernel!r}]
line, body, _ = e.cell()
given = {{"inputs": e.inputs, "reference": e.reference}}
spec = read_cell(line, body, given, Registered(), "triton")
backend = get_backend("triton")
import torch, triton  # the worker has these before a cell's module
t0 = time.perf_counter()
module = backend.module(spec)
seconds = time.perf_counter() - t0
loaded = sorted(m for m in sys.modules if m.split(".")[0] == {top!r})
out = {{"seconds": seconds, "loaded": loaded, "kernel": type(getattr(module, spec.name)).__name__}}
{after}
print(json.dumps(out))
"""


def _run(code: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> dict:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=240, cwd=cwd, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _load(kernel: str, top: str, after: str = "", env: dict[str, str] | None = None) -> dict:
    pytest.importorskip(top)
    return _run(LOAD_CELL.format(tests=str(ROOT / "tests"), kernel=kernel, top=top,
                                 after=after), env)


def test_fla_cell_skips_the_ops_package_init() -> None:
    """fla's softmax cell imports fla.ops.utils.op and fla.utils: fla/ops/__init__.py (every
    op of the package, 274 modules of fla) must not run; a name asked of fla.ops later runs
    it then."""
    after = ("from fla.ops import chunk_gla\n"
             "out['later'] = chunk_gla.__name__\n"
             "out['after_later'] = sum(m.split('.')[0] == 'fla' for m in sys.modules)")
    out = _load("fla-softmax", "fla", after)
    assert out["kernel"] in ("Autotuner", "JITFunction", "InterpretedFunction")
    assert "fla.ops.utils.op" in out["loaded"]
    assert "fla.ops.gla" not in out["loaded"], "fla/ops/__init__.py ran"
    assert len(out["loaded"]) < 30, out["loaded"]
    assert out["later"] == "chunk_gla"
    assert out["after_later"] > 100  # the package's own __init__, run when it was asked


def test_lean_import_off_imports_as_python_does() -> None:
    out = _load("fla-softmax", "fla", env={"KTUNE_LEAN_IMPORT": "0"})
    assert "fla.ops.gla" in out["loaded"]


def test_liger_cell_skips_the_ops_package_init() -> None:
    out = _load("liger-dyt", "liger_kernel")
    assert "liger_kernel.ops.dyt" not in out["loaded"]  # the cell holds the kernel's text
    assert "liger_kernel.ops.utils" in out["loaded"]
    assert "liger_kernel.ops.geglu" not in out["loaded"], "liger_kernel/ops/__init__.py ran"


PACKAGE = {
    "pkg/__init__.py": "import os\nos.environ['PKG_READY'] = '1'\nANSWER = 42\n",
    "pkg/sub/__init__.py": "raise RuntimeError('the heavy part ran')\n",
    "pkg/sub/leaf.py": "SCALE = 2\n",
    "pkg/named.py": "from pkg import ANSWER\nVALUE = ANSWER\n",
    "pkg/needs_init.py": "import os\nassert os.environ.get('PKG_READY'), 'pkg init not run'\n",
    "pkg/sub/table.txt": "16 32 64\n",
    "pkg/sub/reads.py": "import importlib.resources, inspect, sys\n"
                        "TEXT = importlib.resources.files('pkg.sub').joinpath('table.txt')"
                        ".read_text().split()\n"
                        "LOADER = sys.modules['pkg.sub'].__spec__.loader.get_source('pkg.sub')\n",
}

LEAN_CASE = """
import json, sys
from jupyter_ktune.lean_import import load_leanly, is_lean
import importlib
def load():
    return importlib.import_module({module!r})
m = load_leanly(load, ("pkg",))
print(json.dumps({{"value": getattr(m, {attr!r}, None),
                  "pkg_lean": is_lean(sys.modules["pkg"]),
                  "ready": __import__("os").environ.get("PKG_READY")}}))
"""


@pytest.fixture
def package(tmp_path: Path) -> Path:
    for name, text in PACKAGE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    return tmp_path


def _case(package: Path, module: str, attr: str) -> dict:
    return _run(LEAN_CASE.format(module=module, attr=attr),
                env={"PYTHONPATH": f"{package}{os.pathsep}{ROOT}"}, cwd=package)


def test_a_subpackage_init_never_asked_for_never_runs(package: Path) -> None:
    out = _case(package, "pkg.sub.leaf", "SCALE")
    assert out == {"value": 2, "pkg_lean": True, "ready": None}


def test_a_name_of_the_package_runs_its_init_then(package: Path) -> None:
    out = _case(package, "pkg.named", "VALUE")
    assert out["value"] == 42 and out["pkg_lean"] is False and out["ready"] == "1"


def test_a_module_needing_the_init_side_effect_imports_again_whole(package: Path) -> None:
    """pkg.needs_init asserts what pkg/__init__.py sets up without naming anything of it: the
    lean import fails, the package is forgotten and imported as Python does."""
    out = _case(package, "pkg.needs_init", "__name__")
    assert out == {"value": "pkg.needs_init", "pkg_lean": False, "ready": "1"}


def test_which_packages_a_cell_imports_leanly() -> None:
    from jupyter_ktune.lean_import import cell_packages

    text = textwrap.dedent("""
        import torch.nn.functional as F
        import fla
        from triton.language.extra import libdevice
        from liger_kernel.ops.utils import ensure_contiguous
        from .local import thing
        try:
            from xformers.ops.fmha import attn_bias
        except ImportError:
            pass
    """)
    assert cell_packages(text) == ("liger_kernel", "triton", "xformers")
    assert cell_packages(text, never=("triton.compiler",)) == ("liger_kernel", "xformers")
    assert cell_packages("import fla", "flag_gems.ops.mm:mm_kernel (flag-gems 5.0.2)") \
        == ("flag_gems",)
    assert cell_packages("def (") == ()


def test_a_lean_package_still_serves_its_files_and_source(package: Path) -> None:
    """A package created lean keeps its loader's answers (``importlib.resources``, the source):
    packages read their config tables that way (pkg.sub's ``__init__`` raises if run)."""
    out = _case(package, "pkg.sub.reads", "TEXT")
    assert out["value"] == ["16", "32", "64"] and out["pkg_lean"] is True
