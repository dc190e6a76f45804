"""The store's file: its schema, the migrations between versions, and how it is opened.

:mod:`jupyter_ktune.tuning.store` reads and writes rows; this module owns what a file must look like
for that. Each schema version adds one step to :func:`migrate`, so a file written by an older
ktune opens in a newer one, and a newer file is one clear :class:`StoreError` in an older one.

:func:`open_store` never writes to a file it cannot use: a read-only file or folder is read
(``mode=ro``, or ``immutable`` when SQLite cannot even create the WAL index beside it) into
memory, and new results stay there; a damaged file (zeroed pages, a damaged meta table, columns
that disagree with its recorded version) is one :class:`StoreDamaged` line naming it and saying
it was left untouched, never a raw sqlite traceback (issue 34).
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from jupyter_ktune.errors import KtuneError

SCHEMA_VERSION = 4

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
# v4 (issue 34): the problem a result was measured on. ``problem`` (the inputs function, the
# reference, outputs, tolerances: ``problem_key``) joins the primary key, so n=256 and n=65536
# are two rows, not one overwriting the other; ``inputs_seen`` holds the shapes, dtypes and
# scalars of the input set the worker drew. SQLite cannot change a primary key in place: the
# table is rebuilt. Rows of older files get problem '' and match no current key: they were
# stored without their problem, so nobody can say what they measured; they are kept, and a
# warm start may still take its order from them (and says so).
_V3_COLUMNS = ("source_hash, config, device, toolchain, stage, kernel, backend, status, reason, "
               "median_ms, times_ms, method, measurement, static, created, attempts, space")
COLUMNS = _V3_COLUMNS + ", problem, inputs_seen"
_SCHEMA_V4 = (
    """CREATE TABLE results_v4 (
    source_hash TEXT NOT NULL, config TEXT NOT NULL, device TEXT NOT NULL,
    toolchain TEXT NOT NULL, stage TEXT NOT NULL DEFAULT 'sweep', kernel TEXT NOT NULL,
    backend TEXT NOT NULL, status TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',
    median_ms REAL, times_ms TEXT, method TEXT, measurement TEXT, static TEXT,
    created REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 1, space TEXT NOT NULL DEFAULT '',
    problem TEXT NOT NULL DEFAULT '', inputs_seen TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (source_hash, problem, config, device, toolchain, stage))""",
    f"INSERT INTO results_v4 ({_V3_COLUMNS}) SELECT {_V3_COLUMNS} FROM results",
    "DROP TABLE results",
    "ALTER TABLE results_v4 RENAME TO results",
    "CREATE INDEX results_by_median ON results "
    "(source_hash, problem, device, toolchain, stage, status, median_ms)",
    "CREATE INDEX results_by_created ON results "
    "(source_hash, problem, device, toolchain, stage, created)",
    "CREATE INDEX results_by_space ON results (kernel, space, device, stage)",
)
INSERT = f"INSERT OR REPLACE INTO results ({COLUMNS}) VALUES ({', '.join('?' * 19)})"
# SQLite's and the OS's words for "this file cannot be written here"
UNWRITABLE = ("readonly", "read-only", "unable to open", "disk is full", "disk i/o")


class StoreError(KtuneError, RuntimeError):
    """A store this ktune cannot use (written by a newer ktune), with the fix."""


class StoreDamaged(StoreError):
    """A damaged file, or not an SQLite file at all: it was left untouched."""


def damaged(path: str | Path, exc: BaseException) -> StoreDamaged:
    """The one line for a store that cannot be read: which file, why, that it was not touched."""
    why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return StoreDamaged(f"[ktune] {path} is damaged or is not a ktune results store ({why}); it "
                        "was left untouched. Move it away (or restore a copy) and run again, or "
                        "pass store= another path.")


def is_damage(exc: BaseException) -> bool:
    """Whether an sqlite error says the file's contents are broken, not that it is busy or
    unwritable: corrupt pages and non-databases (``DatabaseError`` itself), and columns or tables
    that disagree with the file's recorded schema version."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    if not isinstance(exc, sqlite3.OperationalError):
        return True
    text = str(exc).lower()
    return "duplicate column" in text or "already exists" in text or "malformed" in text


@dataclass
class Opened:
    """An open store: its connection, whether it is the file's (False: memory), why not."""

    conn: sqlite3.Connection
    found: int  # the schema version the file had
    saving: bool = True
    why_unsaved: str = ""


def open_store(path: Path) -> Opened:
    """Open (or create) the store at ``path``, migrated; see the module docstring for faults."""
    conn = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = connect(path)
        return Opened(conn, _setup(conn))
    except StoreError as exc:  # a newer schema: name the file too
        _close(conn)
        raise StoreError(f"[ktune] {path}: {str(exc).removeprefix('[ktune] ')}") from None
    except (OSError, sqlite3.DatabaseError) as exc:
        _close(conn)
        if isinstance(exc, sqlite3.DatabaseError) and is_damage(exc):
            raise damaged(path, exc) from None
        if not unwritable(exc):
            raise
        return _read_into_memory(path, exc)


def _close(conn: sqlite3.Connection | None) -> None:
    if conn is not None:
        conn.close()


def _read_into_memory(path: Path, why: BaseException) -> Opened:
    """Read what a file we cannot write holds into memory, where new results are then kept.

    A WAL file in a read-only folder cannot be opened ``mode=ro`` alone (SQLite must create its
    ``-shm`` index, "attempt to write a readonly database"): it is read ``immutable`` then, which
    is right as nobody can write it here either.
    """
    mem = connect(":memory:")
    found = 0
    if path.is_file():
        for mode in ("ro", "ro&immutable=1"):
            ro = None
            try:
                ro = connect(path, mode)
                ro.execute("SELECT 1 FROM sqlite_master").fetchone()
                ro.backup(mem)
                break
            except sqlite3.DatabaseError as exc:
                if is_damage(exc) or mode != "ro":
                    raise damaged(path, exc) from None
            finally:
                _close(ro)
        mem.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        try:
            found = schema_version(mem)
            migrate(mem)
        except StoreError as exc:
            raise StoreError(f"[ktune] {path}: {str(exc).removeprefix('[ktune] ')}") from None
        except sqlite3.DatabaseError as exc:
            raise damaged(path, exc) from None
    else:
        migrate(mem)
    return Opened(mem, found, False, str(why).strip() or type(why).__name__)


def _setup(conn: sqlite3.Connection, wait_s: float = 30.0) -> int:
    """WAL mode and migration, retried while another notebook holds the new file's lock.

    Switching a new file to WAL takes an exclusive lock that SQLite's busy timeout does not
    wait for: two notebooks opening one new store at once got "database is locked" (issue 9).
    """
    deadline = time.monotonic() + wait_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            return migrate(conn)
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


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
        if found < 4:
            for stmt in _SCHEMA_V4:
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
