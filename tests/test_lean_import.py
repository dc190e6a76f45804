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


OPTIONAL = {
    "kpkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: kpkg\nVersion: 1.0\n"
                                   "Requires-Dist: needed>=1\n"
                                   "Requires-Dist: optdep; extra == \"extras\"\n",
    "kpkg-1.0.dist-info/top_level.txt": "kpkg\n",
    "needed-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: needed\nVersion: 1.0\n",
    "needed-1.0.dist-info/top_level.txt": "needed\n",
    "optdep-2.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: optdep\nVersion: 2.0\n",
    "optdep-2.0.dist-info/top_level.txt": "optdep\n",
    "kpkg/__init__.py": "",
    "kpkg/ops.py": "import needed\ntry:\n    import optdep\n    HAVE = True\n"
                   "except ImportError:\n    HAVE = False\n",
    "needed/__init__.py": "import os\nos.environ['NEEDED_RAN'] = '1'\n",
    # an __init__ that puts another object in sys.modules, as transformers' does
    "optdep/__init__.py": "import os, sys, types\nos.environ['OPTDEP_RAN'] = '1'\n"
                          "__version__ = '2.0'\n"
                          "proxy = types.ModuleType(__name__)\n"
                          "proxy.__dict__.update(__version__=__version__, __path__=__path__,\n"
                          "                      VALUE=7, __spec__=__spec__)\n"
                          "sys.modules[__name__] = proxy\n",
    "optdep/sub.py": "from optdep import VALUE\nDOUBLE = 2 * VALUE\n",
}

OPTIONAL_CASE = """
import json, os, sys
from jupyter_ktune.lean_import import load_leanly, deferred
import importlib
ops = load_leanly(lambda: importlib.import_module("kpkg.ops"), ("kpkg",))
out = {"have": ops.HAVE, "needed": os.environ.get("NEEDED_RAN"),
       "optdep_ran": os.environ.get("OPTDEP_RAN"), "deferred": deferred()}
out["value"] = ops.optdep.VALUE  # through the reference kpkg.ops holds
out["after"] = os.environ.get("OPTDEP_RAN")
out["version"] = ops.optdep.__version__
import optdep.sub
out["sub"] = optdep.sub.DOUBLE
out["same"] = sys.modules["optdep"] is optdep
out["deferred_after"] = deferred()
print(json.dumps(out))
"""


@pytest.fixture
def optional_site(tmp_path: Path) -> Path:
    for name, text in OPTIONAL.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_an_optional_dependency_is_imported_when_first_read(optional_site: Path) -> None:
    """kpkg requires ``needed`` and lists ``optdep`` only under an extra: ``try: import optdep``
    succeeds without running optdep's ``__init__``; the first name read through kpkg's reference
    imports it, and names come from the object its ``__init__`` left in ``sys.modules``."""
    out = _run(OPTIONAL_CASE, env={"PYTHONPATH": f"{optional_site}{os.pathsep}{ROOT}"},
               cwd=optional_site)
    assert out["have"] is True and out["needed"] == "1"
    assert out["optdep_ran"] is None and out["deferred"] == {"optdep": False}
    assert out["value"] == 7 and out["after"] == "1" and out["version"] == "2.0"
    assert out["sub"] == 14 and out["same"] is True
    assert out["deferred_after"] == {"optdep": True}


def test_a_required_or_unlisted_dependency_imports_as_python_does(optional_site: Path) -> None:
    """Without dist-info optdep's distribution is unknown, so it is imported at once, as with
    the lean import off."""
    for name in ("optdep-2.0.dist-info/METADATA", "optdep-2.0.dist-info/top_level.txt"):
        (optional_site / name).unlink()
    out = _run(OPTIONAL_CASE, env={"PYTHONPATH": f"{optional_site}{os.pathsep}{ROOT}"},
               cwd=optional_site)
    assert out["optdep_ran"] == "1" and out["deferred"] == {}


def test_liger_probing_for_peft_does_not_import_it(tmp_path: Path) -> None:
    """liger_kernel/utils.py runs ``try: import peft`` (peft imports transformers: 8-10 s of
    liger's first result on an H100 host). A peft whose ``__init__`` raises stands in for it:
    liger's cell still loads, and peft never ran."""
    (tmp_path / "peft").mkdir()
    (tmp_path / "peft" / "__init__.py").write_text("raise RuntimeError('peft ran')\n")
    (tmp_path / "peft-9.0.dist-info").mkdir()
    (tmp_path / "peft-9.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: peft\nVersion: 9.0\n")
    (tmp_path / "peft-9.0.dist-info" / "top_level.txt").write_text("peft\n")
    after = ("from jupyter_ktune.lean_import import deferred\n"
             "out['deferred'] = deferred()\n"
             "out['peft_available'] = sys.modules['liger_kernel.utils'].PEFT_AVAILABLE")
    out = _load("liger-dyt", "liger_kernel", after, env={"PYTHONPATH": str(tmp_path)})
    assert out["kernel"] in ("Autotuner", "JITFunction", "InterpretedFunction")
    assert out["deferred"].get("peft") is False and out["peft_available"] is True
