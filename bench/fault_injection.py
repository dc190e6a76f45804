"""Fault injection (issue 9): a sweep of >= 100 variants, a share of which fault, then kill -9.

Usage::

    python bench/fault_injection.py --out DIR            # CUDA C++ cells on a GPU (CuPy)
    python bench/fault_injection.py --fake --out DIR     # the same sweep on CPU, fake backend

Phase 1 sweeps ``K in range(0, N)``; ``K % 16`` picks the fault (GPU / --fake):

====  ===========================================  ==========================================
K%16  GPU (CUDA C++ cell)                          --fake (Python cell, tests/ktune_fake...)
====  ===========================================  ==========================================
1     illegal address (store through a bad ptr)    os.abort() (the worker crashes)
3     infinite loop (past --timeout)               infinite loop (past --timeout)
5     too much shared memory (smem = 300000)       FatalFault (a sticky device error)
7     compile error (#if K % 16 == 7 ... #endif)   compile error (#if K % 16 == 7 ... #endif)
9     NaN output                                   NaN output
11    wrong output                                 wrong output
13    __trap() (a sticky launch failure)           raise OutOfResources
15    healthy                                      out of memory (np.empty(1 << 62))
====  ===========================================  ==========================================

Phase 2 (GPU only) runs a few variants whose inputs need 1 TiB of device memory (cudaMalloc
fails). Phase 3 kills the worker with SIGKILL in the middle of a healthy sweep, then runs the
sweep again, which must take every stored result from the store. Figures: variants run, faults
survived (faulty variants stored with a failure status while the sweep went on), healthy
variants measured, worker restarts and each start's seconds, results lost (rows expected minus
rows in the store), and the resumed sweep's cached count. Written to ``DIR/summary.json`` and
printed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

CUDA_SRC = """// ktune: K in range(0, %(n)d)
// ktune: grid = cdiv(n, 256); block = 256; smem = 300000 if K %% 16 == 5 else 0
// ktune: bytes = 8 * n
__global__ void scale(const float* __restrict__ x, float* __restrict__ y, int n) {
#if K %% 16 == 7
  this line is not C++;
#endif
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
#if K %% 16 == 1
  if (i == 0) { float* bad = (float*)0x10; bad[i] = 1.0f; }    // illegal address
#endif
#if K %% 16 == 3
  while (*(volatile const float*)(x + i) >= 0.0f) { }          // never ends (x >= 0)
#endif
#if K %% 16 == 13
  if (i == 0) __trap();                                        // sticky launch failure
#endif
  y[i] = 2.0f * x[i];
#if K %% 16 == 9
  if (i == 3) y[i] = __int_as_float(0x7fc00000);               // NaN
#endif
#if K %% 16 == 11
  y[i] = 3.0f * x[i];                                          // wrong
#endif
}
"""
GPU_FAULTS = {1: "illegal address", 3: "infinite loop", 5: "too much shared memory",
              7: "compile error", 9: "NaN output", 11: "wrong output", 13: "trap"}
FAKE_FAULTS = {1: "crash (abort)", 3: "infinite loop", 5: "fatal fault", 7: "compile error",
               9: "NaN output", 11: "wrong output", 13: "out of resources",
               15: "out of memory"}
HEALTHY_SRC = {"cuda": """// ktune: K in range(0, 40)
// ktune: grid = cdiv(n, 256); block = 256
__global__ void scale(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i] + 0.0f * K;
}
""", "fake": """# ktune: K in range(0, 40)
import time
def scale(x, y, n):
    time.sleep(0.002)
    y[:] = 2 * x
"""}

N_ELEMS = 1 << 20


def inputs():
    """Random float32 input and output, 4 MiB each."""
    x = np.random.rand(N_ELEMS).astype(np.float32)
    return dict(x=x, y=np.empty_like(x), n=N_ELEMS)


def fake_inputs():
    """Return a small input set for the CPU run."""
    x = np.random.rand(64)
    return dict(x=x, y=np.empty_like(x), n=64)


def huge_inputs():
    """Return inputs that need 1 TiB of device memory: the allocation fails (out of memory)."""
    import cupy

    x = cupy.empty(1 << 38, dtype=cupy.float32)
    return dict(x=x, y=cupy.empty_like(x), n=x.size)


def reference(x, y, n):
    """Return what a correct kernel writes."""
    return 2 * x


def _specs(fake: bool, n: int, timeout: float):
    from jupyter_ktune.spec import parse_cell

    if fake:
        sys.path.insert(0, str(ROOT / "tests"))
        os.environ["KTUNE_BACKEND_MODULES"] = "fake=ktune_fake_backend"
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT / "tests"), str(ROOT), os.environ.get("PYTHONPATH", "")])
        import test_reliability_faults as t

        src = t.SRC.replace(f"range(0, {t.N_VARIANTS})", f"range(0, {n})")
        line = "scale --backend fake --inputs inputs --reference reference --out y"
        ns = {"inputs": fake_inputs, "reference": reference}
        return (parse_cell(f"{line} --budget-ms 1 --timeout {timeout}", src, ns),
                parse_cell(f"{line} --budget-ms 1 --timeout {timeout}", HEALTHY_SRC["fake"], ns),
                None, FAKE_FAULTS)
    line = "scale --backend cuda --inputs inputs --reference reference --out y --budget-ms 20"
    ns = {"inputs": inputs, "reference": reference, "huge_inputs": huge_inputs}
    main = parse_cell(f"{line} --timeout {timeout}", CUDA_SRC % {"n": n}, ns)
    healthy = parse_cell(f"{line} --timeout {timeout}", HEALTHY_SRC["cuda"], ns)
    oom = parse_cell(f"{line.replace('--inputs inputs', '--inputs huge_inputs')} "
                     f"--timeout {timeout}", HEALTHY_SRC["cuda"].replace("0, 40", "0, 4"), ns)
    return main, healthy, oom, GPU_FAULTS


def _rows(store_path: Path, spec) -> dict:
    from jupyter_ktune.tune import Store

    with Store(store_path) as store:
        rows = [r for k in store.keys() if k.source_hash == spec.source_hash
                for r in store.results(k)]
        integrity = store._conn.execute("PRAGMA integrity_check").fetchone()[0]
    return {"rows": {r.config["K"]: r for r in rows}, "integrity": integrity}


def fault_sweep(spec, faults: dict, store: Path, log) -> dict:
    """Phase 1: the sweep of faulty and healthy variants on one worker."""
    from jupyter_ktune.runner.client import DeviceWorker
    from jupyter_ktune.tune import tune

    with DeviceWorker() as w:
        t0 = time.perf_counter()
        def on_result(p) -> None:
            first = p.result.reason.splitlines()[0][:90] if p.result.reason else ""
            log(f"  {p.done:4d} {p.result.config.label():8s} {p.result.status.value:17s} {first}")

        report = tune(spec, "exhaustive", store=store, workers=[w], top_k=0, on_result=on_result)
        elapsed = time.perf_counter() - t0
        restarts, starts = w.restarts, list(w.start_times_s)
    got = _rows(store, spec)
    rows = got["rows"]
    n = len(spec.space.params[0].values)
    healthy = [k for k in range(n) if k % 16 not in faults]
    faulty = [k for k in range(n) if k % 16 in faults]
    by_fault = {}
    for f, name in faults.items():
        ks = [k for k in faulty if k % 16 == f]
        by_fault[name] = dict(Counter(rows[k].status.value for k in ks if k in rows))
    return {
        "variants_run": len(report.evaluations), "variants_in_space": n,
        "healthy": len(healthy), "healthy_measured": sum(
            1 for k in healthy if k in rows and rows[k].ok),
        "faulty": len(faulty), "faults_survived": sum(
            1 for k in faulty if k in rows and rows[k].status.failed and rows[k].reason),
        "statuses_by_fault": by_fault,
        "results_lost": n - len(rows), "store_integrity": got["integrity"],
        "restarts": restarts, "start_s": [round(s, 3) for s in starts],
        "start_s_median": round(float(np.median(starts)), 3) if starts else None,
        "start_s_max": round(max(starts), 3) if starts else None,
        "elapsed_s": round(elapsed, 1),
    }


def oom_phase(spec, store: Path) -> dict:
    """Phase 2 (GPU): variants whose inputs cannot be allocated on the device."""
    from jupyter_ktune.runner.client import DeviceWorker
    from jupyter_ktune.tune import tune

    with DeviceWorker() as w:
        report = tune(spec, "exhaustive", store=store, workers=[w], top_k=0)
    rows = _rows(store, spec)["rows"]
    return {"variants_run": len(report.evaluations),
            "statuses": dict(Counter(r.status.value for r in rows.values())),
            "reason": next((r.reason[:200] for r in rows.values()), ""),
            "results_lost": 4 - len(rows)}


def kill_phase(spec, store: Path) -> dict:
    """Phase 3: SIGKILL the worker after 12 results; then a second sweep resumes."""
    from jupyter_ktune.runner.client import DeviceWorker
    from jupyter_ktune.tune import tune

    killed = []
    with DeviceWorker() as w:
        def on_result(p):
            if p.done == 12 and not killed:
                killed.append(w.pid)
                threading.Timer(0.02, os.kill, (w.pid, signal.SIGKILL)).start()

        first = tune(spec, "exhaustive", store=store, workers=[w], top_k=0, on_result=on_result)
        rows = _rows(store, spec)["rows"]
        again = tune(spec, "exhaustive", store=store, workers=[w], top_k=0)
    return {"variants_run": len(first.evaluations), "worker_killed": bool(killed),
            "stored": len(rows), "results_lost": 40 - len(rows),
            "crashed_by_the_kill": sum(1 for r in rows.values() if not r.ok),
            "resumed_cached": sum(e.cached for e in again.evaluations),
            "resumed_timed_again": sum(not e.cached for e in again.evaluations)}


def main(argv: list[str] | None = None) -> int:
    """Run the phases and write ``summary.json`` and ``raw_output.txt`` to ``--out``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fake", action="store_true", help="CPU run with the fake backend")
    ap.add_argument("--variants", type=int, default=112)
    ap.add_argument("--timeout", type=float, default=None,
                    help="per-variant timeout, s (default 1 with --fake, 10 on a GPU)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--phases", type=int, nargs="*", default=[1, 2, 3], help="which phases to run")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    timeout = args.timeout or (1.0 if args.fake else 10.0)
    raw = open(args.out / "raw_output.txt", "w")  # noqa: SIM115

    def log(text: str) -> None:
        print(text, flush=True)
        raw.write(text + "\n")
        raw.flush()

    main_spec, healthy, oom, faults = _specs(args.fake, args.variants, timeout)
    for old in args.out.glob("*.sqlite*"):
        old.unlink()
    summary: dict = {"backend": main_spec.backend, "timeout_s": timeout,
                     "python": sys.version.split()[0], "host": os.uname().nodename}
    if 1 in args.phases:
        log(f"phase 1: {args.variants} variants, faults by K % 16: {faults}")
        summary["fault_sweep"] = fault_sweep(main_spec, faults, args.out / "faults.sqlite", log)
        (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    if oom is not None and 2 in args.phases:
        log("phase 2: inputs needing 1 TiB of device memory")
        summary["out_of_memory"] = oom_phase(oom, args.out / "oom.sqlite")
    if 3 in args.phases:
        log("phase 3: kill -9 of the worker mid-sweep, then resume")
        summary["worker_kill"] = kill_phase(healthy, args.out / "kill.sqlite")
    text = json.dumps(summary, indent=1)
    log(text)
    (args.out / "summary.json").write_text(text + "\n")
    fs = summary.get("fault_sweep", {})
    ok = (fs.get("results_lost", 0) == 0 and fs.get("healthy_measured") == fs.get("healthy")
          and fs.get("faults_survived") == fs.get("faulty")
          and summary.get("worker_kill", {}).get("results_lost", 0) == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
