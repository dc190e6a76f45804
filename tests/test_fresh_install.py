"""The README's install command, run as written in a fresh virtualenv, gives working examples.

The other tests run against an environment with the ``test`` extra, so a dependency missing from
the ``lab`` extra (the one the README installs) cannot fail them. This test makes a fresh
virtualenv, runs the README's install command in a fresh copy of the source tree (so the
JupyterLab extension is built as on a clean clone), then, in place of its ``jupyter lab`` step,
executes every example notebook headless with that virtualenv's kernel. No source tree is on
``sys.path`` there: the notebooks import the installed package.

It takes minutes (measured on 2 cores: see the README), so it is marked slow; a plain
``python -m pytest``, as CI runs it, includes it. pip's and yarn's caches are the user's, so a
second run does not download again.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
ROOT = TESTS.parent
# The statuses a result may have on a machine where the lab extra is installed; the others say
# a cell broke (a missing module used to show as "compile error" on cell line 1).
BROKEN = ("wrong result", "compile error", "out of resources", "runtime error", "worker crashed",
          "timed out", "wrong architecture")
RESULT_LINE = re.compile(r"^(?P<name>\w+) \[[^\]]*\] (?P<status>[a-z ]+?) · (?P<reason>.*)$", re.M)
# Outside the lab extra on purpose: CuPy is the cuda extra, and runs only with a GPU anyway.
MAY_BE_MISSING = ("CuPy",)


def readme_install_steps() -> tuple[list[str], str]:
    """The README's first command, split at ``&&``: the install steps, and the notebook that its
    ``jupyter lab`` step opens."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Install and start", 1)[1]
    command = re.search(r"```bash\n(.+?)\n", section).group(1)
    steps = [s.strip() for s in command.split("&&")]
    lab = [s for s in steps if s.startswith("jupyter lab")]
    assert len(lab) == 1 and steps[-1] == lab[0], f"expected '... && jupyter lab NB': {command}"
    return steps[:-1], lab[0].split()[-1]


def fresh_copy(dest: Path) -> Path:
    """The source tree as a clean clone has it (tracked and unignored files, working copies)."""
    if (ROOT / ".git").exists():
        names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.split("\0")
        for name in filter(None, names):
            src = ROOT / name
            if src.is_file():
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / name)
    else:  # not a git checkout: everything but what a build or a test run leaves behind
        shutil.copytree(ROOT, dest, dirs_exist_ok=True, ignore=_build_outputs)
    return dest


# build outputs, relative to the root (labextension/ itself is the extension's source)
BUILT = {"lib", "jupyter_ktune/labextension", "tsconfig.tsbuildinfo", "ui-tests/test-results"}


def _build_outputs(folder: str, names: list[str]) -> set[str]:
    rel = Path(folder).relative_to(ROOT)
    return {n for n in names if n in ("node_modules", ".git", "__pycache__", ".pytest_cache")
            or (rel / n).as_posix() in BUILT}


def clean_env(venv: Path) -> dict[str, str]:
    """The environment of a shell with the venv activated: no checkout on PYTHONPATH, no test
    plugins, and only the venv's kernelspecs first on JUPYTER_PATH."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "KTUNE_BACKEND_MODULES",
                        "KTUNE_FORCE_INTERPRET", "TRITON_INTERPRET", "JUPYTER_PATH")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv),
               JUPYTER_PATH=str(venv / "share" / "jupyter"))
    return env


def problems(name: str, text: str) -> list[str]:
    """What in a notebook's outputs says a cell did not work."""
    found = [f"{name}: {m.group(0)[:300]}" for m in RESULT_LINE.finditer(text)
             if m.group("status") in BROKEN
             or ("not installed" in m.group("reason")
                 and not any(dep.lower() in m.group("reason").lower() for dep in MAY_BE_MISSING))]
    if "No module named" in text:
        found.append(f"{name}: a module is missing: "
                     f"{text[text.find('No module named'):][:120]}")
    return found


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_the_readme_install_runs_every_example(tmp_path):
    steps, opened = readme_install_steps()
    notebooks = sorted(p.name for p in (ROOT / "examples").glob("*.ipynb"))
    assert opened == "examples/quickstart.ipynb" and "quickstart.ipynb" in notebooks
    src, venv, run_dir = fresh_copy(tmp_path / "src"), tmp_path / "venv", tmp_path / "run"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = clean_env(venv)
    seconds = {}
    for step in steps:  # each as the README writes it, in a shell with the venv activated
        start = time.perf_counter()
        proc = subprocess.run(["bash", "-c", step], cwd=src, env=env, capture_output=True,
                              text=True)
        seconds[step] = round(time.perf_counter() - start, 1)
        assert proc.returncode == 0, f"{step} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    installed = subprocess.run([str(venv / "bin" / "python"), "-c",
                                "import jupyter_ktune; print(jupyter_ktune.__file__)"],
                               cwd=tmp_path, env=env, capture_output=True, text=True)
    assert str(venv) in installed.stdout, installed  # the package, not a source tree
    shutil.copytree(ROOT / "examples", run_dir)  # nothing but the notebooks beside them
    start = time.perf_counter()
    proc = subprocess.run([str(venv / "bin" / "python"), str(TESTS / "example_notebooks.py"),
                           str(run_dir), *notebooks], cwd=run_dir, env=env, capture_output=True,
                          text=True)
    seconds["notebooks"] = round(time.perf_counter() - start, 1)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    print("fresh install, seconds:", json.dumps(seconds),
          {n: r["seconds"] for n, r in report.items()})
    errors = [f"{n}: {r['error'][:2000]}" for n, r in report.items() if r["error"]]
    found = [p for n, r in report.items() for p in problems(n, r["text"])]
    assert not errors and not found, "\n".join(errors + found)
    quick = report["quickstart.ipynb"]["text"]
    for cell in ("scale_triton", "scale_pallas"):  # the interpreters ran, on any machine
        assert re.search(rf"^{cell} \[[^\]]*\] ok · ", quick, re.M), f"{cell} did not run"
    assert "registers" in quick  # the CUDA C++ cell's static report
