"""Kernels that carry their own ``@triton.autotune`` list: a ktune sweep over that list vs the
kernel's own autotuner, each kernel from a fresh process with nothing set apart (issue 33), and,
with ``--warm``, back to back in one process as a second, labelled column (issue 21).

From a fresh process (the default, ``bench/first_minute.py``'s sides): per kernel, a notebook
process (``%load_ext``, the cell, its first result, then Autotune over the whole list) against a
process that imports the package and makes the decorated kernel's first call, each with empty
caches and its clock started when it was spawned: interpreter start, the package's import, the
device worker's and the compile pool's start all count. Both ratios are reported: process start
to the winner (``fresh``), and Autotune's press to the sweep's end against the autotuned call
once torch and the inputs are there (``notebook order``).

Back to back (``--warm``), what follows:

Entries come from the compatibility corpus (``tests/corpus``: published kernels read from the
installed packages, e.g. liger-kernel) by id, plus ``matmul`` (the project's bf16 matmul with the
72-config list of bench/sweep_vs_autotune.py). For each kernel:

1. ktune: ``tune(spec, "exhaustive")`` over the space the decorator declares (verification on,
   racing, the top 3 re-timed), with the per-phase breakdown (bench/sweep_phases.py);
2. ``triton.autotune``: the package's own decorated kernel, its cache emptied, called once on
   the same inputs (as torch tensors on the GPU) with the cell's grid;
3. autotune's winner timed by ktune's protocol beside ktune's winner (same method).

The device worker's start is measured once, before the first kernel, and stated apart (this
column only). The summary is the median over the kernels of autotune wall / ktune wall.

Examples
--------
    python3 bench/corpus_vs_autotune.py --check                         # CPU: resolve entries
    python3 bench/corpus_vs_autotune.py liger-dyt fla-softmax --out $OUT  # H200, fresh
    python3 bench/corpus_vs_autotune.py --warm --out $OUT               # H200, both columns
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]
# the worker unpickles the entries' inputs/reference by reference: it must import corpus.* too
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT / "tests"), str(ROOT / "bench"), *filter(None, [os.environ.get("PYTHONPATH")])])


def corpus_entries() -> dict[str, Any]:
    """The corpus by id ({} when this checkout has no tests/corpus yet)."""
    try:
        from corpus.entries import BY_ID
    except ImportError:
        return {}
    return dict(BY_ID)


def build(name: str, size: int) -> tuple[Any, Any]:
    """(KernelSpec, the package's autotuned kernel object or a builder) for ``name``."""
    import jupyter_ktune

    if name == "matmul":
        import sweep_vs_autotune as sva

        inputs, reference = sva.make_io(size)
        spec = jupyter_ktune.parse_cell(
            "matmul --backend triton --inputs inputs --reference reference --out c "
            "--budget-ms 10", sva.SPACE + sva.KERNEL, {"inputs": inputs, "reference": reference})
        return spec, "matmul"
    entry = corpus_entries()[name]
    line, body, _changed = entry.cell()
    if "@triton.autotune" not in body and "autotune" not in entry.construct:
        raise LookupError(f"{name} carries no autotune list")
    spec = jupyter_ktune.parse_cell(line, body, {"inputs": entry.inputs,
                                                 "reference": entry.reference})
    module, _, fn = entry.ref.rpartition(":")
    return spec, getattr(importlib.import_module(module), fn)


def ktune_side(spec: Any, store: Path) -> dict:
    import sweep_phases

    from jupyter_ktune.tuning import tune

    t0 = time.perf_counter()
    report = tune(spec, "exhaustive", store=store, top_k=3)
    wall = time.perf_counter() - t0
    best = report.best
    failed = [e.result for e in report.evaluations if e.result.status.value != "ok"]
    return {"wall_s": wall, "configs": report.valid_configs, "counts": dict(report.counts),
            "first_failure": failed[0].reason[:400] if failed else None,
            "winner": dict(best.config) if best else None,
            "winner_ms": best.median_ms if best else None,
            "first_result_s": report.evaluations[0].at_s if report.evaluations else None,
            "phases_s": sweep_phases.breakdown(report, wall),
            "waits_s": report.info.get("waits_s"), "timeline": report.info.get("timeline"),
            "final_phases_ms": [{k: round(v, 2) for k, v in r.extra.get("phases_ms", {}).items()}
                                for r in report.final],
            # timings whose events timed the host (measure.timing: HOST-BOUND), first pass and
            # re-timings: a sweep's compiles share the host with the worker
            "host_bound": [sum("HOST-BOUND" in (r.method or "") for r in rs) for rs in
                           ([e.result for e in report.evaluations], report.final)],
            "worker_ms": sweep_phases.worker_ms(report),
            "sweep_ms": {json.dumps(dict(sorted(e.result.config.items()))): e.result.median_ms
                         for e in report.evaluations if e.result.ok},
            # each first-pass timing's empty-kernel floor (us), read from its method text: a
            # floor far above the few us of a busy GPU says the events timed the host
            "sweep_floor_us": {json.dumps(dict(sorted(e.result.config.items()))): _floor_us(
                e.result.method) for e in report.evaluations if e.result.ok},
            "held": sum("behind a hold" in (e.result.method or "") for e in report.evaluations)}


def _floor_us(method: str | None) -> float | None:
    found = re.search(r"empty-kernel floor ([0-9.]+) us", method or "")
    return float(found.group(1)) if found else None


def autotuner_of(kernel: Any) -> Any:
    """The ``Autotuner`` inside a decorated kernel (``@triton.heuristics`` wraps it as ``fn``)."""
    k = kernel
    while k is not None and not hasattr(k, "configs"):
        k = getattr(k, "fn", None)
    if k is None:
        raise LookupError(f"{kernel!r} holds no triton.autotune")
    return k


def autotune_side(spec: Any, kernel: Any, size: int) -> dict:
    """The kernel's own autotuner, its cache emptied, first call timed.

    A constexpr the autotune list leaves to the caller but ktune's space tunes (fla's cumsum:
    ``BT``, which is in autotune's ``key``) is swept the way a user of autotune sweeps it: one
    autotuned call per value, the walls summed, the winner the fastest of the calls' winners
    by autotune's own timings. Both sides then cover the same space."""
    import itertools

    import numpy as np
    import torch

    if kernel == "matmul":
        import sweep_vs_autotune as sva

        return sva.triton_autotune(size)
    tuner = autotuner_of(kernel)
    args = {k: torch.from_numpy(np.ascontiguousarray(v)).cuda() if isinstance(v, np.ndarray)
            else v for k, v in spec.inputs().items()}
    env = {k: (v.shape[0] if hasattr(v, "shape") and v.ndim else v) for k, v in args.items()}
    names = list(tuner.fn.arg_names)
    listed = {k for c in tuner.configs for k in c.kwargs}
    outer = [n for n in spec.space.names if n in names and n not in args and n not in listed]
    combos = list(itertools.product(*(spec.space.param(n).values for n in outer)))
    tuner.cache = {}
    wall, best, best_ms = 0.0, None, float("inf")
    for combo in combos:
        fixed = dict(zip(outer, combo, strict=True))

        def grid(meta: dict, fixed: dict = fixed) -> Any:
            return (1,) if spec.grid is None else spec.grid({**env, **fixed, **meta})

        call = {k: v for k, v in args.items() if k in names} | fixed
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        kernel[grid](**call)
        torch.cuda.synchronize()
        wall += time.perf_counter() - t0
        timings = getattr(tuner, "configs_timings", None) or {}
        pick = tuner.best_config
        t = timings.get(pick, float("inf"))  # do_bench gives a float or quantiles
        pick_ms = min(t) if isinstance(t, (list, tuple)) else float(t)
        if best is None or pick_ms < best_ms:
            best, best_ms = (pick, fixed), pick_ms
    cfg, fixed = best
    winner = dict(cfg.kwargs) | fixed | {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
    return {"wall_s": wall, "configs": len(tuner.configs) * len(combos), "winner": winner,
            "autotuned_calls": len(combos)}


def same_method(spec: Any, winner: dict) -> float | None:
    """autotune's winner timed by ktune's protocol (None: not in ktune's space)."""
    from jupyter_ktune.api import run_kernel

    try:
        config = spec.space.config({k: v for k, v in winner.items() if k in spec.space.names})
    except Exception:  # noqa: BLE001 - a winner outside the declared space
        return None
    r = run_kernel(spec.with_options(budget_ms=spec.options.budget_ms * 5), config)
    return r.measurement.timing.median_ms if r.measurement else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="corpus ids and/or 'matmul' (default: matmul and "
                    "every corpus entry that carries an autotune list)")
    ap.add_argument("--size", type=int, default=4096, help="the matmul's M = N = K")
    ap.add_argument("--check", action="store_true", help="CPU: build every spec, no GPU")
    ap.add_argument("--reps", type=int, default=1,
                    help="fresh processes per side and kernel (the medians are reported)")
    ap.add_argument("--warm", action="store_true", help="also the back-to-back column: every "
                    "kernel in this one process, the worker's and the pool's start apart")
    ap.add_argument("--no-fresh", action="store_true", help="the back-to-back column only")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--quick-launch", choices=("on", "off"),
                    help="set KTUNE_QUICK_LAUNCH for this run (default: as the environment has it)")
    ap.add_argument("--pipelined-steps", choices=("on", "off"),
                    help="set KTUNE_PIPELINED_STEPS for this run (default: on)")
    ap.add_argument("--arms", help="an interleaved A/B: e.g. 'off,on,on,off' runs this benchmark "
                    "once per arm, each in a fresh process with cold caches and that "
                    "--quick-launch (or --arm-switch), and prints the arms' ratios side by side")
    ap.add_argument("--arm-switch", choices=("quick-launch", "pipelined-steps"),
                    default="quick-launch", help="what the arms of --arms turn on and off")
    a = ap.parse_args()
    if a.arms:
        return run_arms(a)
    if a.quick_launch:
        os.environ["KTUNE_QUICK_LAUNCH"] = "1" if a.quick_launch == "on" else "0"
    if a.pipelined_steps:
        os.environ["KTUNE_PIPELINED_STEPS"] = "1" if a.pipelined_steps == "on" else "0"
    corpus = corpus_entries()
    names = a.names or ["matmul"] + [i for i, e in corpus.items()
                                     if e.backend == "triton" and "autotune" in e.construct]
    if a.check:
        for n in names:
            try:
                spec, _k = build(n, 256)
                print(f"{n}: {spec.space.size} configs in the space; grid "
                      f"{spec.grid.text if spec.grid else '-'}")
            except Exception as exc:  # noqa: BLE001 - a plan, not a verdict
                print(f"{n}: cannot build yet ({type(exc).__name__}: {str(exc)[:120]})")
        return 0
    out: dict[str, Any] = {"fresh": {}, "warm": None}
    if not a.no_fresh:
        out["fresh"] = fresh_column([n for n in names if n != "matmul"], a.reps, a.out, out)
    if a.warm or a.no_fresh:
        out["warm"] = warm_column(names, a)
    print_summary(out)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "corpus_vs_autotune.json").write_text(json.dumps(out, indent=1, default=str))
    return 0


def fresh_column(names: list[str], reps: int, where: Path | None, out: dict) -> dict:
    """Each kernel from fresh processes (``first_minute.compare_kernel``): nothing set apart.
    ``matmul`` (this project's own) is left to the back-to-back column."""
    import first_minute

    fresh: dict[str, Any] = {}
    for n in names:
        try:
            fresh[n] = first_minute.compare_kernel(n, reps, reps)
        except Exception as exc:  # noqa: BLE001 - one kernel's failure is a finding
            fresh[n] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        if where:
            where.mkdir(parents=True, exist_ok=True)
            (where / "corpus_vs_autotune.json").write_text(
                json.dumps(out | {"fresh": fresh}, indent=1, default=str))
    return fresh


def print_summary(out: dict) -> None:
    """The short table last: per kernel, the fresh-process ratios and the back-to-back one."""
    warm = (out.get("warm") or {}).get("kernels", {})
    names = list(dict.fromkeys([*out["fresh"], *warm]))

    def f(x: Any, w: int, p: int = 2) -> str:
        return f"{x:{w}.{p}f}" if isinstance(x, (int, float)) else f"{'-':>{w}}"

    print(f"\n{'kernel':18} {'configs':>7} {'fresh ktune s':>13} {'fresh autotune s':>16} "
          f"{'fresh ratio':>11} {'wait/1st ok/report/live s':>25} {'autotune call s':>15} "
          f"{'nb-order ratio':>14} {'b2b ratio':>9}  winners us "
          "(ktune's / autotune's, by ktune's protocol)")
    fresh_ratios, order_ratios = [], []
    for n in names:
        s = out["fresh"].get(n, {}).get("summary", {})
        w = warm.get(n, {})
        fresh_ratios += [s["fresh_ratio"]] if s.get("fresh_ratio") else []
        order_ratios += [s["notebook_order_ratio"]] if s.get("notebook_order_ratio") else []
        print(f"{n:18} {f(s.get('sweep_configs') or (w.get('ktune') or {}).get('configs'), 7, 0)} "
              f"{f(s.get('ktune_fresh_total_s'), 13, 1)} {f(s.get('anchor_fresh_total_s'), 16, 1)} "
              f"{f(s.get('fresh_ratio'), 11)} {f(s.get('press_wait_s'), 4)}/"
              f"{f(s.get('autotune_first_ok_s'), 6)}/"
              f"{f(s.get('sweep_report_s'), 6)}/{f(s.get('sweep_wall_s'), 6)} "
              f"{f(s.get('anchor_call_s'), 15)} {f(s.get('notebook_order_ratio'), 14)} "
              f"{f(w.get('ratio'), 9)}  {f((s.get('winner_ms_by_ktune') or 0) * 1e3, 1, 1)} / "
              f"{f((s.get('anchor_winner_ms_by_ktune') or 0) * 1e3, 1, 1)}"
              + (f"  {out['fresh'][n]['error'][:80]}" if "error" in out["fresh"].get(n, {})
                 else ""))
    if out["fresh"]:
        from first_phases import print_first_cells

        print_first_cells(out["fresh"])
    if fresh_ratios:
        print(f"median over {len(fresh_ratios)} kernels, from a fresh process: "
              f"{statistics.median(fresh_ratios):.2f}x (goal >= 1.5); in the notebook's order: "
              f"{statistics.median(order_ratios) if order_ratios else float('nan'):.2f}x "
              "(goal >= 3)")
    if warm:
        print(f"back to back in one process, the worker's and pool's start apart: median "
              f"{out['warm'].get('median_ratio')}")


def warm_column(names: list[str], a: argparse.Namespace) -> dict:
    """Every kernel back to back in this process (the issue 21 protocol): worker and pool
    started once, apart; each kernel cold on both sides by its own Triton cache."""
    import sweep_phases

    tmp = Path(tempfile.mkdtemp(prefix="ktune-corpus-"))
    # One cache folder per side for the whole run: each kernel is cold on both sides (its own
    # source, never compiled before), and Triton's launcher and driver helpers are built once
    # per side. The worker and the compile pool read the folder when they start, so it must
    # stay the same for every ktune sweep (the autotune side sets its own around its call).
    ours, theirs = str(tmp / "ktune-cache"), str(tmp / "autotune-cache")
    os.environ["TRITON_CACHE_DIR"] = ours
    out: dict[str, Any] = {"worker_start_s": sweep_phases.start_worker("triton"),
                           "pool_start_s": sweep_phases.start_pool("triton"), "kernels": {}}
    print(f"worker start {out['worker_start_s']:.1f} s, compile pool start "
          f"{out['pool_start_s']:.1f} s (once per session, apart)", flush=True)
    for n in names:
        row: dict[str, Any] = {}
        try:
            spec, kernel = build(n, a.size)
            os.environ["TRITON_CACHE_DIR"] = ours
            # the pool imports the cell's packages, as it has once the cell ran in a notebook
            row["pool_preload_s"] = sweep_phases.preload_pool(spec)
            row["ktune"] = ktune_side(spec, tmp / f"{n}.sqlite")
            os.environ["TRITON_CACHE_DIR"] = theirs
            row["autotune"] = autotune_side(spec, kernel, a.size)
            os.environ["TRITON_CACHE_DIR"] = ours
            row["autotune_winner_by_ktune_ms"] = same_method(spec, row["autotune"]["winner"])
            # the same config's median in ktune's sweep: a second reading, same protocol
            row["autotune_winner_in_sweep_ms"] = row["ktune"]["sweep_ms"].get(json.dumps(dict(
                sorted(row["autotune"]["winner"].items()))))
            row["ratio"] = row["autotune"]["wall_s"] / row["ktune"]["wall_s"]
            row["ratio_counting_preload"] = row["autotune"]["wall_s"] / (
                row["ktune"]["wall_s"] + row["pool_preload_s"])
        except Exception as exc:  # noqa: BLE001 - one kernel's failure is a finding
            row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        out["kernels"][n] = row
        print(n, json.dumps({k: v for k, v in row.items() if k != "ktune"}, default=str)[:600])
        k = row.get("ktune") or {}
        print(n, json.dumps({x: y for x, y in k.items() if x not in ("timeline", "sweep_ms")},
                            default=str)[:1500])
        if k.get("timeline") and k["configs"] <= 10:  # where a short sweep's wall went
            from jupyter_ktune.tuning.timeline import timeline_text

            print(timeline_text(k["timeline"], limit=200), flush=True)
    ratios = [r["ratio"] for r in out["kernels"].values() if "ratio" in r]
    out["median_ratio"] = statistics.median(ratios) if ratios else None
    with_preload = [r["ratio_counting_preload"] for r in out["kernels"].values() if "ratio" in r]
    out["median_ratio_counting_preload"] = statistics.median(with_preload) if ratios else None
    return out


def run_arms(a: argparse.Namespace) -> int:
    """Each arm in its own process, one after the other (back to back on one machine, so the
    arms share its state: clocks, power, other load), then one table: the arms' sweep walls,
    first results and ratios per kernel, and each arm's median ratio."""
    import subprocess

    arms = [x.strip() for x in a.arms.split(",") if x.strip()]
    if not arms or any(x not in ("on", "off") for x in arms):
        raise SystemExit("[bench] --arms takes a comma list of on/off, e.g. --arms off,on,on,off")
    results: list[tuple[str, dict]] = []
    for i, arm in enumerate(arms):
        out = (a.out or Path(tempfile.mkdtemp(prefix="ktune-arms-"))) / f"arm{i}-{arm}"
        argv = [sys.executable, __file__, *a.names, "--size", str(a.size), f"--{a.arm_switch}",
                arm, "--no-fresh", "--out", str(out)]
        print(f"== arm {i}: {a.arm_switch} {arm}: {' '.join(argv)}", flush=True)
        rc = subprocess.run(argv).returncode
        path = out / "corpus_vs_autotune.json"
        results.append((arm, (json.loads(path.read_text()).get("warm") or {}) if path.exists()
                           else {}))
        print(f"== arm {i} rc={rc}", flush=True)
    names = list(dict.fromkeys(n for _arm, r in results for n in r.get("kernels", {})))
    arms = " ".join(f"{f'{i}:{arm}':>22}" for i, (arm, _r) in enumerate(results))
    print("\nkernel                 " + arms + "   (ktune s / first s / ratio)")
    for n in names:
        cells = []
        for _arm, r in results:
            k = r.get("kernels", {}).get(n, {})
            cells.append(f"{k['ktune']['wall_s']:6.2f} {k['ktune']['first_result_s'] or 0:5.2f} "
                         f"{k['ratio']:5.2f}x" if "ratio" in k else f"{'-':>20}")
        print(f"{n:22} " + " ".join(f"{c:>22}" for c in cells))
    print("median ratio per arm: " + ", ".join(
        f"{i}:{arm} {r.get('median_ratio') or float('nan'):.2f}x" for i, (arm, r) in
        enumerate(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
