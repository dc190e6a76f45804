"""The results store: one SQLite file (WAL mode) beside the notebook, ``.ktune.sqlite``.

A row is one variant on one device with one toolchain, keyed by
``(source hash, config key, device, toolchain, stage)``; ``stage`` is ``"sweep"`` for the
sweep's measurement and ``"final"`` for the longer re-timing of the top candidates. Every timed
run (``times_ms``), every failure (status and reason) and the static report's summary are kept as
JSON, so any statistic can be recomputed later and a sweep can resume where it stopped.

Each result is committed on its own (WAL, ``synchronous=NORMAL``): a ``kill -9`` of the worker or
of the writing process loses at most the row being written, never the file.

A store that cannot be written (a read-only folder or file, a full disk) is still read, through
SQLite's ``mode=ro``, into memory; results are then kept there, with one warning that they are
not saved, rather than ending the sweep with a traceback (issue 15). A row that cannot be decoded
is skipped and counted (:attr:`Store.skipped`), with one warning.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from jupyter_ktune.errors import KtuneError
from jupyter_ktune.results import Measurement, Provenance, RunResult, Status, Timing
from jupyter_ktune.space import Config
from jupyter_ktune.tune.store_schema import SCHEMA_V1 as SCHEMA_V1  # tests write v1 files
from jupyter_ktune.tune.store_schema import INSERT, connect, schema_version, unwritable
from jupyter_ktune.tune.store_schema import SCHEMA_VERSION as SCHEMA_VERSION
from jupyter_ktune.tune.store_schema import StoreError as StoreError
from jupyter_ktune.tune.store_schema import migrate as migrate

DEFAULT_NAME = ".ktune.sqlite"
# Failures that say nothing about the variant itself: run once more on resume (issue 15).
TRANSIENT = frozenset({Status.CRASHED, Status.TIMEOUT})
RETRIES = 1


class StoreWarning(UserWarning):
    """Results not saved, or rows skipped: the sweep goes on, the user is told once."""


@dataclass(frozen=True)
class StoreKey:
    """What a stored result is valid for: this source, on this device, with this toolchain."""

    source_hash: str
    device: str
    toolchain: str = ""
    # the space's signature, written with each row (warm start finds earlier versions by kernel
    # name and space); not part of what a result is valid for, so not compared
    space: str = field(default="", compare=False)

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
    attempts: int = 1

    @property
    def retry(self) -> bool:
        """True when this is a transient failure that a resume should run once more."""
        return self.status in TRANSIENT and self.attempts <= RETRIES

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
        self._lock = threading.Lock()
        self._skipped: set[tuple] = set()  # keys of rows that could not be decoded
        self.saving = True  # False: results are kept in memory only (see :meth:`put`)
        self._why_unsaved = ""
        self._warned: set[str] = set()
        self._conn: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = connect(self.path)
            self.schema_found = self._setup()
        except StoreError as exc:  # a newer schema: name the file too
            self._close_quietly()
            raise StoreError(f"[ktune] {self.path}: {str(exc).removeprefix('[ktune] ')}") \
                from None
        except (OSError, sqlite3.OperationalError) as exc:
            self._close_quietly()
            if not unwritable(exc):
                raise
            self.schema_found = self._open_in_memory(exc)
        except sqlite3.DatabaseError as exc:  # not SQLite, or damaged (issue 9)
            self._close_quietly()
            raise KtuneError(f"[ktune] {self.path} is not a ktune results store ({exc}). "
                             "Move it away, or pass store= another path.") from None

    @property
    def skipped(self) -> int:
        """How many rows could not be decoded (each was skipped; one warning said so)."""
        return len(self._skipped)

    def _close_quietly(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _open_in_memory(self, why: BaseException) -> int:
        """Read what the file holds (``mode=ro``) into memory, and keep new results there."""
        mem = connect(":memory:")
        found = 0
        if self.path.is_file():
            try:
                ro = connect(self.path, "ro")
            except sqlite3.OperationalError:  # a WAL file whose -shm cannot be created here
                ro = connect(self.path, "ro&immutable=1")
            try:
                ro.execute("SELECT 1 FROM sqlite_master").fetchone()
                ro.backup(mem)
            except sqlite3.DatabaseError as exc:
                raise KtuneError(f"[ktune] {self.path} is not a ktune results store ({exc}). "
                                 "Move it away, or pass store= another path.") from None
            finally:
                ro.close()
            mem.execute("CREATE TABLE IF NOT EXISTS meta "
                        "(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            found = schema_version(mem)
        migrate(mem)
        self._to_memory(mem, why)
        return found

    def _to_memory(self, mem: sqlite3.Connection, why: BaseException) -> None:
        self._conn, self.saving = mem, False
        self._why_unsaved = str(why).strip() or type(why).__name__

    def _warn_once(self, kind: str, text: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(text, StoreWarning, stacklevel=3)

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
            self._close_quietly()

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
        config = Config(result.config).key()
        row = (key.source_hash, config, key.device, key.toolchain, stage,
               result.name, result.backend, result.status.value, result.reason,
               None if times is None or not times.size else float(np.median(times)),
               None if times is None else _json(times.tolist()), method,
               None if m is None else _json(m.to_dict() | {"timing": None}),
               _json(static_summary(result.static)), time.time())
        space = key.space
        with self._lock:
            attempts = 1
            if result.status in TRANSIENT:  # crashed again: count it, so resumes retry once
                prev = self._conn.execute(
                    "SELECT status, attempts FROM results WHERE source_hash=? AND config=? "
                    "AND device=? AND toolchain=? AND stage=?", row[:5]).fetchone()
                if prev is not None and prev[0] in {s.value for s in TRANSIENT}:
                    attempts = int(prev[1]) + 1
            row += (attempts, space)
            self._write(row)
            self._skipped.discard(row[:5])  # a skipped row, timed again, is whole now
        if not self.saving:
            self._warn_once("unsaved", f"[ktune] {self.path}: cannot write the store "
                            f"({self._why_unsaved}); results are kept in memory and are lost "
                            "when the kernel stops. Free disk space, or pass store= a "
                            "writable path.")
        return self._row(row)

    def _write(self, row: tuple) -> None:
        """Insert one row; a file that stops taking writes (full disk) hands over to memory."""
        try:
            self._conn.execute(INSERT, row)  # type: ignore[union-attr]
        except sqlite3.OperationalError as exc:
            if not self.saving or not unwritable(exc):
                raise
            mem = connect(":memory:")
            self._conn.backup(mem)  # type: ignore[union-attr]
            self._conn.close()  # type: ignore[union-attr]
            self._to_memory(mem, exc)
            mem.execute(INSERT, row)

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
        return None if row is None else next(iter(self._decode([row])), None)

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
        return self._decode(rows)

    def best(self, key: StoreKey, stage: str = "sweep") -> StoredResult | None:
        """The fastest correct result under ``key``, found by SQL (an index on the median)."""
        top = self.top(key, 1, stage)
        return top[0] if top else None

    def top(self, key: StoreKey, k: int, stage: str = "sweep") -> list[StoredResult]:
        """The ``k`` fastest correct results under ``key``, fastest first; only they are decoded
        (decoding every row of a key took 306 ms at 10k configs, issue 21)."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT * FROM results WHERE source_hash=? AND device=? AND toolchain=? "
                "AND stage=? AND status=? AND median_ms IS NOT NULL ORDER BY median_ms LIMIT ?",
                (key.source_hash, key.device, key.toolchain, stage, Status.OK.value, int(k)),
            ).fetchall()
        return self._decode(rows)

    def history(self, key: StoreKey, limit: int = 500,
                stage: str = "sweep") -> list[StoredResult]:
        """The latest ``limit`` results under ``key``, oldest first: the panel's bounded history."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT * FROM results WHERE source_hash=? AND device=? AND toolchain=? "
                "AND stage=? ORDER BY created DESC LIMIT ?",
                (key.source_hash, key.device, key.toolchain, stage, int(limit))).fetchall()
        return self._decode(rows[::-1])

    def earlier_versions(self, kernel: str, space: str, device: str,
                         exclude: str = "") -> list[StoreKey]:
        """Keys of other versions (source hashes) of ``kernel`` with the same space signature on
        ``device``, newest first: where a warm start takes its order from."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT source_hash, device, toolchain, MAX(created) AS t FROM results "
                "WHERE kernel=? AND space=? AND device=? AND stage='sweep' AND source_hash<>? "
                "GROUP BY source_hash, device, toolchain ORDER BY t DESC",
                (kernel, space, device, exclude)).fetchall()
        return [StoreKey(r[0], r[1], r[2], space) for r in rows]

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

    def _decode(self, rows: list[tuple]) -> list[StoredResult]:
        """Decode rows; one that cannot be decoded is skipped and counted, with one warning.

        A hand-edited or half-written JSON blob used to end the whole sweep (issue 15).
        """
        out = []
        for r in rows:
            try:
                out.append(self._row(r))
            except (ValueError, TypeError, AttributeError, KeyError) as exc:
                self._skipped.add(tuple(r[:5]))
                self._warn_once("skipped", f"[ktune] {self.path}: skipped a result that cannot "
                                f"be read ({type(exc).__name__}: {str(exc)[:80]}); such rows are "
                                "timed again and counted in store.skipped.")
        return out

    @staticmethod
    def _row(row: tuple) -> StoredResult:
        (_src, config, device, _tool, stage, kernel, backend, status, reason, _median, times,
         method, _meas, static, created, attempts, *_space) = row
        arr = None if times is None else np.asarray(json.loads(times), dtype=float)
        if arr is not None and arr.ndim != 1:
            raise ValueError(f"times_ms is not a list of numbers: {times[:40]}")
        return StoredResult(config=Config(dict(json.loads(config))), status=Status(status),
                            reason=reason, times_ms=arr, method=method or "",
                            static=None if static is None else json.loads(static),
                            kernel=kernel, backend=backend, device=device, stage=stage,
                            created=created, attempts=int(attempts))
