"""bench/sampler and bench/thread_timeline.py: every thread of a process sampled, and where
each spent its time read back (the first minute's timeline beside its phases, issue 33)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("thread_timeline",
                                               ROOT / "bench" / "thread_timeline.py")
tl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tl)

CHILD = """
import threading, time
def spin_here():
    t = time.perf_counter()
    while time.perf_counter() - t < 0.6:
        pass
th = threading.Thread(target=spin_here, name="spinner")
th.start()
time.sleep(0.05)
sum(range(40_000_000))  # C code holding the GIL: the sampler gets none meanwhile
th.join()
time.sleep(0.1)
"""


def test_a_sampled_process_shows_each_thread_and_the_gil_held_in_c(tmp_path):
    env = {**os.environ, "KTUNE_BENCH_SAMPLE": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "bench" / "sampler"),
                                          os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", CHILD], env=env, check=True, timeout=60)
    procs = tl.read(tmp_path)
    assert len(procs) == 1
    (head, rows), = procs.values()
    assert head["pid"] and len(rows) > 20
    spun = [s for s in tl.stretches(rows, "spinner", 0.05, fine=True) if "spin_here" in s[2]]
    assert spun and max(b - a for a, b, _ in spun) >= 0.1, tl.stretches(rows, "spinner", 0, True)
    held = tl.gaps(rows, 0.05)
    assert held, "sum() held the GIL for the sampler's whole period: a gap"
    report = tl.timeline(tmp_path, min_ms=50, fine=True)
    assert "[spinner]" in report and "spin_here" in report and "gaps (the GIL held in C)" in report


def test_unset_the_sampler_records_nothing(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "bench" / "sampler")}
    env.pop("KTUNE_BENCH_SAMPLE", None)
    subprocess.run([sys.executable, "-c", "import time; time.sleep(0.05)"], env=env,
                   check=True, cwd=tmp_path, timeout=60)
    assert list(tmp_path.iterdir()) == []


def test_labels_name_the_import_and_waits_are_left_out(tmp_path):
    rows = [[0.00, {"MainThread": "runner/worker:_handle:10 | importlib:_load | import torch"}],
            [0.10, {"MainThread": "runner/worker:_handle:12 | torch:<module> | import torch"}],
            [0.20, {"MainThread": "runner/worker:main:268 | multiprocessing:_recv"}],
            [0.60, {"MainThread": "runner/worker:main:268 | multiprocessing:_recv"}],
            [0.61, {"MainThread": "backends/triton/backend:compile:335 | triton:compile"}],
            [0.90, {"MainThread": "backends/triton/backend:compile:336 | triton:make_ttir"}]]
    found = tl.stretches(rows, "MainThread", 0.05)
    assert found == [(0.0, 0.1, "runner/worker:_handle | import torch"),
                     (0.61, 0.9, "backends/triton/backend:compile | triton")], found
    (tmp_path / "7.jsonl").write_text(
        json.dumps({"pid": 7, "argv": "x"}) + "\n" + "\n".join(map(json.dumps, rows))
        + "\n{truncated", encoding="utf-8")
    assert "290ms  backends/triton/backend:compile | triton" in tl.timeline(tmp_path)
