"""Fault injection (issues 9, 15): faulting variants, wrong kernels, a kill -9; what is said.

Usage::

    python bench/fault_injection.py --out DIR            # CUDA C++ cells on a GPU (CuPy)
    python bench/fault_injection.py --fake --out DIR     # the same sweeps on CPU, fake backend

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
sweep again, which must take every stored result from the store.

Phase 4 (issue 15) plants the faults a verdict must name: a sweep of 20 variants where ``K % 5``
picks healthy, writes NaN (from arithmetic), writes 24 elements past the end of ``y``, writes 8
elements 300 before its start, or clobbers the input ``x``; then 2 variants whose reference
sleeps past ``--timeout`` (4x it), and 3 Interrupts (SIGINT to this process, as Jupyter's
Interrupt) in the middle of a hanging run, each followed by a healthy run that must get its own
answer.

Every variant of phases 1, 2 and 4 is classified from its status and reason text
(``bench/fault_confusion.py``) into a confusion matrix: rows the planted fault, columns the reason
given. Figures: variants run, faults survived (faulty variants stored with a failure status while
the sweep went on), healthy variants measured, the matrix and how many variants landed where
planted, worker restarts and each start's seconds (all phases), results lost (rows expected
minus rows in the store), and the resumed sweep's cached count. Target: every variant
classified as what it is, 0 results lost, every restart under 5 s. Written to
``DIR/summary.json`` (and ``DIR/confusion.txt``) and printed.
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
sys.path.insert(0, str(ROOT / "bench"))

from fault_cells import (  # noqa: E402
    CUDA_SRC,
    EXPECTED,
    FAKE_FAULTS,
    GPU_FAULTS,
    HEALTHY_SRC,
    VERDICT_KINDS,
    VERDICT_SRC,
)
from fault_confusion import Confusion, merge  # noqa: E402

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


SLOW_REFERENCE_S = 4.0  # set by main() to 4x the slow-reference phase's timeout


def slow_reference(x, y, n):
    """The right answer, computed too slowly (past the phase's limit)."""
    time.sleep(SLOW_REFERENCE_S)
    return 2 * x


def _specs(fake: bool, n: int, timeout: float):
    from jupyter_ktune.api import parse_cell

    if fake:
        sys.path.insert(0, str(ROOT / "tests"))
        os.environ["KTUNE_BACKEND_MODULES"] = "fake=ktune_fake_backend"
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT / "tests"), str(ROOT), os.environ.get("PYTHONPATH", "")])
        import test_reliability_faults as t

        src = t.SRC.replace(f"range(0, {t.N_VARIANTS})", f"range(0, {n})")
        line = "scale --backend fake --inputs inputs --reference reference --out y"
        ns = {"inputs": fake_inputs, "reference": reference}
        ns["slow_reference"] = slow_reference
        line = f"{line} --budget-ms 1 --timeout {timeout}"
        return {"main": parse_cell(line, src, ns),
                "healthy": parse_cell(line, HEALTHY_SRC["fake"], ns), "oom": None,
                "verdicts": parse_cell(line, VERDICT_SRC["fake"], ns),
                "slow_reference": _slow_reference_spec(line, HEALTHY_SRC["fake"], ns),
                "faults": FAKE_FAULTS}
    line = "scale --backend cuda --inputs inputs --reference reference --out y --budget-ms 20"
    ns = {"inputs": inputs, "reference": reference, "huge_inputs": huge_inputs,
          "slow_reference": slow_reference}
    line = f"{line} --timeout {timeout}"
    return {"main": parse_cell(line, CUDA_SRC % {"n": n}, ns),
            "healthy": parse_cell(line, HEALTHY_SRC["cuda"], ns),
            "oom": parse_cell(line.replace("--inputs inputs", "--inputs huge_inputs"),
                              HEALTHY_SRC["cuda"].replace("0, 40", "0, 4"), ns),
            "verdicts": parse_cell(line, VERDICT_SRC["cuda"], ns),
            "slow_reference": _slow_reference_spec(line, HEALTHY_SRC["cuda"], ns),
            "faults": GPU_FAULTS}


def _slow_reference_spec(line: str, src: str, ns: dict):
    """Two variants whose reference outlasts its phase's limit (capped at 2 s to keep it short)."""
    from jupyter_ktune.api import parse_cell

    head, _, timeout = line.rpartition(" --timeout ")
    limit = min(float(timeout), 2.0)
    global SLOW_REFERENCE_S
    SLOW_REFERENCE_S = 4 * limit
    return parse_cell(f"{head.replace('--reference reference', '--reference slow_reference')} "
                      f"--timeout {limit:g}", src.replace("0, 40", "0, 2"), ns)


def _rows(store_path: Path, spec) -> dict:
    from jupyter_ktune.tuning import Store

    with Store(store_path) as store:
        rows = [r for k in store.keys() if k.source_hash == spec.source_hash
                for r in store.results(k)]
        integrity = store._conn.execute("PRAGMA integrity_check").fetchone()[0]
    return {"rows": {r.config["K"]: r for r in rows}, "integrity": integrity}


def fault_sweep(spec, faults: dict, store: Path, log) -> dict:
    """Phase 1: the sweep of faulty and healthy variants on one worker."""
    from jupyter_ktune.runner.client import DeviceWorker
    from jupyter_ktune.tuning import tune

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
    confusion = Confusion()
    for k, r in sorted(rows.items()):
        planted = faults.get(k % 16, "healthy")
        confusion.add_result(planted, EXPECTED[planted], r.status.value, r.reason)
    return confusion, {
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
    from jupyter_ktune.tuning import tune

    with DeviceWorker() as w:
        report = tune(spec, "exhaustive", store=store, workers=[w], top_k=0)
        starts = list(w.start_times_s)
    rows = _rows(store, spec)["rows"]
    confusion = Confusion()
    for r in rows.values():
        confusion.add_result("inputs need 1 TiB", EXPECTED["inputs need 1 TiB"], r.status.value,
                             r.reason)
    return confusion, starts, {"variants_run": len(report.evaluations),
            "statuses": dict(Counter(r.status.value for r in rows.values())),
            "reason": next((r.reason[:200] for r in rows.values()), ""),
            "results_lost": 4 - len(rows)}


def kill_phase(spec, store: Path) -> dict:
    """Phase 3: SIGKILL the worker after 12 results; then a second sweep resumes."""
    from jupyter_ktune.runner.client import DeviceWorker
    from jupyter_ktune.tuning import tune

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


def verdict_phase(specs: dict, store: Path, log) -> tuple[Confusion, dict]:
    """Phase 4: wrong kernels (NaN, past the end, before the start, an input changed), a slow
    reference, and Interrupts in the middle of a hanging run."""
    from jupyter_ktune.runner.client import DeviceWorker
    from jupyter_ktune.tuning import tune

    confusion = Confusion()
    with DeviceWorker() as w:
        for name in ("verdicts", "slow_reference"):
            spec = specs[name]
            tune(spec, "exhaustive", store=store, workers=[w], top_k=0)
            for k, r in sorted(_rows(store, spec)["rows"].items()):
                planted = VERDICT_KINDS[k % 5] if name == "verdicts" else "slow reference"
                confusion.add_result(planted, EXPECTED[planted], r.status.value, r.reason)
                log(f"  {planted:24s} K={k:<3d} {r.status.value:14s} {r.reason[:80]}")
        interrupts = [_interrupt_once(w, specs, i) for i in range(3)]
        for given, reason in interrupts:
            confusion.add("Interrupt mid-run", EXPECTED["Interrupt mid-run"], given, reason)
            log(f"  Interrupt mid-run        {given}: {reason[:80]}")
        starts, restarts = list(w.start_times_s), w.restarts
    return confusion, {"restarts": restarts, "start_s": [round(x, 3) for x in starts]}


def _interrupt_once(w, specs: dict, i: int) -> tuple[str, str]:
    """SIGINT this process (Jupyter's Interrupt) 0.5 s into a hanging run, then run a healthy
    variant: its reply must be its own (its config, verified), not the interrupted one's."""
    from jupyter_ktune.results import Status

    main, healthy = specs["main"], specs["healthy"]
    hang = main.space.config(K=3)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        r = w.run(main, hang)
        return "not interrupted", f"the run returned {r.status.value}: {r.reason}"
    except KeyboardInterrupt:
        pass
    finally:
        timer.cancel()
    want = healthy.space.config(K=i)
    after = w.run(healthy, want)
    if (after.config == dict(want) and after.status is Status.OK
            and after.verification is not None and after.verification.passed):
        return ("interrupted, next reply in step",
                f"KeyboardInterrupt; the next request got its own result ({after.status.value})")
    return "out of step", f"the next request got {after.config}: {after.status.value}"


def main(argv: list[str] | None = None) -> int:
    """Run the phases and write ``summary.json`` and ``raw_output.txt`` to ``--out``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fake", action="store_true", help="CPU run with the fake backend")
    ap.add_argument("--variants", type=int, default=112)
    ap.add_argument("--timeout", type=float, default=None,
                    help="per-variant timeout, s (default 1 with --fake, 10 on a GPU)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--phases", type=int, nargs="*", default=[1, 2, 3, 4],
                    help="which phases to run")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    timeout = args.timeout or (1.0 if args.fake else 10.0)
    raw = open(args.out / "raw_output.txt", "w")  # noqa: SIM115

    def log(text: str) -> None:
        print(text, flush=True)
        raw.write(text + "\n")
        raw.flush()

    specs = _specs(args.fake, args.variants, timeout)
    main_spec, faults = specs["main"], specs["faults"]
    for old in args.out.glob("*.sqlite*"):
        old.unlink()
    summary: dict = {"backend": main_spec.backend, "timeout_s": timeout,
                     "python": sys.version.split()[0], "host": os.uname().nodename}
    matrices: list[Confusion] = []
    starts: list[float] = []
    if 1 in args.phases:
        log(f"phase 1: {args.variants} variants, faults by K % 16: {faults}")
        confusion, summary["fault_sweep"] = fault_sweep(main_spec, faults,
                                                        args.out / "faults.sqlite", log)
        matrices.append(confusion)
        starts += summary["fault_sweep"]["start_s"]
        (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    if specs["oom"] is not None and 2 in args.phases:
        log("phase 2: inputs needing 1 TiB of device memory")
        confusion, oom_starts, summary["out_of_memory"] = oom_phase(specs["oom"],
                                                                    args.out / "oom.sqlite")
        matrices.append(confusion)
        starts += oom_starts
    if 3 in args.phases:
        log("phase 3: kill -9 of the worker mid-sweep, then resume")
        summary["worker_kill"] = kill_phase(specs["healthy"], args.out / "kill.sqlite")
    if 4 in args.phases:
        log(f"phase 4: verdicts by K % 5: {VERDICT_KINDS}; slow reference; Interrupt mid-run")
        confusion, summary["verdicts"] = verdict_phase(specs, args.out / "verdicts.sqlite", log)
        matrices.append(confusion)
        starts += summary["verdicts"]["start_s"]
    matrix = merge(matrices)
    summary["confusion"] = matrix.to_json()
    summary["restart_s_max_all_phases"] = round(max(starts), 3) if starts else None
    text = json.dumps(summary, indent=1)
    log(text)
    (args.out / "summary.json").write_text(text + "\n")
    (args.out / "confusion.txt").write_text(matrix.table() + "\n\n" + matrix.sparse() + "\n")
    log(matrix.sparse())
    fs = summary.get("fault_sweep", {})
    ok = (fs.get("results_lost", 0) == 0 and fs.get("healthy_measured") == fs.get("healthy")
          and fs.get("faults_survived") == fs.get("faulty")
          and summary.get("worker_kill", {}).get("results_lost", 0) == 0
          and matrix.right == matrix.total and (not starts or max(starts) < 5.0))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
