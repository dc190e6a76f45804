"""The quickstart's Run All on this machine, per cell, from a fresh kernel each time (issue 33).

Goal on a 2-core machine without a GPU: Run All <= 20 s. Each repeat executes
``examples/quickstart.ipynb`` top to bottom in a fresh ``python3`` kernel through nbclient (as
``tests/example_notebooks.py`` does) with empty caches (Triton's, ktune's), and records each
code cell's wall time (nbclient's ``on_cell_execute`` / ``on_cell_executed`` hooks), the whole
Run All (kernel start excluded, as a user's Run All in an open notebook), the kernel start, and
the one-minute load average before the repeat: others share the machine, so medians are
reported with the load they ran under. A Triton or Pallas panel's first result carries its
phases (``RunResult.extra["phases_ms"]``), printed by an extra cell appended to the copy run.

``--opened S [S ...]``: beside each plain repeat, one of a notebook opened in JupyterLab: at
kernel start its ``%%kernel`` cells are sent to ``jupyter_ktune.prepare`` in a silent request,
as the labextension does (``labextension/src/prepare.ts``), and Run All follows S seconds later
(0: pressed at once, the case where the openings could only get in the way).

Example::

    python bench/quickstart_cpu.py --reps 5 --out bench/results/quickstart_cpu/$(date +%F-%H%M)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PHASES_CELL = """import json as _json
from jupyter_ktune.ui.start import _live as _panels
print("PHASES", _json.dumps({k: {"phases_ms": {p: round(v) for p, v in
      (getattr(v.session.history[0].result, "phases_ms", None) or {}).items()},
      "static": v.session.history[0].result.static is not None,
      "deliveries": len(v.session.history)}
      for k, v in _panels.items() if v.session.history}))
"""


PREPARE = """try:
    __import__("jupyter_ktune.prepare").prepare.prepare_json({literal})
except Exception:
    pass"""


def one_run(notebook: Path, opened_s: float | None = None) -> dict:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(notebook, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PHASES_CELL))
    starts: dict[int, float] = {}
    cells: list[dict] = []

    def started(cell, cell_index, **_):  # noqa: ANN001
        starts[cell_index] = time.perf_counter()

    def finished(cell, cell_index, **_):  # noqa: ANN001
        first = cell.source.splitlines()[0] if cell.source else ""
        cells.append({"cell": cell_index, "first_line": first[:60],
                      "s": round(time.perf_counter() - starts[cell_index], 2)})

    tmp = Path(tempfile.mkdtemp(prefix="ktune-qs-"))
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp / "triton"),
           "KTUNE_CACHE_DIR": str(tmp / "ktune"), "KTUNE_CEILINGS_CACHE": str(tmp / "c.json"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    client = NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp)}},
                            on_cell_execute=started, on_cell_executed=finished)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    with client.setup_kernel(env=env):
        up = time.perf_counter()
        if opened_s is not None:  # the labextension's request at kernel start, then reading
            kernel_cells = [c.source for c in nb.cells if c.cell_type == "code"
                            and c.source.lstrip().startswith("%%kernel")]
            client.kc.execute(PREPARE.format(literal=json.dumps(json.dumps(kernel_cells))),
                              silent=True, store_history=False)
            time.sleep(opened_s)
        for i, cell in enumerate(nb.cells):
            client.execute_cell(cell, i)
    end = time.perf_counter()
    outputs = [o for c in nb.cells for o in c.get("outputs", [])]
    errors = [o.get("ename", "") + ": " + o.get("evalue", "")[:300]
              for o in outputs if o.get("output_type") == "error"]
    phases = next((json.loads(o["text"].split("PHASES", 1)[1]) for o in outputs
                   if "PHASES" in o.get("text", "")), {})
    run_all = sum(c["s"] for c in cells[:-1])  # the appended phases cell left out
    return {"opened_s": opened_s, "run_all_s": round(run_all, 2),
            "kernel_start_s": round(up - t0, 2),
            "wall_s": round(end - t0, 2), "load1_before": round(load, 2),
            "cells": cells[:-1], "phases": phases, "errors": errors}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--notebook", type=Path, default=ROOT / "examples" / "quickstart.ipynb")
    ap.add_argument("--opened", type=float, nargs="*", default=[], metavar="S",
                    help="also Run All S s after an opened notebook's kernel started")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    rows, opened = [], []
    for i in range(a.reps):
        row = one_run(a.notebook)
        rows.append(row)
        print(i, json.dumps(row), flush=True)
        for s in a.opened:  # interleaved with the plain repeats: the same load for both
            opened.append(one_run(a.notebook, s))
            print(i, json.dumps(opened[-1]), flush=True)
    summary = {"run_all_median_s": statistics.median(r["run_all_s"] for r in rows),
               "opened_run_all_median_s": {
                   str(s): statistics.median(r["run_all_s"] for r in opened
                                             if r["opened_s"] == s) for s in a.opened},
               "opened_per_cell_median_s": {
                   str(s): {c["first_line"]: statistics.median(
                       r["cells"][j]["s"] for r in opened if r["opened_s"] == s)
                       for j, c in enumerate(rows[0]["cells"])} for s in a.opened},
               "load1_median": statistics.median(r["load1_before"] for r in rows),
               "per_cell_median_s": {
                   c["first_line"]: statistics.median(r["cells"][j]["s"] for r in rows)
                   for j, c in enumerate(rows[0]["cells"])}}
    print("summary", json.dumps(summary, indent=1))
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "quickstart_cpu.json").write_text(json.dumps(
            {"summary": summary, "rows": rows, "opened": opened}, indent=1))
        (a.out / "command.txt").write_text(" ".join(["python", *sys.argv]) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
