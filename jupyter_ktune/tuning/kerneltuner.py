"""Kernel Tuner's results JSON (the community "T4" format), in and out.

The format is ``kernel_tuner/schema/T4/1.0.0/results-schema.json`` as Kernel Tuner writes it in
``kernel_tuner/file_utils.py:store_output_file``::

    {"schema_version": "1.0.0",
     "results": [{"timestamp": "...", "configuration": {"block_size_x": 128},
                  "times": {"compilation": s, "benchmark": s, "framework": s,
                            "search_algorithm": s, "validation": s, "runtimes": [ms, ...]},
                  "invalidity": "correct" | "compile" | "runtime" | "correctness" |
                                "constraints" | "timeout",
                  "correctness": 1,
                  "measurements": [{"name": "time", "value": ms, "unit": "ms"}],
                  "objectives": ["time"]}]}

Kernel Tuner's ``time`` is the mean of its runs; ktune writes its median there (and all runs in
``times.runtimes``) and reads ``runtimes`` when present, else ``time`` as a single run.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from jupyter_ktune.errors import KtuneError
from jupyter_ktune.results import Status
from jupyter_ktune.space import Config
from jupyter_ktune.tuning.store import StoredResult

T4_VERSION = "1.0.0"

_INVALIDITY: dict[Status, str] = {
    Status.OK: "correct",
    Status.WRONG: "correctness",
    Status.COMPILE_ERROR: "compile",
    Status.OUT_OF_RESOURCES: "runtime",
    Status.RUNTIME_ERROR: "runtime",
    Status.CRASHED: "runtime",
    Status.TIMEOUT: "timeout",
    Status.NOT_ALLOWED: "constraints",
    Status.CANNOT_RUN: "runtime",
    Status.WRONG_ARCH: "compile",
}
_STATUS: dict[str, Status] = {
    "correct": Status.OK, "correctness": Status.WRONG, "compile": Status.COMPILE_ERROR,
    "runtime": Status.RUNTIME_ERROR, "timeout": Status.TIMEOUT, "constraints": Status.NOT_ALLOWED,
}


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def to_t4(rows: Iterable[StoredResult]) -> dict[str, Any]:
    """Convert stored results to a T4 document (a dict ready for ``json.dump``)."""
    out = []
    for r in rows:
        times = [] if r.times_ms is None else [float(t) for t in r.times_ms]
        med = r.median_ms
        stamp = _dt.datetime.fromtimestamp(r.created or 0, _dt.timezone.utc).isoformat()
        measurements = [] if med is None else [{"name": "time", "value": med, "unit": "ms"}]
        out.append({
            "timestamp": stamp,
            "configuration": {k: _plain(v) for k, v in r.config.items()},
            "times": {"compilation": 0, "benchmark": sum(times) / 1e3, "framework": 0,
                      "search_algorithm": 0, "validation": 0, "runtimes": times},
            "invalidity": _INVALIDITY.get(r.status, "runtime"),
            "correctness": 1 if r.status is not Status.WRONG else 0,
            "measurements": measurements,
            "objectives": ["time"],
        })
    return {"schema_version": T4_VERSION, "results": out}


class T4Error(KtuneError, ValueError):
    """A T4 file ktune cannot read: not JSON, not T4, or results without usable fields."""


class T4Warning(UserWarning):
    """T4 results skipped on import (``skip_bad=True``): how many, and why the first was."""


MAX_LISTED = 10  # bad results named one per line in a T4Error; the rest are counted


def _short(value: Any, n: int = 60) -> str:
    """``repr`` cut to ``n`` characters; a value nested too deep to print says so."""
    try:
        text = repr(value)
    except RecursionError:
        return "(nested too deep to show)"
    return text if len(text) <= n else text[:n - 3] + "..."


def _number(v: Any) -> float | None:
    """Return a run time in ms: a finite, non-negative JSON number, else None (not a bool)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    f = float(v)
    return f if math.isfinite(f) and f >= 0 else None


def _run_times(item: Mapping[str, Any]) -> tuple[list[Any] | None, str]:
    """Return a result's raw run times: ``times.runtimes``, else the ``time`` measurement."""
    times = item.get("times")
    runtimes = times.get("runtimes") if isinstance(times, Mapping) else None
    if runtimes is not None and runtimes != []:
        if not isinstance(runtimes, list):  # the string "123" is not the runs [1, 2, 3]
            return [runtimes], "times.runtimes"
        return runtimes, "times.runtimes"
    measurements = item.get("measurements")
    if isinstance(measurements, list):
        for m in measurements:
            if isinstance(m, Mapping) and m.get("name") == "time" and "value" in m:
                return [m["value"]], "the 'time' measurement"
    return None, ""


def _t4_row(item: Any, kernel: str, backend: str, device: str) -> StoredResult:
    """One T4 result; a field that cannot be used raises a T4Error saying which and why."""
    if not isinstance(item, Mapping):
        raise T4Error(f"is a {type(item).__name__}, not an object")
    conf = item.get("configuration")
    if not isinstance(conf, Mapping) or not all(
            isinstance(k, str) and not isinstance(v, bool) and isinstance(v, int | float | str)
            and (not isinstance(v, float) or math.isfinite(v)) for k, v in conf.items()):
        raise T4Error(f"has no 'configuration' object of names and finite numbers or strings "
                      f"(got {_short(conf)})")
    invalidity = item.get("invalidity", "correct")
    status = _STATUS.get(invalidity, Status.RUNTIME_ERROR) if isinstance(invalidity, str) \
        else Status.RUNTIME_ERROR
    raw, where = _run_times(item)
    values = [_number(t) for t in raw or []]
    if status is Status.OK and raw is not None and None in values:
        bad = raw[values.index(None)]
        raise T4Error(f"{where} holds {_short(bad, 30)}, which is not a run time "
                      "(a finite, non-negative number of ms)")
    # a failed variant's times are not measurements of a working kernel: kept only when usable
    arr = np.asarray(values, dtype=float) if values and None not in values else None
    stamp = item.get("timestamp")
    try:
        created = _dt.datetime.fromisoformat(stamp).timestamp() if isinstance(stamp, str) \
            else 0.0
    except (ValueError, OverflowError, OSError):
        created = 0.0
    return StoredResult(config=Config(conf), status=status, times_ms=arr,
                        method="Kernel Tuner (T4 import)", kernel=kernel, backend=backend,
                        device=device, created=created)


def from_t4(doc: Mapping[str, Any], kernel: str = "", backend: str = "", device: str = "", *,
            skip_bad: bool = False) -> list[StoredResult]:
    """Read a T4 document (as Kernel Tuner writes it) into stored-result rows.

    Every value is checked: run times must be lists of finite, non-negative numbers, a
    configuration an object of names and scalars. A result that fails is named on its own line
    of one :class:`T4Error` (a ``ValueError``); with ``skip_bad=True`` it is left out instead and
    a :class:`T4Warning` counts what was left out.
    """
    if not isinstance(doc, Mapping) or not isinstance(doc.get("results"), list):
        raise T4Error("[ktune] not a T4 results file: it has no 'results' list "
                      "(Kernel Tuner writes one with tune_kernel(..., ) + store_output_file)")
    version = doc.get("schema_version", "")
    if not isinstance(version, str) or version.split(".")[0] != T4_VERSION.split(".")[0]:
        raise T4Error(f"[ktune] T4 schema version {_short(version, 40)} is not supported "
                      f"(this ktune reads {T4_VERSION})")
    rows, bad = [], []
    for i, item in enumerate(doc["results"]):
        try:
            rows.append(_t4_row(item, kernel, backend, device))
        except T4Error as exc:
            bad.append(f"result {i} {exc}")
    if bad and not skip_bad:
        more = f"\n  ... and {len(bad) - MAX_LISTED} more" if len(bad) > MAX_LISTED else ""
        raise T4Error(f"[ktune] {len(bad)} of {len(doc['results'])} T4 results cannot be "
                      "imported (fix them, or pass skip_bad=True to import the rest):\n  "
                      + "\n  ".join(bad[:MAX_LISTED]) + more)
    if bad:
        warnings.warn(f"[ktune] skipped {len(bad)} of {len(doc['results'])} T4 results that "
                      f"cannot be imported; the first: {bad[0]}", T4Warning, stacklevel=2)
    return rows


def write_t4(path: str | Path, rows: Iterable[StoredResult]) -> Path:
    """Write ``rows`` as a T4 results file (``.json`` added when missing)."""
    p = Path(path)
    if p.suffix != ".json":
        p = p.with_name(p.name + ".json")
    p.write_text(json.dumps(to_t4(rows), indent=1))
    return p


def read_t4(path: str | Path, **kw: Any) -> list[StoredResult]:
    """Read a T4 results file; ``kw`` (kernel, backend, device, skip_bad) go to :func:`from_t4`."""
    try:
        doc = json.loads(Path(path).read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise T4Error(f"[ktune] {path} is not a JSON file ({exc})") from None
    except RecursionError:  # '[' * 100000: json recurses once per level
        raise T4Error(f"[ktune] {path} nests too deep to be a T4 results file") from None
    return from_t4(doc, **kw)


def import_t4(path: str | Path, store: Any, key: Any, kernel: str = "",
              backend: str = "", *, skip_bad: bool = False) -> int:
    """Read a T4 file into ``store`` under ``key`` (a StoreKey); returns the rows written.

    The rows then count as measured: a sweep of the same source, problem, device and toolchain
    skips them. A T4 file does not say what inputs it was measured on, so give ``key`` the
    cell's ``problem=problem_key(spec)`` (:mod:`jupyter_ktune.problem_key`) for that.
    Nothing is written when a result is bad, unless ``skip_bad=True`` (see :func:`from_t4`).
    """
    rows = read_t4(path, kernel=kernel, backend=backend, device=key.device, skip_bad=skip_bad)
    for r in rows:
        store.put(key, r.to_run_result(key.source_hash))
    return len(rows)
