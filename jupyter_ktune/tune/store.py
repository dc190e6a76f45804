"""The results store: one SQLite file (WAL mode) beside the notebook, ``.ktune.sqlite``.

A row is one variant on one device with one toolchain, keyed by
``(source hash, config key, device, toolchain, stage)``; ``stage`` is ``"sweep"`` for the
sweep's measurement and ``"final"`` for the longer re-timing of the top candidates. Every timed
run (``times_ms``), every failure (status and reason) and the static report's summary are kept as
JSON, so any statistic can be recomputed later and a sweep can resume where it stopped.

Each result is committed on its own (WAL, ``synchronous=NORMAL``): a ``kill -9`` of the worker or
of the writing process loses at most the row being written, never the file.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from jupyter_ktune.errors import KtuneError
from jupyter_ktune.results import Measurement, Provenance, RunResult, Status, Timing
from jupyter_ktune.space import Config

SCHEMA_VERSION = 1
DEFAULT_NAME = ".ktune.sqlite"

_SCHEMA_V1 = """
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


@dataclass(frozen=True)
class StoreKey:
    """What a stored result is valid for: this source, on this device, with this toolchain."""

    source_hash: str
    device: str
    toolchain: str = ""

    @staticmethod
    def toolchain_text(toolchain: Mapping[str, str] | None) -> str:
        """Canonical text of a toolchain mapping (``{"triton": "3.6.0", ...}``)."""
        return json.dumps(dict(toolchain or {}), sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class StoredResult:
    """One row of the store, as the sweep and the exporters read it."""

    config: Config
    status: Status
    reason: str = ""
    times_ms: np.ndarray | None = None
    method: str = ""
    static: Mapping[str, Any] | None = None
    kernel: str = ""
    backend: str = ""
    device: str = ""
    stage: str = "sweep"
    created: float = 0.0
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def median_ms(self) -> float | None:
        """Median of the stored runs, None when the variant was not timed."""
        if self.times_ms is None or self.times_ms.size == 0:
            return None
        return float(np.median(self.times_ms))

    @property
    def ok(self) -> bool:
        """True when the variant ran correctly and was timed."""
        return self.status is Status.OK and self.median_ms is not None

    def to_run_result(self, source_hash: str = "") -> RunResult:
        """Rebuild a RunResult (timing and provenance only) for the panel's history."""
        measurement = None
        if self.times_ms is not None and self.times_ms.size:
            timing = Timing(times_ms=self.times_ms, method=self.method or "from the store")
            measurement = Measurement(timing, Provenance(self.device, timing.method, source_hash))
        return RunResult(name=self.kernel, backend=self.backend, config=dict(self.config),
                         status=self.status, reason=self.reason, measurement=measurement,
                         device=self.device)


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the file's schema to :data:`SCHEMA_VERSION`; returns the version found before.

    Version 0 is an empty file. Each later version adds one step here, in order, inside one
    transaction, so a file written by an older ktune opens in a newer one.
    """
    conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    found = int(row[0]) if row else 0
    if found > SCHEMA_VERSION:
        raise RuntimeError(f"[ktune] the store was written by a newer ktune (schema {found}, "
                           f"this one reads {SCHEMA_VERSION}). "
                           "Upgrade: pip install -U jupyter_ktune")
    with conn:
        if found < 1:
            conn.executescript(_SCHEMA_V1)
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                     (str(SCHEMA_VERSION),))
    return found


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str, separators=(",", ":"))


def static_summary(static: Any) -> dict[str, Any] | None:
    """Summarise a static report as compact JSON: per kernel registers, smem, spills, SASS mix."""
    if static is None:
        return None
    to_dict = getattr(static, "to_dict", None)
    if to_dict is None:
        return {"repr": repr(static)[:2000]}
    d = dict(to_dict())
    d.pop("ptxas_log", None)  # long and available again from a recompile
    return d


class Store:
    """An SQLite results store; safe to share between threads of one process.

    Parameters
    ----------
    path
        The database file; a folder means ``<folder>/.ktune.sqlite``. The default is
        ``.ktune.sqlite`` in the current directory, which is the notebook's folder in Jupyter.

    Examples
    --------
    >>> store = Store(tmp_path)                                  # doctest: +SKIP
    >>> store.put(key, result)                                   # doctest: +SKIP
    >>> store.get(key, result.config).median_ms                  # doctest: +SKIP
    """

    def __init__(self, path: str | Path | None = None):
        p = Path(path) if path is not None else Path.cwd()
        self.path = p / DEFAULT_NAME if p.is_dir() else p
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0,
                                     isolation_level=None)
        try:
            self.schema_found = self._setup()
        except sqlite3.OperationalError:
            self._conn.close()
            raise
        except sqlite3.DatabaseError as exc:  # not SQLite, or damaged (issue 9)
            self._conn.close()
            raise KtuneError(f"[ktune] {self.path} is not a ktune results store ({exc}). "
                             "Move it away, or pass store= another path.") from None

    def _setup(self, wait_s: float = 30.0) -> int:
        """WAL mode and migration, retried while another notebook holds the new file's lock.

        Switching a new file to WAL takes an exclusive lock that SQLite's busy timeout does not
        wait for: two notebooks opening one new store at once got "database is locked" (issue 9).
        """
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                return migrate(self._conn)
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def close(self) -> None:
        """Close the connection (committed rows are already on disk)."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -----------------------------------------------------------------------------
    def put(self, key: StoreKey, result: RunResult, stage: str = "sweep") -> StoredResult:
        """Write one result and commit it at once; returns what was stored."""
        m = result.measurement
        times = None if m is None else np.asarray(m.timing.times_ms, dtype=float)
        method = "" if m is None else m.timing.method
        row = (key.source_hash, Config(result.config).key(), key.device, key.toolchain, stage,
               result.name, result.backend, result.status.value, result.reason,
               None if times is None or not times.size else float(np.median(times)),
               None if times is None else _json(times.tolist()), method,
               None if m is None else _json(m.to_dict() | {"timing": None}),
               _json(static_summary(result.static)), time.time())
        with self._lock:
            self._conn.execute("INSERT OR REPLACE INTO results VALUES "
                               "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", row)
        return self._row(row)

    # -- reading -----------------------------------------------------------------------------
    def get(self, key: StoreKey, config: Mapping[str, Any],
            stage: str = "sweep") -> StoredResult | None:
        """Return the stored result of ``config`` under ``key``, or None."""
        with self._lock:
            row = self._conn.execute(
                "SELECT * FROM results WHERE source_hash=? AND config=? AND device=? "
                "AND toolchain=? AND stage=?",
                (key.source_hash, Config(config).key(), key.device, key.toolchain, stage),
            ).fetchone()
        return None if row is None else self._row(row)

    def results(self, key: StoreKey | None = None, stage: str | None = "sweep",
                source_hash: str | None = None) -> list[StoredResult]:
        """All rows for ``key`` (or for a source hash on any device), oldest first."""
        where, args = [], []
        if key is not None:
            where += ["source_hash=?", "device=?", "toolchain=?"]
            args += [key.source_hash, key.device, key.toolchain]
        elif source_hash is not None:
            where.append("source_hash=?")
            args.append(source_hash)
        if stage is not None:
            where.append("stage=?")
            args.append(stage)
        sql = "SELECT * FROM results" + (" WHERE " + " AND ".join(where) if where else "")
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY created", args).fetchall()
        return [self._row(r) for r in rows]

    def keys(self) -> list[StoreKey]:
        """Every (source, device, toolchain) the store holds results for."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT DISTINCT source_hash, device, toolchain FROM results").fetchall()
        return [StoreKey(*r) for r in rows]

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM results").fetchone()[0])

    def __iter__(self) -> Iterator[StoredResult]:
        return iter(self.results(stage=None))

    @staticmethod
    def _row(row: tuple) -> StoredResult:
        (_src, config, device, _tool, stage, kernel, backend, status, reason, _median, times,
         method, _meas, static, created) = row
        arr = None if times is None else np.asarray(json.loads(times), dtype=float)
        return StoredResult(config=Config(json.loads(config)), status=Status(status),
                            reason=reason, times_ms=arr, method=method or "",
                            static=None if static is None else json.loads(static),
                            kernel=kernel, backend=backend, device=device, stage=stage,
                            created=created)
