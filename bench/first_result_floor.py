"""The floor under a first result: what a fresh process pays for one kernel's first number with
no tool at all (issue 33: where a target is not met, what bounds it, measured).

    python bench/first_result_floor.py --kernel fla-matmul --reps 3
    python bench/first_result_floor.py --kernel kt-vector-add --reps 3

Each rep is a fresh interpreter with empty Triton and CuPy caches, timed from its spawn, with
Python's bytecode as a pip install leaves it (an untimed first process fills it, as
``first_minute_ab.py --bytecode`` does). Marks, in seconds from the spawn:

* ``fla-matmul``: torch, Triton and fla's module imported; the cell's inputs drawn by its own
  inputs function (NumPy, ``first_minute_cells``) and copied to the GPU (torch's CUDA start);
  the JIT's compile and first launch of the kernel's first autotune config, synchronized; a
  second launch timed with CUDA events; a check against torch.
* ``kt-vector-add``: CuPy imported; the cell's inputs drawn (NumPy, 10 M each) and copied to the
  GPU (the context's start); NVRTC's compile of Kernel Tuner's ``vector_add.cu``; a launch,
  synchronized; the sum copied back and checked.

No poisoned outputs, no L2 flush, no timing protocol, no panel: the costs any notebook tool
pays for that cell's first number, the bound under jupyter-ktune's first result for the same
cell (``first_minute_ab.py``; the difference is the tool's own).
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

HERE = Path(__file__).resolve().parent
VECTOR_ADD_BLOCK = 128  # a value of the cell's block_size_x list; NVRTC's cost does not vary


def fla_matmul(mark) -> dict:  # noqa: ANN001 - mark(label) records the time since the spawn
    import importlib

    import torch
    mark("import torch")
    import triton
    mark("import triton")
    if os.environ.get("KTUNE_FLOOR_LEAN") == "1":  # only the cell's module, as the worker does
        from jupyter_ktune.lean_import import lean

        with lean("fla"):
            importlib.import_module("fla.ops.utils.matmul")
        mark("import fla's module (lean)")
    else:
        importlib.import_module("fla.ops.utils.matmul")
        mark("import fla's module")
    module = sys.modules["fla.ops.utils.matmul"]  # the package's function shadows the module
    import numpy as np
    from first_minute_cells import fla_matmul_inputs

    host = fla_matmul_inputs()  # the cell's own inputs: the arguments as fla passes them
    mark("inputs drawn (NumPy)")
    args = {k: torch.from_numpy(v).cuda() if isinstance(v, np.ndarray) else v
            for k, v in host.items()}
    torch.cuda.synchronize()
    mark("inputs on the GPU")
    tuner = module.matmul_kernel
    while not hasattr(tuner, "configs"):  # @heuristics over @autotune over the JIT function
        tuner = tuner.fn
    config = {k: v for k, v in tuner.configs[0].all_kwargs().items() if v is not None}
    grid = (1, triton.cdiv(host["M"], config["BM"]), triton.cdiv(host["N"], config["BN"]))
    args.update(HAS_ALPHA=False, HAS_BETA=False, **config)  # the heuristics' values: no alpha, beta
    tuner.fn[grid](**args)
    torch.cuda.synchronize()
    mark("compile + first launch")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    tuner.fn[grid](**args)
    end.record()
    torch.cuda.synchronize()
    mark("second launch")
    a, b, c = args["a"], args["b"], args["c"]
    ok = bool(torch.allclose(c.float(), a.float() @ b.float(), atol=0.5, rtol=1e-2))
    mark("check")
    return {"config": str(tuner.configs[0]), "kernel_ms": start.elapsed_time(end), "ok": ok}


def vector_add(mark) -> dict:  # noqa: ANN001
    import cupy
    mark("import cupy")
    from convolution_vs_kernel_tuner import kernel_source
    from first_minute_cells import kernel_tuner_sdist, vector_add_inputs

    source = kernel_source(kernel_tuner_sdist(), "test/vector_add.cu")
    host = vector_add_inputs()
    mark("inputs drawn (NumPy)")
    c, a, b = (cupy.asarray(host[k]) for k in ("c", "a", "b"))
    cupy.cuda.runtime.deviceSynchronize()
    mark("inputs on the GPU")
    # not extern "C": the name is C++-mangled, looked up through NVRTC's name expressions
    kernel = cupy.RawModule(code=source, options=(f"-Dblock_size_x={VECTOR_ADD_BLOCK}",),
                            name_expressions=("vector_add",))
    function = kernel.get_function("vector_add")
    mark("NVRTC compile")
    n = int(host["n"])
    function(((n + VECTOR_ADD_BLOCK - 1) // VECTOR_ADD_BLOCK,), (VECTOR_ADD_BLOCK,),
             (c, a, b, host["n"]))
    cupy.cuda.runtime.deviceSynchronize()
    mark("launch")
    ok = bool((c.get() == host["a"] + host["b"]).all())
    mark("check")
    return {"block_size_x": VECTOR_ADD_BLOCK, "ok": ok}


KERNELS = {"fla-matmul": fla_matmul, "kt-vector-add": vector_add}
NOT_MARKS = ("config", "kernel_ms", "ok", "block_size_x")  # what a row says beside its marks


def child(kernel: str) -> None:
    """One fresh process's first number; prints its marks as one JSON row."""
    t0 = float(os.environ["KTUNE_FLOOR_T0"])
    marks = {"interpreter start": time.time() - t0}
    extra = KERNELS[kernel](lambda label: marks.__setitem__(label, time.time() - t0))
    print(json.dumps({**{k: round(v, 3) for k, v in marks.items()}, **extra}))


def spawn(kernel: str, pyc: Path) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="ktune-floor-"))
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp / "triton"),
           "CUPY_CACHE_DIR": str(tmp / "cupy"), "PYTHONPYCACHEPREFIX": str(pyc),
           "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent),  # --lean's import
                                          os.environ.get("PYTHONPATH", "")]),
           "KTUNE_FLOOR_T0": repr(time.time())}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    p = subprocess.run([sys.executable, __file__, "--child", kernel], env=env, cwd=tmp,
                       capture_output=True, text=True, timeout=300)
    rows = [x for x in p.stdout.splitlines() if x.startswith("{")]
    return json.loads(rows[-1]) if rows else {"error": (p.stderr or p.stdout)[-600:]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", choices=sorted(KERNELS), default="fla-matmul")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--lean", action="store_true",
                    help="import only fla's cell module, not its package's __init__ files, as "
                         "the notebook's worker does (jupyter_ktune.lean_import)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child)
        return 0
    if a.lean:
        os.environ["KTUNE_FLOOR_LEAN"] = "1"
    pyc = Path(tempfile.mkdtemp(prefix="ktune-floor-pyc-"))
    print("bytecode filled (untimed)", json.dumps(spawn(a.kernel, pyc)))
    rows = []
    for i in range(a.reps):
        rows.append(spawn(a.kernel, pyc))
        print(i, json.dumps(rows[-1]), flush=True)
    print(f"\n{a.kernel}: the first number with no tool, median of {a.reps} fresh processes, "
          "seconds from the spawn")
    marks = [k for k in dict.fromkeys(k for r in rows for k in r)
             if k not in NOT_MARKS and all(isinstance(r.get(k), float) for r in rows)]
    print(f"  {'mark':34} {'at':>7} {'step':>7}")
    for i, key in enumerate(marks):  # the step: since the mark before, per process, then median
        at = statistics.median(r[key] for r in rows)
        step = statistics.median(r[key] - (r[marks[i - 1]] if i else 0.0) for r in rows)
        print(f"  {key:34} {at:7.3f} {step:7.3f}")
    for key in ("kernel_ms", "ok"):
        print(f"  {key:34} {[r.get(key) for r in rows]}")
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
