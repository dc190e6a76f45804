"""The SQLite store: WAL, schema version and migration, commit per result, kill -9 safety."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from jupyter_ktune.results import Measurement, Provenance, RunResult, Status, Timing
from jupyter_ktune.space import Config
from jupyter_ktune.tuning.store import SCHEMA_VERSION, Store, StoreKey, migrate

KEY = StoreKey("abc123", "NVIDIA H200", StoreKey.toolchain_text({"triton": "3.6.0"}))


def result(block, ms=None, status=Status.OK, reason=""):
    m = None
    if ms is not None:
        t = Timing(times_ms=np.asarray(ms, dtype=float), method="cuda events")
        m = Measurement(t, Provenance("NVIDIA H200", t.method, "abc123"))
    return RunResult(name="scale", backend="cuda", config={"BLOCK": block}, status=status,
                     reason=reason, measurement=m)


def test_every_run_failure_and_schema_is_kept(tmp_path):
    with Store(tmp_path) as s:
        assert s.path == tmp_path / ".ktune.sqlite"
        s.put(KEY, result(128, [1.0, 1.2, 1.1]))
        s.put(KEY, result(256, status=Status.COMPILE_ERROR, reason="line 3: error"))
        got = s.get(KEY, {"BLOCK": 128})
        assert got.times_ms.tolist() == [1.0, 1.2, 1.1] and got.median_ms == 1.1 and got.ok
        bad = s.get(KEY, Config({"BLOCK": 256}))
        assert bad.status is Status.COMPILE_ERROR and bad.reason == "line 3: error"
        assert s.get(KEY, {"BLOCK": 512}) is None
        other = StoreKey("abc123", "NVIDIA H100", KEY.toolchain)
        assert s.get(other, {"BLOCK": 128}) is None  # another device never reuses timings
        assert len(s) == 2 and s.keys() == [KEY]
    conn = sqlite3.connect(tmp_path / ".ktune.sqlite")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] \
        == str(SCHEMA_VERSION)


def test_migration_is_idempotent_and_refuses_a_newer_file(tmp_path):
    conn = sqlite3.connect(tmp_path / "x.sqlite")
    assert migrate(conn) == 0
    assert migrate(conn) == SCHEMA_VERSION
    conn.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    conn.commit()
    with pytest.raises(RuntimeError, match="newer ktune"):
        migrate(conn)


def test_run_result_round_trip_for_the_panel(tmp_path):
    with Store(tmp_path / "s.sqlite") as s:
        stored = s.put(KEY, result(64, [2.0, 2.0]))
        r = stored.to_run_result(KEY.source_hash)
        assert r.median_ms == 2.0 and r.config == {"BLOCK": 64} and r.status is Status.OK


WRITER = textwrap.dedent("""
    import sys, time
    import numpy as np
    sys.path.insert(0, {tests!r})
    from test_store import KEY, result
    from jupyter_ktune.tuning.store import Store
    s = Store({path!r})
    for i in range(100000):
        s.put(KEY, result(i, [1.0 + i]))
        print(i, flush=True)
        time.sleep(0.002)
""")


def test_store_survives_kill_9_of_the_writer_mid_sweep(tmp_path):
    path = tmp_path / "k.sqlite"
    tests = os.path.dirname(__file__)
    proc = subprocess.Popen([sys.executable, "-c", WRITER.format(tests=tests, path=str(path))],
                            stdout=subprocess.PIPE, text=True)
    written = -1
    deadline = time.time() + 60
    while written < 40 and time.time() < deadline:
        written = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert written >= 40
    with Store(path) as s:  # opens (WAL recovery), and every committed row is there
        rows = s.results(KEY)
        blocks = {r.config["BLOCK"] for r in rows}
        assert set(range(written + 1)) <= blocks
        assert all(r.times_ms is not None for r in rows)
        s.put(KEY, result(-1, [5.0]))  # and it is writable again
