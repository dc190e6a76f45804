"""Compile-pool processes fork from a server that imported the compiler (and torch) once, and
a ``%%kernel`` cell starts that server where a GPU is visible (``tuning.pool``, issue 33).

Spawned, each of 15 processes imported Triton, torch and the cell's package for itself, and on
an H100 Autotune pressed at the first result found none ready for 1.8-3.3 s. Each case runs
in a fresh interpreter: the fork server is one per process and keeps the preload it began with.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif("forkserver" not in multiprocessing.get_all_start_methods(),
                                reason="no fork server on this platform: the pool spawns")

PROBE = """
import json, os, sys, time
def probe():
    t0 = time.perf_counter()
    had = "torch" in sys.modules
    import torch  # noqa: F401
    return {"ppid": os.getppid(), "had_torch": had, "import_s": time.perf_counter() - t0,
            "mark": os.environ.get("KTUNE_TEST_MARK")}
"""


def _run(body: str, tmp_path: Path, env: dict[str, str] | None = None) -> dict:
    script = tmp_path / "notebook.py"  # a file: the pool's processes import its probe
    script.write_text(textwrap.dedent(PROBE) + textwrap.dedent(body))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_pool_processes_fork_from_one_server_that_imported_torch_once(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = _run("""
        if __name__ == "__main__":
            from jupyter_ktune.tuning.pool import make_pool, start_fork_server
            start_fork_server("triton", "import torch\\n")
            pool = make_pool(2, "triton")
            got = [pool.submit(probe).result(timeout=240) for _ in range(4)]
            print(json.dumps({"me": os.getpid(), "got": got}))
    """, tmp_path)
    parents = {g["ppid"] for g in out["got"]}
    assert len(parents) == 1 and out["me"] not in parents  # the server forked them all
    assert all(g["had_torch"] for g in out["got"]), out["got"]


def test_a_forked_process_takes_the_environment_of_when_its_pool_started(tmp_path: Path) -> None:
    """The server starts with the environment of then; a variable the notebook sets later
    (TRITON_CACHE_DIR between sweeps) reaches the processes of a pool started after it."""
    out = _run("""
        if __name__ == "__main__":
            from jupyter_ktune.tuning.pool import make_pool
            first = make_pool(1, "cuda")
            before = first.submit(probe).result(timeout=240)
            os.environ["KTUNE_TEST_MARK"] = "set later"
            after = make_pool(1, "cuda").submit(probe).result(timeout=240)
            print(json.dumps({"before": before["mark"], "after": after["mark"],
                              "same_server": before["ppid"] == after["ppid"]}))
    """, tmp_path)
    assert out == {"before": None, "after": "set later", "same_server": True}


def test_a_kernel_cell_starts_the_server_with_torch_where_a_gpu_is_visible(tmp_path: Path) -> None:
    """The cell's start (``magics.warm_worker``) starts the server with Triton's compiler and,
    for a cell that imports torch, torch: a CUDA pool made later forks processes that have
    torch, because the server began with the cell's preload."""
    pytest.importorskip("torch")
    out = _run("""
        if __name__ == "__main__":
            import jupyter_ktune.backends.base as base
            base.nvidia_gpu_visible = lambda: True
            from jupyter_ktune.magics import start_compile_processes
            start_compile_processes("triton", "import torch\\n@triton.jit\\ndef k(x): pass\\n")
            from jupyter_ktune.tuning.pool import make_pool
            print(json.dumps(make_pool(1, "cuda").submit(probe).result(timeout=240)))
    """, tmp_path, env={"KTUNE_POOL_FORKSERVER": "1"})
    assert out["had_torch"] is True


def test_the_server_imports_torch_where_the_from_module_does(tmp_path: Path, monkeypatch) -> None:
    """A ``--from`` cell is a line of directives; its module is what imports torch (fla's
    matmul): the module's text, read without importing it, decides the server's preload, or
    each of 15 pool processes imported torch itself beside the worker's first run."""
    pytest.importorskip("torch")
    from jupyter_ktune.magics import compiled_text
    from jupyter_ktune.tuning.pool import preload_for

    package = tmp_path / "ktune_probe_package"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('the module is read, not imported')\n")
    (package / "kernels.py").write_text("import torch\nimport triton\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    line, body = "k --backend triton --from ktune_probe_package.kernels:k", "# ktune: grid = (1,)\n"
    assert "torch" in preload_for("triton", compiled_text(line, body))
    assert "torch" not in preload_for("triton", body)
    (package / "kernels.py").write_text("import triton\n")
    assert "torch" not in preload_for("triton", compiled_text(line, body))
    assert compiled_text("k --backend triton --from no_such_package_here.m:k", body) == body


def test_spawned_where_the_fork_server_is_turned_off(tmp_path: Path) -> None:
    out = _run("""
        if __name__ == "__main__":
            from jupyter_ktune.tuning.pool import make_pool
            got = [make_pool(1, "triton").submit(probe).result(timeout=240) for _ in range(2)]
            print(json.dumps({"me": os.getpid(), "got": got}))
    """, tmp_path, env={"KTUNE_POOL_FORKSERVER": "0"})
    assert {g["ppid"] for g in out["got"]} == {out["me"]}
    assert not any(g["had_torch"] for g in out["got"])
