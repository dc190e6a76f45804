"""Does a sweep over a faulty store lose results, refuse with a traceback, or write to a damaged
file?

Usage::

    python bench/store_faults.py --out DIR    # CPU, fake backend; about a minute

Each fault is injected into a real store holding a first sweep's results (8 configs), then a
second sweep of 16 configs (the first 8 stored) runs in a child process, as a user would run it.
Faults: none (control); a 444 file; a 555 folder (as root, where chmod stops nothing and the
device worker cannot be started as another user, both are opened through SQLite's ``mode=ro``,
as tests/test_store_faults.py does; tests/test_store_damage.py runs the real chmod cases as
uid 65534); a zeroed first page, a zeroed meta-table page, zeroed later pages; a
file whose recorded version is older than its columns (``duplicate column name: attempts``); a
full disk mid-sweep (SQLite's ``max_page_count``); an undecodable row. Afterwards the file is
compared byte for byte (a damaged or read-only file must be left untouched) and read again.

A result is **lost** when it was in the file before the fault and is no longer readable there
(a file ktune itself damaged or rewrote), or when the sweep measured it and the sweep's report
does not hold it (the sweep ended early). Results kept in memory for a file that cannot be
written are counted as not saved, not lost: the one warning says so, as the README promises.
The table is printed last.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = 4096
FAULTS = ("none", "444 file", "555 folder", "zeroed first page", "zeroed meta page",
          "zeroed later pages", "duplicate column", "full disk mid-sweep", "undecodable row")
SRC = """# ktune: BLOCK in [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
def scale(x, y, n):
    y[:] = 2 * x
"""
LINE = "scale --backend fake --inputs inputs --reference reference --out y --budget-ms 2"


def _env() -> None:
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    os.environ["KTUNE_BACKEND_MODULES"] = "fake=ktune_fake_backend"
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests"), str(ROOT),
                                                os.environ.get("PYTHONPATH", "")])


def _spec():
    import numpy as np

    from jupyter_ktune.api import parse_cell

    def inputs():
        x = np.random.rand(4096)
        return dict(x=x, y=np.empty_like(x), n=4096)

    def reference(x, y, n):
        return 2 * x

    return parse_cell(LINE, SRC, {"inputs": inputs, "reference": reference})


def sweep(path: str, budget: int, full_disk: bool = False, read_only: bool = False) -> dict:
    """One sweep (in this process) over the store at ``path``; what a user would see."""
    from jupyter_ktune.tuning import Store, store_schema, tune

    if read_only:  # root: every connection to the file read-only, as chmod would make it
        real = store_schema.connect
        store_schema.connect = lambda p, mode="rwc": real(p, "ro" if mode == "rwc" else mode)

    out: dict = {"lines": [], "traceback": ""}
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            store = Store(path)
            if full_disk:  # SQLite answers "database or disk is full" from the next page on
                pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
                store._conn.execute(f"PRAGMA max_page_count = {pages}")
            with store:
                report = tune(_spec(), "exhaustive", budget=budget, store=store, workers=1,
                              top_k=0)
                out["measured"] = sum(not e.cached for e in report.evaluations)
                out["served"] = sum(e.cached for e in report.evaluations)
                out["in_report"] = len(report.evaluations)
                out["saving"] = store.saving
        except Exception as exc:  # noqa: BLE001 - what the user would be shown
            text = str(exc)
            out["lines"].append(text)
            if not text.startswith("[ktune]"):
                import traceback

                out["traceback"] = traceback.format_exc()
    out["lines"] += [str(w.message) for w in seen if "[ktune]" in str(w.message)]
    return out


def _rows(path: Path) -> int | None:
    try:
        conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
        try:
            return conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return None


def _zero(path: Path, page: int, n: int = 1) -> None:
    data = bytearray(path.read_bytes())
    data[(page - 1) * PAGE:(page - 1 + n) * PAGE] = bytes(n * PAGE)
    path.write_bytes(bytes(data))


def _sql(path: Path, sql: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute(sql)
    conn.commit()
    conn.close()


def inject(fault: str, folder: Path, path: Path) -> list[str]:
    """Damage ``path`` (or its folder) as ``fault`` says; returns flags for the child sweep
    (``--read-only`` for the read-only faults when running as root)."""
    other = ["--read-only"] if os.geteuid() == 0 else []
    if fault == "444 file":
        path.chmod(0o444)
        folder.chmod(0o777)
        return other
    if fault == "555 folder":
        path.chmod(0o666)
        folder.chmod(0o555)
        return other
    if fault == "zeroed first page":
        _zero(path, 1)
    elif fault == "zeroed meta page":
        conn = sqlite3.connect(path)
        page = conn.execute("SELECT rootpage FROM sqlite_master WHERE name='meta'").fetchone()[0]
        conn.close()
        _zero(path, page)
    elif fault == "zeroed later pages":
        _zero(path, 4, 3)
    elif fault == "duplicate column":
        _sql(path, "UPDATE meta SET value='1' WHERE key='schema_version'")
    elif fault == "undecodable row":
        _sql(path, "UPDATE results SET times_ms='[1, [2' WHERE rowid=(SELECT MIN(rowid) "
                   "FROM results)")
    return []


def one(fault: str) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="ktune-store-faults-"))
    folder.chmod(0o755)
    path = folder / ".ktune.sqlite"
    try:
        first = _child([], path, 8)
        assert first.get("measured") == 8, first
        before = _rows(path)
        prefix = inject(fault, folder, path)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        second = _child(prefix, path, 16, full_disk=fault == "full disk mid-sweep")
        outcome = ("traceback" if second["traceback"] else
                   "completed" if "in_report" in second else "refused in one line")
        folder.chmod(0o755)
        untouched = hashlib.sha256(path.read_bytes()).hexdigest() == digest
        after = _rows(path)
        readable_before = before if fault not in ("zeroed first page", "zeroed meta page",
                                                  "zeroed later pages") else None
        lost_rows = 0 if untouched or readable_before is None else max(
            0, readable_before - (after or 0))
        measured = second.get("measured", 0)
        lost_measured = 16 - second.get("served", 0) if outcome == "traceback" else 0
        return {"fault": fault, "injected": 1, "outcome": outcome, "lines": len(second["lines"]),
                "traceback": bool(second["traceback"]), "measured": measured,
                "served": second.get("served", 0),
                "saved": 0 if after is None or before is None else after - before,
                "untouched": untouched, "lost": lost_rows + lost_measured,
                "first_line": (second["lines"] or [""])[0][:150]}
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder, ignore_errors=True)


def _child(flags: list[str], path: Path, budget: int, full_disk: bool = False) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(path), "--budget",
           str(budget), *flags] + (["--full-disk"] if full_disk else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd="/")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"lines": [], "traceback": proc.stderr[-2000:] or f"exit {proc.returncode}"}
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="folder for raw_output.txt")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--budget", type=int, default=16, help=argparse.SUPPRESS)
    ap.add_argument("--full-disk", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--read-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    _env()
    if args.child:
        print(json.dumps(sweep(args.child, args.budget, args.full_disk, args.read_only)))
        return
    rows = [one(f) for f in FAULTS]
    text = [json.dumps(r) for r in rows]
    head = ("fault", "injected", "outcome", "measured", "served", "saved", "untouched", "lost",
            "lines")
    widths = [max(len(h), *(len(str(r[h])) for r in rows)) for h in head]
    text += ["", "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)),
             *("  ".join(str(r[h]).ljust(w) for h, w in zip(head, widths, strict=True))
               for r in rows),
             "", *(f"{r['fault']}: {r['first_line']}" for r in rows if r["first_line"]),
             "", f"faults injected {sum(r['injected'] for r in rows) - 1}, results lost "
             f"{sum(r['lost'] for r in rows)}, tracebacks {sum(r['traceback'] for r in rows)}"]
    print("\n".join(text))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "raw_output.txt").write_text("\n".join(text) + "\n")


if __name__ == "__main__":
    main()
