"""Read ``bench/sampler``'s folder: per process and thread, the stretches spent on one label.

    python bench/thread_timeline.py DIR [--min-ms 20] [--gap-ms 30] [--fine]

Every time is in seconds after the first sample of any process (the notebook's, which starts
first), so the worker's compile and the notebook's panel line up. A stretch is consecutive
samples of one thread with one label, at least ``--min-ms`` long; labels lose their line
numbers and, unless ``--fine``, the innermost function (an import is named by its module). A
thread waiting (a socket, a queue, a lock, a sleep) is left out. ``gaps`` lists the stretches
in which the sampler got no GIL at all: some thread of that process held it in C.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

#: labels of a thread that waits: left out of the stretches
WAITING = re.compile(r"watch|_recv|wait|select|concurrent:_worker|poll|sleep|accept|serve_forever")


def coarse(label: str | None, fine: bool = False) -> str | None:
    """One label without its line number (and its innermost function unless ``fine``)."""
    if label is None:
        return None
    parts = [p.strip() for p in label.split("|")]
    ours = re.sub(r":\d+$", "", parts[0])
    if len(parts) > 2:  # an import: the module, not where importlib is
        return f"{ours} | {parts[2]}"
    return f"{ours} | {parts[1] if fine else parts[1].split(':')[0]}"


def read(folder: Path) -> dict[str, tuple[dict, list]]:
    """pid -> (its header, its samples ``[time, {thread: label}]``), the unreadable lines
    (a process killed mid-write) skipped."""
    out = {}
    for f in sorted(folder.glob("*.jsonl")):
        head, rows = {}, []
        for line in f.read_text(encoding="utf-8").splitlines():
            try:
                x = json.loads(line)
            except ValueError:
                continue
            if isinstance(x, dict):
                head = x
            else:
                rows.append(x)
        if rows:
            out[f.stem] = (head, sorted(rows, key=lambda r: r[0]))
    return out


def stretches(rows: list, thread: str, min_s: float, fine: bool = False) -> list:
    """``(start, end, label)`` of ``thread``'s runs of one label, at least ``min_s`` long; a
    run whose first sample waits (:data:`WAITING`, read before the label is made coarse) is
    left out."""
    found, cur, start, prev, raw = [], None, 0.0, 0.0, ""
    for t, row in rows:
        lab = coarse(row.get(thread), fine)
        if lab != cur:
            if cur is not None:
                found.append((start, prev, cur, raw))
            cur, start, raw = lab, t, row.get(thread) or ""
        prev = t
    if cur is not None:
        found.append((start, prev, cur, raw))
    return [(a, b, lab) for a, b, lab, first in found
            if b - a >= min_s and not WAITING.search(first)]


def gaps(rows: list, min_s: float) -> list[tuple[float, float]]:
    """``(start, seconds)`` where consecutive samples are ``min_s`` or more apart."""
    return [(a[0], b[0] - a[0]) for a, b in zip(rows, rows[1:], strict=False)
            if b[0] - a[0] >= min_s]


def timeline(folder: Path, min_ms: float = 20, gap_ms: float = 30, fine: bool = False) -> str:
    """The report, as text."""
    procs = read(folder)
    if not procs:
        return f"no samples in {folder}"
    t0 = min(rows[0][0] for _, rows in procs.values())
    out = []
    for pid, (head, rows) in sorted(procs.items(), key=lambda kv: kv[1][1][0][0]):
        out.append(f"\n## pid {pid} ({head.get('argv', '?')}): {len(rows)} samples, "
                   f"{rows[0][0] - t0:.3f}-{rows[-1][0] - t0:.3f} s")
        held = gaps(rows, gap_ms / 1e3)
        if held:
            out.append("  gaps (the GIL held in C): " + ", ".join(
                f"{a - t0:.2f}+{d * 1e3:.0f}ms" for a, d in held))
        for thread in dict.fromkeys(k for _, row in rows for k in row):
            found = stretches(rows, thread, min_ms / 1e3, fine)
            if found:
                out.append(f"  [{thread}]")
                out += [f"    {a - t0:7.3f} {b - t0:7.3f} {(b - a) * 1e3:6.0f}ms  {lab}"
                        for a, b, lab in found]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--min-ms", type=float, default=20)
    ap.add_argument("--gap-ms", type=float, default=30)
    ap.add_argument("--fine", action="store_true", help="keep the innermost function")
    a = ap.parse_args()
    print(timeline(a.folder, a.min_ms, a.gap_ms, a.fine))
    return 0


if __name__ == "__main__":
    sys.exit(main())
