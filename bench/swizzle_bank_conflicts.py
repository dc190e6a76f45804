"""Swizzle modes against shared-memory bank conflicts: the transpose of
examples/swizzle_banks.ipynb.

For every config of the notebook's ``%%kernel transpose`` cell (TILE x SWIZZLE) this runs the
variant through the device worker (verified on fresh inputs, L2 flushed by a read, CUDA events,
median with a 95% CI), then profiles its first launch under ncu (``--clock-control none``) for
the shared-memory metrics: load/store instructions, wavefronts, and the excess wavefronts ncu
counts as bank conflicts. Next to them, the conflict degree the panel's swizzle map shows for
the column read (the access the swizzle exists for): the cell's ``smem_tile`` statement through
``jupyter_ktune.swizzle``'s model. Prints a table last and writes
``swizzle_banks.json`` into ``--out``.

    python bench/swizzle_bank_conflicts.py --out DIR [--n 8192]      # on a GPU with ncu
    python bench/swizzle_bank_conflicts.py --check                   # CPU: parse the cell, list
    configs
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import nbformat
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
NB = ROOT / "examples" / "swizzle_banks.ipynb"


def make_io(n: int):
    """The notebook's inputs and reference, at size ``n``."""
    def inputs():
        a = np.random.default_rng().random((n, n), dtype=np.float32)
        return dict(inp=a, out=np.empty_like(a), n=n)

    def reference(inp, out, n):
        return inp.T
    return inputs, reference


def transpose_spec(n: int):
    """The notebook's transpose cell parsed with inputs of size ``n``."""
    from jupyter_ktune.api import parse_cell

    nb = nbformat.read(NB, as_version=4)
    cell = next(c.source for c in nb.cells
                if c.cell_type == "code" and c.source.startswith("%%kernel transpose"))
    line, body = cell.split("\n", 1)
    line = line.removeprefix("%%kernel").split(" --config")[0]
    inputs, reference = make_io(n)
    return parse_cell(line + " --budget-ms 100", body, {"inputs": inputs, "reference": reference})


def predicted(spec, config) -> dict[str, int]:
    """Conflict degree of a warp's row write and column read: the panel's swizzle map, from
    the cell's ``smem_tile`` statement and the swizzle model."""
    return spec.smem_tile.shape(config).conflicts()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("."))
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--tiles", type=int, nargs="*", help="only these TILE values")
    ap.add_argument("--swizzles", nargs="*", help="only these SWIZZLE modes")
    args = ap.parse_args()
    spec = transpose_spec(args.n if not args.check else 64)
    # TILE 64 needs 16 KiB of shared memory: every Hopper (227 KiB per block) takes all configs
    configs = [c for c in spec.space.configs({"SMEM_PER_BLOCK": 232448})
               if (not args.tiles or c["TILE"] in args.tiles)
               and (not args.swizzles or c["SWIZZLE"] in args.swizzles)]
    if args.check:
        for c in configs:
            print(c.label(), predicted(spec, c))
        print(f"ok: {len(configs)} configs")
        return 0

    from jupyter_ktune.api import run_kernel
    from jupyter_ktune.measure.profile_ncu import SHARED_METRICS, ncu_status
    from jupyter_ktune.runner.client import DeviceWorker
    from jupyter_ktune.runner.profile import ncu_metrics

    rows = []
    why_no_ncu = ncu_status()
    with DeviceWorker() as w:
        for c in configs:
            r = run_kernel(spec, c, worker=w)
            t = r.measurement.timing if r.measurement else None
            row = {"TILE": c["TILE"], "SWIZZLE": c["SWIZZLE"], "status": r.status.value,
                   "reason": r.reason[:200], "median_us": t.median_ms * 1e3 if t else None,
                   "ci95_us": [x * 1e3 for x in t.median_ci_ms()] if t else None,
                   "runs": t.n if t else None, "predicted": predicted(spec, c)}
            if why_no_ncu is None and r.status.value == "ok":
                try:
                    row["ncu"] = w.call(ncu_metrics, spec, c, SHARED_METRICS, timeout=180)
                except Exception as exc:  # noqa: BLE001 - keep the timing, say why
                    row["ncu_error"] = f"{type(exc).__name__}: {exc}"[:400]
            rows.append(row)
            print(json.dumps(row, default=str), flush=True)
        device = w.device("cuda").name
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "swizzle_banks.json").write_text(json.dumps(
        {"device": device, "n": args.n, "ncu": why_no_ncu or "ncu metrics", "rows": rows},
        indent=1, default=str))
    gb = 8 * args.n * args.n / 1e9
    print(f"\n{device}: transpose of {args.n}x{args.n} fp32; ncu: {why_no_ncu or 'yes'}")
    print(f"{'TILE':>4} {'SWIZZLE':>7} {'model col':>9} {'ld confl':>10} {'st confl':>10} "
          f"{'ld wf/inst':>10} {'median us':>10} {'GB/s':>7}")
    for row in rows:
        m = row.get("ncu") or {}
        ld_i = m.get("smsp__sass_inst_executed_op_shared_ld.sum")
        ld_w = m.get("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum")
        fmt = lambda v: f"{v:10.0f}" if v is not None else f"{'-':>10}"  # noqa: E731
        us = row["median_us"]
        print(f"{row['TILE']:>4} {row['SWIZZLE']:>7} {row['predicted']['column']:>8}-way "
              f"{fmt(m.get('l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum'))} "
              f"{fmt(m.get('l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum'))} "
              f"{(ld_w / ld_i if ld_i and ld_w else float('nan')):10.2f} "
              f"{(us if us else float('nan')):10.1f} "
              f"{(gb / (us * 1e-6) if us else float('nan')):7.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
