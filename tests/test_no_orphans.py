"""A script killed mid-sweep leaves nothing behind (issue 34, item 3).

``kill -9`` of a process running a sweep with a compile pool: within 5 s its device worker, the
worker's input helper, the compile pool's processes and multiprocessing's resource tracker are
gone, and so are the named semaphores they held and the input sets drawn ahead in /dev/shm.
Before the fix the pool processes, the tracker and its five semaphores stayed (354 MB a pool
process on the H200 host). Processes and semaphores are found through /proc (no psutil): a
semaphore is this script's when one of its processes maps it, so other test runs on the host
creating their own do not count.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from test_reliability_faults import _alive  # a zombie counts as dead

TESTS = Path(__file__).parent

SWEEPER = textwrap.dedent('''
    import sys
    import numpy as np
    from jupyter_ktune.api import parse_cell
    from jupyter_ktune.tuning import tune

    def inputs():
        x = np.random.rand(64)
        return dict(x=x, y=np.empty_like(x), n=64)

    def reference(x, y, n):
        return 2 * x

    SRC = """# ktune: K in range(0, 8)
    def scale(x, y, n):
        while K == 3:   # the worker is stuck here when the script is killed
            pass
        y[:] = 2 * x
    """
    if __name__ == "__main__":  # the compile pool spawns processes that import this file
        spec = parse_cell("scale --backend fake --inputs inputs --reference reference --out y "
                          "--budget-ms 1 --timeout 600", SRC,
                          dict(inputs=inputs, reference=reference))
        tune(spec, "exhaustive", store=sys.argv[1], top_k=0, compile_workers=2,
             on_result=lambda p: print(p.done, flush=True))
''')


def _children() -> dict[int, list[int]]:
    """Parent pid -> child pids, for every process this test can read in /proc."""
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        out.setdefault(ppid, []).append(int(entry))
    return out


def _descendants(pid: int) -> set[int]:
    children, found, todo = _children(), set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in found:
                found.add(c)
                todo.append(c)
    return found


def _mapped_shm(pids: set[int]) -> set[str]:
    """The /dev/shm files (named semaphores, segments) these processes have mapped."""
    found = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as f:
                found |= {line.split()[-1] for line in f if "/dev/shm/" in line}
        except OSError:
            continue
    return found


def _results_until_stuck(proc: subprocess.Popen, quiet_s: float = 15.0,
                        limit_s: float = 300.0) -> int:
    """Read the sweep's result count until the worker is stuck in K == 3: three results in, or
    at least one and then none for ``quiet_s`` (the pool may deliver K == 3 before K == 2 on a
    loaded machine, and the sweep then waits on it). The reader is a thread, so a sweep that
    prints nothing fails the test after ``limit_s`` instead of hanging it."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    done, start = 0, time.monotonic()
    while time.monotonic() - start < limit_s:
        try:
            line = lines.get(timeout=quiet_s if done else limit_s - (time.monotonic() - start))
        except queue.Empty:
            return done  # quiet after a result: the worker spins in K == 3
        if line is None:
            return done  # the script ended (its error is on stderr)
        done = int(line)
        if done >= 3:
            return done
    return done


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and /dev/shm")
def test_kill_9_of_a_sweeping_script_leaves_no_process_semaphore_or_segment(tmp_path):
    prefix = f"ktune_orphan_{os.getpid()}_"
    script = tmp_path / "sweep.py"
    script.write_text(SWEEPER)
    env = dict(os.environ, KTUNE_SHM_PREFIX=prefix)
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "store.sqlite")],
                            stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        done = _results_until_stuck(proc)
        assert done, "the sweep delivered no result in 300 s"
        time.sleep(1.0)
        helpers = _descendants(proc.pid)
        held = _mapped_shm({proc.pid, *helpers})
        names = " ".join(Path(f"/proc/{p}/cmdline").read_text() for p in helpers if _alive(p))
    finally:
        proc.kill()
        proc.wait()
    # the compile pool (forked from multiprocessing's fork server where there is one), its
    # resource tracker, the worker and its input helper were all there
    pool = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() \
        else "spawn_main"
    for part in (pool, "resource_tracker", "runner.worker", "inputs_ahead"):
        assert part in names, f"no {part} process under the sweep: {names}"
    assert any(Path(p).name.startswith("sem.") for p in held), held
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in helpers) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = {p: Path(f"/proc/{p}/cmdline").read_text().replace("\0", " ")[:80]
            for p in helpers if _alive(p)}
    for p, cmd in left.items():  # the tracker unlinks the semaphores once the others are gone
        if "resource_tracker" not in cmd:
            os.kill(p, 9)
    assert not left, f"still running 5 s after the script was killed: {left}"
    assert not [p for p in held if os.path.exists(p)], "left in /dev/shm"
    assert not list(Path("/dev/shm").glob(f"{prefix}*")), "input sets left in /dev/shm"
