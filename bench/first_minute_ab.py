"""A notebook's first minute with two trees of jupyter-ktune, interleaved on one host.

Hosts differ (torch's import took 2.4 s on one H100 host and 3.1-3.7 s on others), so a change
to the first minute is measured against the tree before it on the same machine, in turns:
``base, new, new, base, base, new, ...`` (a side's place in its pair alternates, so whatever
the first of a pair leaves behind, processes still exiting or a warmer page cache, does not
fall on one side), each side a fresh interpreter with empty caches, as
``first_minute.py`` spawns them (its ``--side notebook NAME``: the cell's first result, then
Autotune pressed at once). Every figure counts from the process's spawn or the cell's start;
nothing is set apart.

    python bench/first_minute_ab.py --base /tmp/base --kernel fla-matmul --reps 3 --opened 8

``--base`` is a checkout of the earlier tree (``git archive REV | tar -x -C DIR``); the new tree
is this one (``--base .``: this tree on both sides, to compare conditions, with
``--base-env NAME=VALUE`` setting a switch on the base side only, e.g.
``--base . --base-env KTUNE_COMPILE_AHEAD=0``: the compiles ahead off against on).

``--bytecode new`` (or ``both``) runs that side with Python's bytecode as a pip install leaves
it. The device host sets ``PYTHONDONTWRITEBYTECODE=1`` and its site-packages hold no ``.pyc``
for NumPy or Triton and for 768 of the 981 modules ``import torch`` loads (probe of
2026-12-06), so every fresh process there compiles them from source: 2.5-4.0 s of torch's
import. pip writes the bytecode when it installs a package, so a user's first minute does not
pay that. Such a side runs with ``PYTHONDONTWRITEBYTECODE`` unset and ``PYTHONPYCACHEPREFIX``
set to one folder, which an untimed first process of that side fills; its other caches stay
empty. ``--opened S`` adds, in each rep, a notebook opened S s before its cells run (its
backends sent at the kernel's start, as the labextension does). Prints one JSON row per run,
then the medians side by side and, for the first result and Autotune's, the pairs: the
median of new - base over the reps (each rep's two sides ran back to back) and in how many
pairs new was lower, which a drift of the host over the run moves less than the medians.
``--sample DIR`` then runs the new tree's first cell once more
with every thread of every process sampled (``bench/sampler``) and prints where each thread
spent the time (``bench/thread_timeline.py``): the phases say how long, the timeline says what
ran beside them.
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

HERE = Path(__file__).resolve().parent.parent
SIDES = ("base", "new")
PAIRED = ("first_result_s", "autotune_first_ok_s")  # the pair statistics printed for these
PHASES = ("torch import", "device context", "triton device request", "kernel module import",
          "cupy import", "cuda device request", "inputs", "reference", "compile", "verify")


def run_side(tree: Path, kernel: str, opened: float = 0.0, bytecode: Path | None = None,
             sweep: bool = True, extra_env: dict[str, str] | None = None,
             sample: Path | None = None) -> dict:
    """``first_minute.py --side notebook KERNEL`` of ``tree``, fresh, caches empty; ``opened``:
    the notebook opened that many seconds before its cells run (its backends sent at start);
    ``bytecode``: the folder Python reads and writes ``.pyc`` in (None: as the host is);
    ``sweep``: Autotune pressed once the first result is shown; ``extra_env``: set in that
    side's process (a switch such as ``KTUNE_COMPILE_AHEAD=0``); ``sample``: every thread of
    every Python process of the side sampled into that folder (``bench/sampler``)."""
    tmp = Path(tempfile.mkdtemp(prefix="ktune-ab-"))
    path = [str(tree), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                         if p and Path(p).resolve() not in (HERE, tree.resolve())]]
    if sample is not None:  # its sitecustomize first: every process the side starts is sampled
        path.insert(0, str(HERE / "bench" / "sampler"))
        extra_env = {**(extra_env or {}), "KTUNE_BENCH_SAMPLE": str(sample)}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path),
           "TRITON_CACHE_DIR": str(tmp / "triton"), "KTUNE_CACHE_DIR": str(tmp / "ktune"),
           "CUPY_CACHE_DIR": str(tmp / "cupy"), "KTUNE_CEILINGS_CACHE": str(tmp / "c.json"),
           "PYTHONUNBUFFERED": "1", "KTUNE_BENCH_T0": repr(time.time()), **(extra_env or {})}
    if bytecode is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(bytecode)
    p = subprocess.run([sys.executable, str(tree / "bench" / "first_minute.py"), "--side",
                        "notebook", kernel, "--opened", str(opened),
                        *([] if sweep else ["--no-sweep"])], env=env, cwd=tmp,
                       capture_output=True, text=True, timeout=300)
    rows = [x for x in p.stdout.splitlines() if x.startswith("{")]
    if p.returncode or not rows:
        return {"error": f"rc={p.returncode}: {(p.stderr or p.stdout)[-400:]}"}
    return json.loads(rows[-1])


def summary(row: dict) -> dict:
    """The figures a side is compared on: its times, then every phase of its first result
    (:data:`PHASES` first, then any other the result has), then where the notebook's cell spent
    its wait (``first_minute_trace.trace_cell``'s steps, seconds)."""
    phases = row.get("first_phases_ms") or {}
    names = [*PHASES, *(k for k in phases if k not in PHASES)]
    return {"first_result_s": row.get("first_result_s"), "cell_wait_s": row.get("cell_wait_s"),
            "autotune_first_ok_s": row.get("sweep_first_ok_s"),
            "inputs_ready": [e[2] for e in row.get("sweep_timeline") or []
                             if e[1] == "inputs ready"],
            **{f"{k} ms": phases.get(k) for k in names},
            "phases sum ms": round(sum(phases.values()), 1) if phases else None,
            # 1: the first run launched before Triton's launcher was built (direct_launch)
            "direct first launch": None if row.get("first_method") is None
            else float("cuLaunchKernel" in row["first_method"]),
            # 1: its first timing was host-bound and was taken again after the worker's
            # background start-up (``timed.quiet_host``): the wait is "time: start-up wait"
            "timed again": None if row.get("first_method") is None
            else float("timed again" in row["first_method"]),
            **{f"cell: {k} s": v for k, v in (row.get("inside_cell_s") or {}).items()}}


def side_order(rep: int) -> tuple[str, ...]:
    """The sides of rep ``rep`` in the order they run: base first on even reps, new first on
    odd ones."""
    return SIDES if rep % 2 == 0 else SIDES[::-1]


def paired(base: list[dict], new: list[dict], key: str) -> tuple[float, int, int] | None:
    """Over the reps where both sides have a number for ``key`` (row ``i`` of each is rep
    ``i``): the median of new - base, how many pairs had new lower, and how many pairs.
    None: no such pair."""
    diffs = [n[key] - b[key] for b, n in zip(base, new, strict=False)
             if isinstance(b.get(key), (int, float)) and isinstance(n.get(key), (int, float))]
    if not diffs:
        return None
    return statistics.median(diffs), sum(d < 0 for d in diffs), len(diffs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=Path, required=True, help="checkout of the earlier tree")
    ap.add_argument("--kernel", default="fla-matmul")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--opened", type=float, default=0.0, metavar="S",
                    help="also a notebook opened S s before its cells run, each rep")
    ap.add_argument("--bytecode", choices=("none", "new", "both"), default="none",
                    help="sides run with bytecode as a pip install leaves it")
    ap.add_argument("--cell-only", action="store_true",
                    help="the first cell only, no Autotune after it (a CPU machine's sweep "
                         "runs in the interpreter)")
    ap.add_argument("--sample", type=Path, metavar="DIR",
                    help="then one more first cell of the new tree with every thread sampled"
                         " (bench/sampler), its timeline printed (bench/thread_timeline.py)")
    ap.add_argument("--base-env", action="append", default=[], metavar="NAME=VALUE",
                    help="set in the base side's processes only (repeatable)")
    a = ap.parse_args()
    base_env = dict(kv.split("=", 1) for kv in a.base_env)
    a.base = a.base.resolve()  # each side runs in a temporary folder of its own
    prefix = Path(tempfile.mkdtemp(prefix="ktune-ab-pyc-"))
    pyc = {"base": prefix if a.bytecode == "both" else None,
           "new": prefix if a.bytecode != "none" else None}
    for side, tree in (("base", a.base), ("new", HERE)):
        if pyc[side] is not None:  # untimed: fills the bytecode folder for that tree
            warm = run_side(tree, a.kernel, 0.0, pyc[side], not a.cell_only,
                            base_env if side == "base" else None)
            print(side, "bytecode filled (untimed)", json.dumps(summary(warm) if "error"
                                                                not in warm else warm))
    arms = [("new notebook", 0.0)] + ([(f"opened {a.opened:g} s before", a.opened)]
                                      if a.opened > 0 else [])
    got: dict[tuple[str, str], list[dict]] = {}
    for i in range(a.reps):
        for arm, opened in arms:
            for side in side_order(i):
                tree = a.base if side == "base" else HERE
                ran = run_side(tree, a.kernel, opened, pyc[side], not a.cell_only,
                               base_env if side == "base" else None)
                row = summary(ran) if "error" not in ran else ran
                got.setdefault((arm, side), []).append(row)
                print(side, arm, i, json.dumps(row), flush=True)
    keys = list(dict.fromkeys(k for rows in got.values() for r in rows for k in r
                              if k not in ("inputs_ready", "error")))
    for arm, _ in arms:
        print(f"\n{a.kernel}, {arm}: median of {a.reps} fresh processes each,"
              " interleaved, the order alternating"
              f" (base {a.base}{''.join(f' {k}={v}' for k, v in base_env.items())},"
              f" bytecode {'yes' if pyc['base'] else 'as the host is'};"
              f" new {HERE}, bytecode {'yes' if pyc['new'] else 'as the host is'})")
        print(f"{'':28} {'base':>9} {'new':>9}")
        for k in keys:
            cells = []
            for side in ("base", "new"):
                v = [r[k] for r in got[(arm, side)] if isinstance(r.get(k), (int, float))]
                cells.append(f"{statistics.median(v):9.3f}" if v else f"{'-':>9}")
            print(f"{k:28} {cells[0]} {cells[1]}")
        for k in PAIRED:
            pairs = paired(got[(arm, "base")], got[(arm, "new")], k)
            if pairs is not None:
                diff, lower, n = pairs
                print(f"{k}: new - base, median over the pairs {diff:+.3f} s;"
                      f" new lower in {lower} of {n}")
    if a.sample is not None:
        sampled(a.kernel, a.sample, pyc["new"], not a.cell_only)
    return 0


def sampled(kernel: str, folder: Path, bytecode: Path | None, sweep: bool) -> None:
    """The new tree's first cell (and Autotune, with ``sweep``) once more, every thread
    sampled; its figures and timeline (slower than the rows above: the sampler takes the GIL
    every 3 ms)."""
    from thread_timeline import timeline

    ran = run_side(HERE, kernel, 0.0, bytecode, sweep, sample=folder / "samples")
    print(f"\n{kernel}, new tree, sampled (slower than the rows above):",
          json.dumps(summary(ran) if "error" not in ran else ran))
    report = timeline(folder / "samples", min_ms=15)
    (folder / "timeline.txt").write_text(report, encoding="utf-8")
    print(report)


if __name__ == "__main__":
    sys.exit(main())
