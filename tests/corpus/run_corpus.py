"""Run the compatibility corpus on this machine and record what each published kernel did.

    python tests/corpus/run_corpus.py [--only ID,ID] [--json out.json] [--markdown]

On the H200, the whole corpus on the GPU, its raw outcomes kept and the docs table redrawn with
the "verified on the H200" column filled from them::

    python tests/corpus/run_corpus.py --device --json bench/results/corpus_h200/DATE.json \
        --markdown --h200 bench/results/corpus_h200/DATE.json

Each entry's cell is built from the installed package's source plus our magic line, and run
through ``jupyter_ktune.run_kernel`` in one device worker: Triton's interpreter and Pallas'
interpret mode on a CPU, an sm_90 static compile for CUDA C++. The result per kernel is its
status (``pass`` or the failure's kind), the one-line reason, the lines changed in the copied
source, the lines we wrote, the package version and the full error text. ``tests/test_corpus.py``
runs the same function from pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from importlib import metadata
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent


def prepare_environment() -> None:
    """What the worker needs: this checkout and ``corpus`` importable, the interpreter forced.

    The worker is a separate interpreter that unpickles ``inputs``/``reference`` by reference,
    so it must import ``corpus.entries_*``; forcing the interpreter makes a GPU machine give the
    same CPU answers (run without ``KTUNE_FORCE_INTERPRET`` there for the device column).
    """
    for path in (str(ROOT), str(TESTS)):
        if path not in sys.path:
            sys.path.insert(0, path)
    parts = [str(TESTS), str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(":"))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    os.environ.setdefault("KTUNE_FORCE_INTERPRET", "1")
    from corpus.entries_cuda import include_path

    cpath = [*include_path(), *filter(None, os.environ.get("CPATH", "").split(os.pathsep))]
    os.environ["CPATH"] = os.pathsep.join(dict.fromkeys(cpath))  # nvcc's -I, see entries_cuda


def toolchain_versions() -> dict[str, str]:
    """Versions of what the corpus runs on (packages that are not installed are left out)."""
    out = {}
    for dist in ("triton", "torch", "jax", "jaxlib", "numpy", "liger-kernel", "fla-core",
                 "xformers", "flag-gems", "tokamax", "nvidia-cutlass", "nvidia-cuda-cccl",
                 "unsloth", "torchao", "cupy-cuda13x"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def run(ids: list[str] | None = None, worker=None, each=None) -> list:
    """Run the entries (all, or ``ids``) and return their Outcomes, in table order; ``each``
    is called with the outcomes so far after every entry (a device call cut short keeps them)."""
    from corpus.entries import BY_ID, ENTRIES
    from corpus.harness import run_entry

    chosen = [BY_ID[i] for i in ids] if ids else ENTRIES

    def over(w) -> list:
        done: list = []
        for e in chosen:
            done.append(run_entry(e, w))
            if each is not None:
                each(done)
        return done

    if worker is not None:
        return over(worker)
    from jupyter_ktune.runner.client import DeviceWorker

    with DeviceWorker() as w:
        return over(w)


def _said(o) -> str:
    """One outcome as a table cell: ``pass: verified`` or ``**status**: reason``."""
    return "pass: " + o.reason if o.passed else f"**{o.status}**: {o.reason}"


def markdown(outcomes: list, h200: list | None = None) -> str:
    """The docs/corpus.md table rows for these outcomes; ``h200``, the outcomes of a device run
    (``--device --json``), fills the "verified on the H200" column."""
    from corpus.entries import BY_ID

    on_gpu = {o.id: o for o in h200 or []}
    head = ("| id | kernel | package | construct | lines changed | lines ours | CPU, as written "
            "| CPU, with today's directive workarounds | verified on the H200 |\n"
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    rows = []
    for o in outcomes:
        e = BY_ID[o.id]
        result = _said(o)
        first = o.as_written.split(". ")[0]
        later = (f"{result} (after {len(o.workarounds)}: "
                 f"{'; '.join(dict.fromkeys(o.workarounds))})" if o.workarounds else "same")
        gpu = _said(on_gpu[o.id]) if o.id in on_gpu else ""
        cells = [c.replace("|", "\\|").replace("[ktune] ", "")[:260]
                 for c in (first, later, gpu)]
        rows.append(f"| {o.id} | `{e.ref}` | {e.dist} {o.version} | {e.construct} | "
                    f"{o.changed} | {o.ours} | {cells[0]} | {cells[1]} | {cells[2]} |")
    return "\n".join([head, *rows])


def from_json(path: Path) -> list:
    """Outcomes saved by ``--json`` (to redraw the table without running again)."""
    from corpus.harness import Outcome

    return [Outcome(**o) for o in json.loads(path.read_text())["outcomes"]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated entry ids")
    ap.add_argument("--device", action="store_true",
                    help="run on the GPU where there is one (default: the interpreter, forced)")
    ap.add_argument("--json", type=Path, help="write the outcomes here")
    ap.add_argument("--markdown", action="store_true", help="print the docs table")
    ap.add_argument("--from-json", type=Path, help="redraw from saved outcomes, run nothing")
    ap.add_argument("--h200", type=Path,
                    help="a device run's --json: fills the table's 'verified on the H200' column")
    args = ap.parse_args(argv)
    if args.device:
        os.environ["KTUNE_FORCE_INTERPRET"] = "0"
    prepare_environment()
    h200 = from_json(args.h200) if args.h200 and args.h200.exists() else None
    if args.from_json:
        print(markdown(from_json(args.from_json), h200))
        return 0

    versions = toolchain_versions()  # read once: the packages do not change during the run

    def each(done: list) -> None:
        o = done[-1]
        print(f"{o.id:28} {o.status:16} changed={o.changed} {o.reason[:150]}", flush=True)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps({"versions": versions,
                                             "outcomes": [asdict(o) for o in done]}, indent=1))

    outcomes = run(args.only.split(",") if args.only else None, each=each)
    if args.markdown:
        h200 = from_json(args.h200) if args.h200 and args.h200.exists() else None
        print(markdown(outcomes, h200))
    passed = sum(o.passed for o in outcomes)
    print(f"{passed} of {len(outcomes)} kernels pass on this machine")
    return 0


if __name__ == "__main__":
    sys.exit(main())
