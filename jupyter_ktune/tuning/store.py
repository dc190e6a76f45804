"""The results store: one SQLite file (WAL mode) beside the notebook, ``.ktune.sqlite``.

A row is one variant of one problem on one device with one toolchain, keyed by
``(source hash, problem, config key, device, toolchain, stage)``; ``problem`` is
:func:`~jupyter_ktune.problem_key.problem_key` (the inputs function, reference, outputs and
tolerances: a changed problem is measured again, issue 34), and each row also keeps the
shapes, dtypes and scalars of the input set it was measured on (``inputs_seen``); ``stage`` is
``"sweep"`` for the sweep's measurement and ``"final"`` for the longer re-timing of the top
candidates. Every timed
run (``times_ms``), every failure (status and reason) and the static report's summary are kept as
JSON, so any statistic can be recomputed later and a sweep can resume where it stopped.

Each result is committed on its own (WAL, ``synchronous=NORMAL``): a ``kill -9`` of the worker or
of the writing process loses at most the row being written, never the file.

A store that cannot be written (a read-only folder or file, a full disk) is still read, through
SQLite's ``mode=ro``, into memory; results are then kept there, with one warning that they are
not saved, rather than ending the sweep with a traceback (issues 15, 34). A damaged file is left
untouched: one ``[ktune]`` line when it is opened, or, found mid-sweep, one warning and the sweep
goes on in memory (:mod:`~jupyter_ktune.tuning.store_schema`). A row that cannot be decoded is
skipped and counted (:attr:`Store.skipped`), with one warning.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from jupyter_ktune.results import Measurement, Provenance, RunResult, Status, Timing
from jupyter_ktune.space import Config
from jupyter_ktune.tuning.store_schema import (
    INSERT,
    connect,
    damaged,
    is_damage,
    open_store,
    unwritable,
)
from jupyter_ktune.tuning.store_schema import SCHEMA_V1 as SCHEMA_V1  # tests write v1 files
from jupyter_ktune.tuning.store_schema import SCHEMA_VERSION as SCHEMA_VERSION
from jupyter_ktune.tuning.store_schema import StoreDamaged as StoreDamaged
from jupyter_ktune.tuning.store_schema import StoreError as StoreError
from jupyter_ktune.tuning.store_schema import migrate as migrate

DEFAULT_NAME = ".ktune.sqlite"
# Failures that say nothing about the variant itself: run once more on resume (issue 15).
TRANSIENT = frozenset({Status.CRASHED, Status.TIMEOUT})
RETRIES = 1


class StoreWarning(UserWarning):
    """Results not saved, or rows skipped: the sweep goes on, the user is told once."""


@dataclass(frozen=True)
class StoreKey:
    """What a stored result is valid for: this source and problem, on this device and toolchain.

    ``inputs_seen`` (the worker's :func:`~jupyter_ktune.problem_key.inputs_signature` of the
    input set) is compared when known; None: not known yet, rows are read whatever it was.
    """

    source_hash: str
    device: str
    toolchain: str = ""
    # the space's signature, written with each row (warm start finds earlier versions by kernel
    # name and space); not part of what a result is valid for, so not compared
    space: str = field(default="", compare=False)
    problem: str = ""
    inputs_seen: str | None = field(default=None, compare=False)

    def where(self) -> tuple[str, list[str]]:
        """The SQL condition (and its arguments) that selects this key's rows."""
        sql = "source_hash=? AND problem=? AND device=? AND toolchain=?"
        args = [self.source_hash, self.problem, self.device, self.toolchain]
        if self.inputs_seen is not None:
            sql += " AND inputs_seen=?"
            args.append(self.inputs_seen)
        return sql, args

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
        self._warned: set[str] = set()
        opened = open_store(self.path)
        self._conn: sqlite3.Connection | None = opened.conn
        self.schema_found = opened.found
        self.saving = opened.saving  # False: results are kept in memory only (see :meth:`put`)
        self._why_unsaved = opened.why_unsaved

    @property
    def skipped(self) -> int:
        """How many rows could not be decoded (each was skipped; one warning said so)."""
        return len(self._skipped)

    def _warn_once(self, kind: str, text: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(text, StoreWarning, stacklevel=3)

    def _warn_unsaved(self) -> None:
        self._warn_once("unsaved", f"[ktune] {self.path}: cannot write the store "
                        f"({self._why_unsaved}); its results are read, new results are kept in "
                        "memory and are lost when the kernel stops. Free disk space, or pass "
                        "store= a writable path.")

    def _to_memory(self, why: BaseException, copy: bool = True) -> None:
        """Go on in memory: with the rows so far (a full disk) or none (a damaged file)."""
        mem = connect(":memory:")
        if copy:
            self._conn.backup(mem)  # type: ignore[union-attr]
        else:
            migrate(mem)
        self._conn.close()  # type: ignore[union-attr]
        self._conn, self.saving = mem, False
        self._why_unsaved = str(why).strip() or type(why).__name__

    def _sql(self, sql: str, args: Sequence[Any] = ()) -> list[tuple]:
        """Run one statement under the lock; a file found damaged mid-sweep (a zeroed page) is
        left untouched from then on, with one warning, and the sweep goes on in memory."""
        with self._lock:
            try:
                return self._conn.execute(sql, args).fetchall()  # type: ignore[union-attr]
            except sqlite3.DatabaseError as exc:
                if not self.saving or not is_damage(exc):
                    raise
                self._to_memory(exc, copy=False)
                self._warned.add("unsaved")  # this one warning says where results are kept
                self._warn_once("damaged", str(damaged(self.path, exc)).replace(
                    "; it was left untouched.", "; it was left untouched and results are kept "
                    "in memory, lost when the kernel stops."))
                return self._conn.execute(sql, args).fetchall()

    def close(self) -> None:
        """Close the connection (committed rows are already on disk)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

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
        pk = (key.source_hash, config, key.device, key.toolchain, stage, key.problem)
        row = (*pk[:5], result.name, result.backend, result.status.value, result.reason,
               None if times is None or not times.size else float(np.median(times)),
               None if times is None else _json(times.tolist()), method,
               None if m is None else _json(m.to_dict() | {"timing": None}),
               _json(static_summary(result.static)), time.time())
        attempts = 1
        if result.status in TRANSIENT:  # crashed again: count it, so resumes retry once
            prev = self._sql("SELECT status, attempts FROM results WHERE source_hash=? AND "
                             "config=? AND device=? AND toolchain=? AND stage=? AND problem=?",
                             pk)
            if prev and prev[0][0] in {s.value for s in TRANSIENT}:
                attempts = int(prev[0][1]) + 1
        row += (attempts, key.space, key.problem, key.inputs_seen or "")
        self._write(INSERT, row)
        self._skipped.discard(pk)  # a skipped row, timed again, is whole now
        if not self.saving:
            self._warn_unsaved()
        return self._row(row)

    def _write(self, sql: str, args: Sequence[Any]) -> None:
        """Write and commit; a file that stops taking writes (full disk, read-only) hands over
        to memory."""
        try:
            self._sql(sql, args)
        except sqlite3.OperationalError as exc:
            if not self.saving or not unwritable(exc):
                raise
            with self._lock:
                self._to_memory(exc)
            self._sql(sql, args)

    def settled(self, key: StoreKey, seen: str | None) -> StoreKey:
        """``key`` with the shapes, dtypes and scalars ``seen`` in the worker's first input set,
        written into its rows stored before they were known (a compile error recorded while the
        set was drawn).

        The inputs function's code and values are in ``key.problem``; what it returns is known
        only once it ran, in the worker, so a row is served only when the set it was measured
        on matches (issue 34). Without a set (``seen`` None: Dask, ``--no-time``, inputs that
        failed) rows are matched by ``key.problem`` alone.
        """
        if seen is None:
            return key
        where, args = replace(key, inputs_seen="").where()
        self._write(f"UPDATE results SET inputs_seen=? WHERE {where}", [seen, *args])
        return replace(key, inputs_seen=seen)

    # -- reading -----------------------------------------------------------------------------
    def get(self, key: StoreKey, config: Mapping[str, Any],
            stage: str = "sweep") -> StoredResult | None:
        """Return the stored result of ``config`` under ``key``, or None."""
        where, args = key.where()
        rows = self._sql(f"SELECT * FROM results WHERE {where} AND config=? AND stage=?",
                         [*args, Config(config).key(), stage])
        return next(iter(self._decode(rows)), None)

    def has(self, key: StoreKey) -> bool:
        """Whether any row is stored under ``key`` (whatever its input set)."""
        where, args = replace(key, inputs_seen=None).where()
        return bool(self._sql(f"SELECT 1 FROM results WHERE {where} LIMIT 1", args))

    def results(self, key: StoreKey | None = None, stage: str | None = "sweep",
                source_hash: str | None = None) -> list[StoredResult]:
        """All rows for ``key`` (or for a source hash on any device), oldest first."""
        where, args = [], []
        if key is not None:
            sql, key_args = key.where()
            where.append(sql)
            args += key_args
        elif source_hash is not None:
            where.append("source_hash=?")
            args.append(source_hash)
        if stage is not None:
            where.append("stage=?")
            args.append(stage)
        sql = "SELECT * FROM results" + (" WHERE " + " AND ".join(where) if where else "")
        return self._decode(self._sql(sql + " ORDER BY created", args))

    def best(self, key: StoreKey, stage: str = "sweep") -> StoredResult | None:
        """The fastest correct result under ``key``, found by SQL (an index on the median)."""
        top = self.top(key, 1, stage)
        return top[0] if top else None

    def top(self, key: StoreKey, k: int, stage: str = "sweep") -> list[StoredResult]:
        """The ``k`` fastest correct results under ``key``, fastest first; only they are decoded
        (decoding every row of a key took 306 ms at 10k configs, issue 21)."""
        where, args = key.where()
        return self._decode(self._sql(
            f"SELECT * FROM results WHERE {where} AND stage=? AND status=? AND median_ms IS NOT "
            "NULL ORDER BY median_ms LIMIT ?", [*args, stage, Status.OK.value, int(k)]))

    def history(self, key: StoreKey, limit: int = 500,
                stage: str = "sweep") -> list[StoredResult]:
        """The latest ``limit`` results under ``key``, oldest first: the panel's bounded history."""
        where, args = key.where()
        rows = self._sql(f"SELECT * FROM results WHERE {where} AND stage=? ORDER BY created DESC "
                         "LIMIT ?", [*args, stage, int(limit)])
        return self._decode(rows[::-1])

    def earlier_versions(self, kernel: str, space: str, device: str, exclude: str = "",
                         exclude_problem: str | None = None) -> list[StoreKey]:
        """Keys of other versions of ``kernel`` (another source hash, or with
        ``exclude_problem`` the same source on another problem) with the same space signature on
        ``device``, newest first: where a warm start takes its order from."""
        rows = self._sql(
            "SELECT source_hash, device, toolchain, problem, MAX(created) AS t FROM results "
            "WHERE kernel=? AND space=? AND device=? AND stage='sweep' "
            "AND NOT (source_hash=? AND (? IS NULL OR problem=?)) "
            "GROUP BY source_hash, problem, device, toolchain ORDER BY t DESC",
            (kernel, space, device, exclude, exclude_problem, exclude_problem))
        return [StoreKey(r[0], r[1], r[2], space, r[3]) for r in rows]

    def keys(self) -> list[StoreKey]:
        """Every (source, problem, device, toolchain) the store holds results for."""
        rows = self._sql("SELECT DISTINCT source_hash, device, toolchain, problem FROM results")
        return [StoreKey(r[0], r[1], r[2], problem=r[3]) for r in rows]

    def __len__(self) -> int:
        return int(self._sql("SELECT COUNT(*) FROM results")[0][0])

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
                self._skipped.add((*r[:5], r[17]))
                self._warn_once("skipped", f"[ktune] {self.path}: skipped a result that cannot "
                                f"be read ({type(exc).__name__}: {str(exc)[:80]}); such rows are "
                                "timed again and counted in store.skipped.")
        return out

    @staticmethod
    def _row(row: tuple) -> StoredResult:
        (_src, config, device, _tool, stage, kernel, backend, status, reason, _median, times,
         method, _meas, static, created, attempts, *_space_problem_seen) = row
        arr = None if times is None else np.asarray(json.loads(times), dtype=float)
        if arr is not None and arr.ndim != 1:
            raise ValueError(f"times_ms is not a list of numbers: {times[:40]}")
        return StoredResult(config=Config(dict(json.loads(config))), status=Status(status),
                            reason=reason, times_ms=arr, method=method or "",
                            static=None if static is None else json.loads(static),
                            kernel=kernel, backend=backend, device=device, stage=stage,
                            created=created, attempts=int(attempts))
