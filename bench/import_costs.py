"""What each fixed cost under a first result takes by itself, each in a fresh process.

Issue 33 item 5: where a first-cell target is not met, say what bounds it, measured. A fresh
notebook's first Triton cell pays, in the device worker, torch's import, triton's, the CUDA
context, Triton's driver utilities (on a cold cache its C module is built with gcc) and the
kernel's module; a CUDA C++ cell pays cupy's import and context; a Pallas cell jax's. This
script times each step alone, in a fresh ``python3`` per repetition with empty Triton and CuPy
caches (a user's very first minute), so the phases of ``first_minute.py`` can be read against
the floor each step sets. It also says whether the installed torch has its bytecode compiled
(a read-only folder without ``__pycache__`` recompiles every module in every process). By
default every process reads its bytecode from one folder (``PYTHONPYCACHEPREFIX``) that an
untimed pass of each step fills first, as a pip install leaves a user's packages and as
``first_minute_ab.py --bytecode both`` runs the notebook's worker: on the H100 host of
first_minute_ab/2026-12-07-2117, a host whose image does not write bytecode, torch's bare import
took 3.0-4.1 s without it against 1.4-1.9 s with it. ``--bytecode host`` leaves the host as it is.

The "import torch beside ..." steps time torch's import beside each thing a fresh Triton
worker runs beside its own (the context thread's cuInit, the timer's Triton subprocess, the
compile pool's two preloading imports, the input helper's NumPy draw), and beside all four:
which of them makes the worker's import slower than a bare one
(``--steps "import torch"`` runs only those and the bare import).

Each step is timed inside its process (``time.perf_counter`` around the step, after the steps
it needs); the process's whole wall time, interpreter start included, is printed beside it.

Examples
--------
    python3 bench/import_costs.py --reps 3                 # here: the steps this machine has
    python3 bench/run.py import_costs --out $OUT           # on the device
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: a process started just before the timed part, running ``{}`` beside it (on the step's
#: pipes, so the step ends when it does and the next step runs alone)
_BESIDE = "import subprocess, sys; subprocess.Popen([sys.executable, '-c', {!r}])"
_TRITON = "import triton; from triton.runtime.cache import triton_key; triton_key()"
_DRAW = "import numpy as np; [np.random.rand(4096, 4096) for _ in range(4)]"

#: step name -> (code run before the timed part, the timed part)
STEPS: dict[str, tuple[str, str]] = {
    "interpreter only": ("", "pass"),
    "import jupyter_ktune (the %load_ext)": ("", "import jupyter_ktune, IPython"),
    "import torch": ("", "import torch"),
    # What runs beside the device worker's import of torch in a fresh Triton cell, each alone
    # beside a bare import: in the H200 run of first_minute/2026-12-07-1739 the worker's import
    # took 1.86 s against 1.29 s in the anchor's bare process.
    "import torch beside the context thread (cuInit)": (
        "from jupyter_ktune.backends import context_ahead; context_ahead.start()",
        "import torch"),
    "import torch beside a Triton process (timer's)": (_BESIDE.format(_TRITON), "import torch"),
    "import torch beside two torch imports (pool's)": (
        _BESIDE.format("import torch") + "; " + _BESIDE.format("import torch"), "import torch"),
    "import torch beside a NumPy draw (helper's)": (_BESIDE.format(_DRAW), "import torch"),
    "import torch beside all four": (
        "from jupyter_ktune.backends import context_ahead; context_ahead.start(); "
        + "; ".join(_BESIDE.format(c) for c in (_TRITON, "import torch", "import torch",
                                                 _DRAW)), "import torch"),
    "import triton (torch first)": ("import torch", "import triton"),
    "import triton alone": ("", "import triton"),
    "torch CUDA context": ("import torch", "torch.cuda.get_device_properties(0)"),
    "triton driver utilities, cold cache": (
        "import torch, triton", "triton.runtime.driver.active.utils"),
    "triton driver utilities, warm cache": (
        "import torch, triton", "triton.runtime.driver.active.utils"),
    "fla-core matmul module (torch, triton first)": (
        "import torch, triton", "import fla.ops.utils.matmul"),
    "import cupy": ("", "import cupy"),
    "cupy CUDA context": ("import cupy", "cupy.cuda.Device(0).attributes; cupy.zeros(1)"),
    "import jax": ("", "import jax"),
    "jax devices": ("import jax", "jax.devices()"),
}

CHILD = """
import json, sys, time
t0 = time.perf_counter()
{before}
t1 = time.perf_counter()
{timed}
t2 = time.perf_counter()
print(json.dumps({{"before_s": t1 - t0, "step_s": t2 - t1}}))
"""


def run_step(before: str, timed: str, cache: Path,
             pyc: Path | None = None) -> dict[str, float] | str:
    """One fresh process with ``cache`` as its Triton cache (and ``pyc`` as its bytecode
    folder, where given): the step's seconds, or why it failed (its last line of stderr)."""
    env = {**os.environ, "TRITON_CACHE_DIR": str(cache),
           "CUPY_CACHE_DIR": str(cache / "cupy"), "PYTHONPATH": os.pathsep.join(
               [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    if pyc is not None:
        env["PYTHONPYCACHEPREFIX"] = str(pyc)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD.format(before=before, timed=timed)],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or ["failed"])[-1][:90]
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "process_s": wall}


def bytecode_state() -> dict[str, object]:
    """Whether torch's own folder has compiled bytecode, and whether this user could write it."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        return {"torch": "not installed"}
    folder = Path(spec.origin).parent
    cache = folder / "__pycache__"
    return {"folder": str(folder), "writable": os.access(folder, os.W_OK),
            "pyc_files": len(list(cache.glob("*.pyc"))) if cache.is_dir() else 0,
            "dont_write_bytecode": bool(sys.flags.dont_write_bytecode),
            "PYTHONPYCACHEPREFIX": os.environ.get("PYTHONPYCACHEPREFIX", "")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3, help="fresh processes per step")
    ap.add_argument("--steps", nargs="*", help="a subset of the steps, by name prefix")
    ap.add_argument("--out", type=Path, help="folder for import_costs.json")
    ap.add_argument("--bytecode", choices=("prefix", "host"), default="prefix",
                    help="prefix: one bytecode folder, filled by an untimed pass (as a pip "
                    "install leaves packages); host: as this host is")
    opts = ap.parse_args()
    steps = {k: v for k, v in STEPS.items()
             if not opts.steps or any(k.startswith(p) for p in opts.steps)}
    state = bytecode_state()
    print("torch bytecode:", json.dumps(state), "processes:", opts.bytecode, flush=True)
    rows: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="ktune-import-costs-") as tmp:
        warm = Path(tmp) / "warm"  # Triton's cache as a second notebook finds it
        pyc = Path(tmp) / "pyc" if opts.bytecode == "prefix" else None
        run_step(*STEPS["triton driver utilities, cold cache"], warm, pyc)
        if pyc is not None:  # untimed: every module a step imports gets its bytecode
            for before, timed in steps.values():
                run_step(before, timed, Path(tempfile.mkdtemp(dir=tmp)), pyc)
        for rep in range(opts.reps):  # interleaved: a slow moment of the host spreads over all
            for name, (before, timed) in steps.items():
                cache = warm if "warm cache" in name else Path(tempfile.mkdtemp(dir=tmp))
                got = run_step(before, timed, cache, pyc)
                print(f"{name} rep {rep}: {json.dumps(got)}", flush=True)
                rows.setdefault(name, {"runs": []})["runs"].append(got)  # type: ignore[union-attr]
    print(f"\n{'step':46s} {'step s (median)':>16s} {'min':>7s} {'max':>7s} {'process s':>10s}")
    for name, row in rows.items():
        runs = [r for r in row["runs"] if isinstance(r, dict)]  # type: ignore[union-attr]
        if not runs:
            print(f"{name:46s} {'failed: ' + str(row['runs'][0]):>16s}")  # type: ignore[index]
            continue
        steps_s = [r["step_s"] for r in runs]
        row.update(median_s=statistics.median(steps_s), process_median_s=statistics.median(
            r["process_s"] for r in runs))
        print(f"{name:46s} {row['median_s']:16.3f} {min(steps_s):7.3f} {max(steps_s):7.3f} "
              f"{row['process_median_s']:10.3f}")
    if opts.out:
        opts.out.mkdir(parents=True, exist_ok=True)
        (opts.out / "import_costs.json").write_text(json.dumps(
            {"bytecode": state, "processes": opts.bytecode, "reps": opts.reps, "steps": rows,
             "at": time.time()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
