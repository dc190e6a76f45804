"""The store's file: its schema, the migrations between versions, and how it is opened.

:mod:`jupyter_ktune.tune.store` reads and writes rows; this module owns what a file must look like
for that. Each schema version adds one step to :func:`migrate`, so a file written by an older
ktune opens in a newer one, and a newer file is one clear :class:`StoreError` in an older one.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from jupyter_ktune.errors import KtuneError

SCHEMA_VERSION = 3

SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS results (
    source_hash TEXT NOT NULL,
    config      TEXT NOT NULL,
    device      TEXT NOT NULL,
    toolchain   TEXT NOT NULL,
    stage       TEXT NOT NULL DEFAULT 'sweep',
    kernel      TEXT NOT NULL,
    backend     TEXT NOT NULL,
    status      TEXT NOT NULL,
    reason      TEXT NOT NULL DEFAULT '',
    median_ms   REAL,
    times_ms    TEXT,
    method      TEXT,
    measurement TEXT,
    static      TEXT,
    created     REAL NOT NULL,
    PRIMARY KEY (source_hash, config, device, toolchain, stage)
);
CREATE INDEX IF NOT EXISTS results_by_kernel ON results (source_hash, device, toolchain, stage);
"""
# v2: how many times in a row a variant failed transiently, so a resume retries it only once
_SCHEMA_V2 = "ALTER TABLE results ADD COLUMN attempts INTEGER NOT NULL DEFAULT 1"
# v3 (issue 21): best-of and top-k answered by SQL from an index on the key and the median (the
# median was a column from v1; rows were decoded in Python: 306 ms per best-of at 1M rows); the
# space's signature, so a sweep of an edited kernel finds the earlier version's ranking (warm
# start by kernel name and space); the history by time, bounded.
_SCHEMA_V3 = (
    "ALTER TABLE results ADD COLUMN space TEXT NOT NULL DEFAULT ''",
    "CREATE INDEX IF NOT EXISTS results_by_median ON results "
    "(source_hash, device, toolchain, stage, status, median_ms)",
    "CREATE INDEX IF NOT EXISTS results_by_created ON results "
    "(source_hash, device, toolchain, stage, created)",
    "CREATE INDEX IF NOT EXISTS results_by_space ON results (kernel, space, device, stage)",
)
COLUMNS = ("source_hash, config, device, toolchain, stage, kernel, backend, status, reason, "
           "median_ms, times_ms, method, measurement, static, created, attempts, space")
INSERT = f"INSERT OR REPLACE INTO results ({COLUMNS}) VALUES ({', '.join('?' * 17)})"
# SQLite's and the OS's words for "this file cannot be written here"
UNWRITABLE = ("readonly", "read-only", "unable to open", "disk is full", "disk i/o")


class StoreError(KtuneError, RuntimeError):
    """A store this ktune cannot use (written by a newer ktune), with the fix."""


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the file's schema to :data:`SCHEMA_VERSION`; returns the version found before.

    Version 0 is an empty file. Each later version adds one step here, in order, inside one
    transaction, so a file written by an older ktune opens in a newer one.
    """
    conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    found = schema_version(conn)
    if found == SCHEMA_VERSION:
        return found  # nothing to write: a read-only file opens too
    # one write transaction, the version read again inside it: two notebooks opening one old
    # file at once must not both add the v2 column
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = schema_version(conn)
        if found < 1:
            for stmt in filter(str.strip, SCHEMA_V1.split(";")):
                conn.execute(stmt)
        if found < 2:
            conn.execute(_SCHEMA_V2)
        if found < 3:
            for stmt in _SCHEMA_V3:
                conn.execute(stmt)
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                     (str(SCHEMA_VERSION),))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return found


def schema_version(conn: sqlite3.Connection) -> int:
    """Return the schema version of an open store; a newer one is a :class:`StoreError`."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    found = int(row[0]) if row else 0
    if found > SCHEMA_VERSION:
        raise StoreError(f"[ktune] the store was written by a newer ktune (store schema {found}; "
                         f"this ktune reads up to {SCHEMA_VERSION}). Upgrade: "
                         "pip install -U jupyter_ktune, or pass store= another path.")
    return found


def connect(path: str | Path, mode: str = "rwc") -> sqlite3.Connection:
    """Open an SQLite file by URI (``mode=ro`` reads a store in a read-only folder)."""
    uri = "file::memory:" if path == ":memory:" else f"{Path(path).absolute().as_uri()}?mode={mode}"
    return sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=30.0,
                           isolation_level=None)


def unwritable(exc: BaseException) -> bool:
    """Whether an error means "this store cannot be written here" rather than a bug."""
    if isinstance(exc, OSError):  # mkdir in a read-only folder, or under a file
        return True
    return any(word in str(exc).lower() for word in UNWRITABLE)
