"""The first minute, as a user waits for it: every side a fresh process, nothing set apart.

Questions (issue 33), each answered side by side with the anchor in one run:

1. How long from a fresh notebook's start to the first verified result of its first
   ``%%kernel`` cell (a Triton kernel read from an installed package, and Kernel Tuner's CUDA
   convolution)? Goal: Triton <= 3 s, CUDA C++ <= 2 s (median of the fresh processes).
2. How long from pressing Autotune on that panel to the sweep's first verified result
   (goal <= 1 s) and to its end?
3. A published Triton kernel's own autotune list: ktune (cell run, then Autotune) against
   ``triton.autotune`` (the package's decorated kernel, first call), in the notebook's order
   (Autotune press to sweep end, against autotune's first call once torch and the inputs are
   there; goal >= 3x) and from a fresh process (process start to the winner on both sides;
   goal >= 1.5x), with the winners timed by ktune's protocol.
4. A published CUDA kernel's space: ktune against Kernel Tuner's brute force, both from a fresh
   process (goal >= 2x), same winner.

Each ktune side is one fresh Python process that does what a notebook does, through IPython's
shell: ``%load_ext jupyter_ktune``, the inputs cell, the ``%%kernel`` cell (its live panel, the
first result), then ``panel.tune("exhaustive")`` as the Autotune button runs it. Its clock
starts when the parent spawns it, so interpreter start and every import count. Caches (Triton,
CuPy, ktune's, the ceilings) are empty folders per process: a user's very first minute. Before
a kernel's first pair, one untimed process imports what both sides import, so the OS file cache
is as warm for the first side as for the second (:func:`files_side`).
Every fixed cost is a phase of the first result (``RunResult.extra["phases_ms"]``) and of the
timeline printed here, never subtracted.

Examples
--------
    python3 bench/first_minute.py --check                       # CPU: build the cells only
    python3 bench/run.py first_minute --out $OUT                # H200, with the wheelhouse
    python3 bench/first_minute.py --bytecode --reps 3 --out $OUT  # bytecode as pip leaves it
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from first_minute_cells import FLA_MATMUL, cell
from first_minute_targets import print_verdicts
from first_minute_trace import guest_after, trace_cell, trace_tune, worker_start
from first_phases import median_phases, print_first_cells

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench"),
     *filter(None, [os.environ.get("PYTHONPATH")])])

T0_ENV = "KTUNE_BENCH_T0"  # the wall time at which the parent spawned this side


# -- one fresh process per side -----------------------------------------------------------
def since_spawn() -> float:
    return time.time() - float(os.environ.get(T0_ENV, time.time()))


def notebook_side(name: str, sweep: bool, opened_s: float = 0.0) -> dict:
    """A notebook's first minute in this (fresh) process, through IPython's shell.

    ``opened_s`` > 0: the notebook was opened, not new. Its kernel starts, the labextension
    sends the notebook's ``%%kernel`` cell to ``jupyter_ktune.prepare`` as it does at every
    kernel start (``labextension/src/prepare.ts``), and the user runs the cells ``opened_s``
    seconds after the kernel's process was spawned (reading the notebook meanwhile)."""
    marks: dict[str, float] = {"interpreter up": since_spawn()}
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    marks["IPython shell"] = since_spawn()
    line, body, inputs, reference = cell(name)
    if opened_s > 0:
        from jupyter_ktune.prepare import prepare

        prepare([f"%%kernel {line}\n{body}"])
        marks["kernel start: the notebook's cells sent"] = since_spawn()
        time.sleep(max(0.0, opened_s - since_spawn()))
        marks["the user runs the notebook"] = since_spawn()
    shell.run_line_magic("load_ext", "jupyter_ktune")
    marks["%load_ext jupyter_ktune"] = since_spawn()
    shell.user_ns.update(inputs=inputs, reference=reference)
    marks["inputs cell"] = since_spawn()
    spans = trace_cell()
    marks["%%kernel cell started"] = since_spawn()
    out = shell.run_cell_magic("kernel", line, body)
    marks["%%kernel cell: first result shown"] = since_spawn()
    panel = shell.user_ns.get("panel", out)
    # what the cell shows (a static report that follows the result is not waited for: the
    # user presses Autotune once the first result is there)
    first = panel.shown() if hasattr(panel, "shown") else panel
    row: dict[str, Any] = {
        "first_result_s": marks["%%kernel cell: first result shown"],
        "cell_wait_s": marks["%%kernel cell: first result shown"] - marks["%%kernel cell started"],
        "opened_s": opened_s,
        "first_status": first.status.value, "first_reason": (first.reason or "")[:300],
        "first_config": dict(first.config),
        "first_median_ms": first.median_ms,
        "first_method": first.measurement.provenance.method if first.measurement else None,
        "first_phases_ms": {k: round(v, 1) for k, v in (first.phases_ms or {}).items()},
        "worker_start_s": worker_start(),
        "inside_cell_s": {k: round(v, 3) for k, v in spans.items()},
        "marks_s": {k: round(v, 3) for k, v in marks.items()}}
    if sweep and hasattr(panel, "tune"):
        row["autotune_pressed_s"] = since_spawn()
        t0 = time.perf_counter()
        tail = trace_tune(panel, t0)
        report = panel.tune("exhaustive", budget=max(1, panel.session.spec.space.size))
        wall = time.perf_counter() - t0
        row["tune_tail"] = tail
        # the report's times count from the sweep's own start: its setup (the device, the
        # store, the strategy) before that start counts too, from the press
        setup = tail.get("sweep_run_returned_s", report.elapsed_s) - report.elapsed_s
        firsts = [setup + e.at_s for e in report.evaluations if e.result.ok]
        best = report.best
        row.update(sweep_wall_s=wall, sweep_first_ok_s=min(firsts) if firsts else None,
                   sweep_setup_s=setup, sweep_setup_ms=report.info.get("setup_ms"),
                   sweep_configs=len(report.evaluations), sweep_counts=dict(report.counts),
                   winner=dict(best.config) if best else None,
                   winner_ms=best.median_ms if best else None,
                   sweep_timeline=report.info.get("timeline"),
                   # compiles sent when the cell ran (tuning.compile_ahead) and the pool's share
                   compiled_ahead=report.info.get("compiled_ahead"),
                   pool_compiles=report.info.get("pool_compiles"),
                   fresh_total_s=since_spawn())
    row["ceilings_guest"] = guest_after(panel)
    return row


def autotune_side(name: str) -> dict:
    """The package's own ``@triton.autotune`` kernel in a fresh process, first call timed."""
    marks = {"interpreter up": since_spawn()}
    import corpus_vs_autotune as cva
    import torch  # noqa: F401 - what a user of the package imports first

    marks["import torch"] = since_spawn()
    import importlib

    from jupyter_ktune.backends.triton.backend import TritonBackend

    # the cell's inputs, reference and grid only: not ktune's reading of the autotune list
    # (a device worker's import of the package), no part of what an autotune user waits for
    TritonBackend.expand = lambda self, spec, namespace, describe=None: spec
    spec = _spec(name)
    ref = FLA_MATMUL if name == "fla-matmul" else cva.corpus_entries()[name].ref
    module, _, fn = ref.rpartition(":")
    kernel = getattr(importlib.import_module(module), fn)
    marks["kernel imported"] = since_spawn()
    got = cva.autotune_side(spec, kernel, 0)
    marks["autotuned call done"] = since_spawn()
    return {"call_s": got["wall_s"], "fresh_total_s": marks["autotuned call done"],
            "winner": got["winner"], "configs": got["configs"],
            "marks_s": {k: round(v, 3) for k, v in marks.items()}}


def files_side(name: str) -> dict:
    """Untimed: import what both sides import (torch, Triton, the notebook stack, ktune, the
    kernel's package), so the OS file cache is as warm for the first side as for the second.
    Without it the first side of a call's first kernel read them from disk: ktune's first
    liger cell took 29.9 s there against 19.6-21.1 s for the kernels after it
    (``0d9de0a^:bench/results/corpus_vs_autotune/2026-12-04-2007``)."""
    import importlib

    import IPython  # noqa: F401
    import torch  # noqa: F401
    import triton  # noqa: F401

    import jupyter_ktune.magics  # noqa: F401
    import jupyter_ktune.ui.app  # noqa: F401

    if name.startswith("kt-"):
        with contextlib.suppress(ImportError):  # the anchor's package, where installed
            import kernel_tuner  # noqa: F401
    else:
        import corpus_vs_autotune as cva

        ref = FLA_MATMUL if name == "fla-matmul" else cva.corpus_entries()[name].ref
        importlib.import_module(ref.rpartition(":")[0])
    return {"imported": True}


def kernel_tuner_side() -> dict:
    """Kernel Tuner's brute force over the convolution's space, in a fresh process."""
    import convolution_vs_kernel_tuner as conv

    marks = {"interpreter up": since_spawn()}
    found = sorted(ROOT.glob(".whl*/kernel_tuner-*.tar.gz"))
    got = conv.run_kernel_tuner(conv.kernel_source(found[-1]))
    marks["tune_kernel done"] = since_spawn()
    return {**{k: v for k, v in got.items() if k != "results"},
            "fresh_total_s": marks["tune_kernel done"], "marks_s": marks}


def _spec(name: str) -> Any:
    import jupyter_ktune

    line, body, inputs, reference = cell(name)
    return jupyter_ktune.parse_cell(line, body, {"inputs": inputs, "reference": reference})


def same_method(name: str, winner: dict | None) -> dict[str, Any]:
    """A winner (either side's) timed by ktune's protocol in this process: its median and the
    median's 95 % confidence interval ({} where it could not be timed), for the targets'
    "the same winner or one within the CI" (``first_minute_targets``)."""
    if not winner:
        return {}
    from jupyter_ktune.api import run_kernel

    spec = _spec(name)
    try:
        config = spec.space.config({k: v for k, v in winner.items() if k in spec.space.names})
    except Exception:  # noqa: BLE001 - outside the declared space
        return {}
    r = run_kernel(spec.with_options(budget_ms=50), config)
    if r.measurement is None:
        return {}
    timing = r.measurement.timing
    return {"median_ms": timing.median_ms, "ci_ms": list(timing.median_ci_ms())}


#: ``--bytecode``: the folder every side reads and writes Python's bytecode in (None: as the
#: host is). The device host sets ``PYTHONDONTWRITEBYTECODE=1`` and its site-packages hold no
#: ``.pyc`` for most of torch, so there every fresh process compiles them from source (2.5-4.0
#: s of torch's import, on both sides); a user's pip install leaves them written.
BYTECODE: Path | None = None


def spawn(side: str, name: str, *extra: str, timeout: float = 300) -> dict:
    """Run one side in a fresh interpreter with empty caches (Triton's, CuPy's, ktune's, the
    ceilings; the bytecode only without ``--bytecode``); its JSON row."""
    tmp = Path(tempfile.mkdtemp(prefix=f"ktune-fm-{side}-"))
    env = {**os.environ, T0_ENV: repr(time.time()), "TRITON_CACHE_DIR": str(tmp / "triton"),
           "KTUNE_CACHE_DIR": str(tmp / "ktune"), "CUPY_CACHE_DIR": str(tmp / "cupy"),
           "KTUNE_CEILINGS_CACHE": str(tmp / "ceilings.json"), "PYTHONUNBUFFERED": "1"}
    if BYTECODE is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(BYTECODE)
    env[T0_ENV] = repr(time.time())
    p = subprocess.run([sys.executable, __file__, "--side", side, name, *extra], env=env,
                       cwd=tmp, capture_output=True, text=True, timeout=timeout)
    sys.stderr.write(p.stderr[-3000:])
    lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
    if p.returncode or not lines:
        return {"error": f"rc={p.returncode}: {(p.stderr or p.stdout)[-600:]}"}
    return json.loads(lines[-1])


def med(rows: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return statistics.median(vals) if vals else None


def compare_kernel(n: str, reps: int, cell_reps: int, opened_s: float = 0.0,
                   opened_reps: int | None = None) -> dict:
    """One kernel, each side a fresh process, interleaved (ktune, anchor, ktune, ...): the first
    cell ``max(reps, cell_reps)`` times, the sweep and the anchor ``reps`` times; the rows and
    their summary (medians, both ratios, both winners timed by ktune's protocol here).
    ``opened_s`` > 0: as many first cells again, of a notebook opened ``opened_s`` s before
    the user runs it (``notebook_side``), interleaved with the others (``opened_reps`` of them,
    where given: the fresh first cells are what the targets name)."""
    cuda = n.startswith("kt-")
    rows: dict[str, list[dict]] = {"ktune": [], "anchor": [], "opened": []}
    spawn("files", n)  # untimed: the files both sides read, in the OS cache for both
    if BYTECODE is not None:  # untimed: a first cell writes the bytecode of the rest it imports
        spawn("notebook", n, "--no-sweep")
    for i in range(max(reps, cell_reps)):
        sweep = i < reps
        rows["ktune"].append(spawn("notebook", n, *([] if sweep else ["--no-sweep"])))
        print(n, "ktune", i, json.dumps({k: v for k, v in rows["ktune"][-1].items()
                                         if k != "sweep_timeline"}, default=str)[:1500],
              flush=True)
        if i < reps:
            rows["anchor"].append(spawn("kerneltuner" if cuda else "autotune", n, timeout=400))
            print(n, "anchor", i, json.dumps(rows["anchor"][-1], default=str)[:800], flush=True)
        if opened_s > 0 and i < (cell_reps if opened_reps is None else opened_reps):
            rows["opened"].append(spawn("notebook", n, "--no-sweep", "--opened", str(opened_s)))
            print(n, "opened", i, json.dumps(rows["opened"][-1], default=str)[:1500], flush=True)
    k, t = rows["ktune"], rows["anchor"]
    swept = [r for r in k if "sweep_wall_s" in r]
    winner = next((r["winner"] for r in swept if r.get("winner")), None)
    theirs = next((r["winner"] for r in t if r.get("winner")), None)
    summary = {
        "first_result_s": med(k, "first_result_s"),
        "first_result_all_s": [r.get("first_result_s") for r in k],
        "first_phases_ms": median_phases(k),  # what holds the first result, largest first
        "cell_wait_s": med(k, "cell_wait_s"),  # from the cell's start (after %load_ext)
        "opened_cell_wait_s": med(rows["opened"], "cell_wait_s"),
        "opened_first_phases_ms": median_phases(rows["opened"]) if rows["opened"] else None,
        "autotune_first_ok_s": med(swept, "sweep_first_ok_s"),
        "press_wait_s": med(swept, "sweep_setup_s"),  # press to the sweep's start
        "ceilings_guest": next((r["ceilings_guest"] for r in swept if "ceilings_guest" in r),
                               None),
        "sweep_wall_s": med(swept, "sweep_wall_s"),
        "sweep_report_s": med([r.get("tune_tail") or {} for r in swept],
                              "sweep_run_returned_s"),
        "sweep_configs": med(swept, "sweep_configs"),
        "ktune_fresh_total_s": med(swept, "fresh_total_s"),
        "anchor_call_s": med(t, "call_s") if not cuda else None,
        "anchor_fresh_total_s": med(t, "fresh_total_s"),
        "winner": winner, "anchor_winner": theirs}
    ours, anchors = same_method(n, winner), same_method(n, theirs)
    summary.update({"winner_ms_by_ktune": ours.get("median_ms"),
                    "winner_ci_ms_by_ktune": ours.get("ci_ms"),
                    "anchor_winner_ms_by_ktune": anchors.get("median_ms"),
                    "anchor_winner_ci_ms_by_ktune": anchors.get("ci_ms")})
    if summary["anchor_call_s"] and summary["sweep_wall_s"]:
        summary["notebook_order_ratio"] = summary["anchor_call_s"] / summary["sweep_wall_s"]
    if summary["anchor_fresh_total_s"] and summary["ktune_fresh_total_s"]:
        summary["fresh_ratio"] = summary["anchor_fresh_total_s"] / summary["ktune_fresh_total_s"]
    print(n, "summary", json.dumps(summary, default=str), flush=True)
    return {"summary": summary, **rows}


def _num(x: Any, w: int, p: int = 2) -> str:
    return f"{x:{w}.{p}f}" if isinstance(x, (int, float)) else f"{'-':>{w}}"


def print_table(out: dict) -> None:
    """The short table of :func:`compare_kernel` summaries, last."""
    print(f"\n{'kernel':16} {'1st cell s':>10} {'autotune 1st s':>14} {'sweep s':>8} "
          f"{'anchor s':>8} {'nb ratio':>8} {'fresh k/a s':>13} {'fresh ratio':>11}  winners us")
    for n, r in out["kernels"].items():
        s = r["summary"]
        print(f"{n:16} {_num(s['first_result_s'], 10)} {_num(s['autotune_first_ok_s'], 14)} "
              f"{_num(s['sweep_wall_s'], 8)} {_num(s['anchor_call_s'], 8)} "
              f"{_num(s.get('notebook_order_ratio'), 8)} "
              f"{_num(s['ktune_fresh_total_s'], 6, 1)}/{_num(s['anchor_fresh_total_s'], 6, 1)} "
              f"{_num(s.get('fresh_ratio'), 11)}  "
              f"{_num((s['winner_ms_by_ktune'] or 0) * 1e3, 1, 1)} / "
              f"{_num((s['anchor_winner_ms_by_ktune'] or 0) * 1e3, 1, 1)}")
    for n, r in out["kernels"].items():
        s = r["summary"]
        if s.get("opened_cell_wait_s") is not None:
            print(f"{n}: first cell from its start {_num(s['cell_wait_s'], 1)} s in a new notebook"
                  f", {_num(s['opened_cell_wait_s'], 1)} s in one opened {out['opened_s']:g} s "
                  "before (its backends sent at kernel start)")
    print_first_cells(out["kernels"])
    print_verdicts(out["kernels"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--side", nargs=2, metavar=("SIDE", "NAME"), help=argparse.SUPPRESS)
    ap.add_argument("--no-sweep", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--kernels", default="fla-matmul,liger-dyt,kt-convolution")
    ap.add_argument("--reps", type=int, default=3, help="fresh processes per side (sweeps)")
    ap.add_argument("--cell-reps", type=int, default=5, help="fresh processes for the first cell")
    ap.add_argument("--opened", type=float, default=0.0, metavar="S",
                    help="also first cells of a notebook opened S s before it is run")
    ap.add_argument("--opened-reps", type=int, help="fresh processes for those (--cell-reps)")
    ap.add_argument("--check", action="store_true", help="CPU: parse every cell, no device")
    ap.add_argument("--bytecode", action="store_true",
                    help="every side with Python's bytecode as a pip install leaves it")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if a.side:
        side, name = a.side
        row = (notebook_side(name, not a.no_sweep, a.opened) if side == "notebook" else
               autotune_side(name) if side == "autotune" else
               files_side(name) if side == "files" else kernel_tuner_side())
        print(json.dumps(row, default=str))
        return 0
    names = [n.strip() for n in a.kernels.split(",") if n.strip()]
    if a.check:
        for n in names:
            try:
                s = _spec(n)
                print(f"{n}: {s.space.size} configs, backend {s.backend}")
            except Exception as exc:  # noqa: BLE001 - a plan, not a verdict
                print(f"{n}: cannot build ({type(exc).__name__}: {str(exc)[:200]})")
        return 0
    out: dict[str, Any] = {"kernels": {}, "opened_s": a.opened, "bytecode": a.bytecode}
    if a.bytecode:
        global BYTECODE
        BYTECODE = Path(tempfile.mkdtemp(prefix="ktune-fm-pyc-"))
    for n in names:
        out["kernels"][n] = compare_kernel(n, a.reps, a.cell_reps, a.opened, a.opened_reps)
        if a.out:
            a.out.mkdir(parents=True, exist_ok=True)
            (a.out / "first_minute.json").write_text(json.dumps(out, indent=1, default=str))
    print_table(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
