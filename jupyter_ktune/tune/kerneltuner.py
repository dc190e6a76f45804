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
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from jupyter_ktune.errors import KtuneError
from jupyter_ktune.results import Status
from jupyter_ktune.space import Config
from jupyter_ktune.tune.store import StoredResult

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
    """A T4 file ktune cannot read: not JSON, not T4, or a result without a usable field."""


def _t4_row(i: int, item: Any, kernel: str, backend: str, device: str) -> StoredResult:
    """One T4 result; every malformed field is a :class:`T4Error` naming the result (issue 9)."""
    where = f"[ktune] T4 result {i}"
    if not isinstance(item, Mapping):
        raise T4Error(f"{where} is a {type(item).__name__}, not an object")
    conf = item.get("configuration")
    if not isinstance(conf, Mapping) or not all(
            isinstance(k, str) and isinstance(v, int | float | str) for k, v in conf.items()):
        raise T4Error(f"{where} has no 'configuration' object of names and numbers or strings "
                      f"(got {conf!r:.80})")
    invalidity = item.get("invalidity", "correct")
    status = _STATUS.get(invalidity, Status.RUNTIME_ERROR) if isinstance(invalidity, str) \
        else Status.RUNTIME_ERROR
    times = item.get("times")
    runtimes = (times.get("runtimes") if isinstance(times, Mapping) else None) or []
    if not runtimes:
        measurements = item.get("measurements") or []
        t = None
        if isinstance(measurements, list):
            t = next((m.get("value") for m in measurements
                      if isinstance(m, Mapping) and m.get("name") == "time"), None)
        runtimes = [] if t is None else [t]
    try:
        arr = np.asarray([float(t) for t in runtimes], dtype=float) if runtimes else None
    except (TypeError, ValueError):
        raise T4Error(f"{where}: its run times are not numbers (got {runtimes!r:.80})") from None
    stamp = item.get("timestamp")
    try:
        created = _dt.datetime.fromisoformat(stamp).timestamp() if isinstance(stamp, str) \
            else 0.0
    except (ValueError, OverflowError, OSError):
        created = 0.0
    return StoredResult(config=Config(conf), status=status, times_ms=arr,
                        method="Kernel Tuner (T4 import)", kernel=kernel, backend=backend,
                        device=device, created=created)


def from_t4(doc: Mapping[str, Any], kernel: str = "", backend: str = "",
            device: str = "") -> list[StoredResult]:
    """Read a T4 document (as Kernel Tuner writes it) into stored-result rows.

    Raises :class:`T4Error` (a ``ValueError``) naming the first result it cannot read.
    """
    if not isinstance(doc, Mapping) or not isinstance(doc.get("results"), list):
        raise T4Error("[ktune] not a T4 results file: it has no 'results' list "
                      "(Kernel Tuner writes one with tune_kernel(..., ) + store_output_file)")
    version = str(doc.get("schema_version", ""))
    if version.split(".")[0] != T4_VERSION.split(".")[0]:
        raise T4Error(f"[ktune] T4 schema version {version!r:.40} is not supported "
                      f"(this ktune reads {T4_VERSION})")
    return [_t4_row(i, item, kernel, backend, device) for i, item in enumerate(doc["results"])]


def write_t4(path: str | Path, rows: Iterable[StoredResult]) -> Path:
    """Write ``rows`` as a T4 results file (``.json`` added when missing)."""
    p = Path(path)
    if p.suffix != ".json":
        p = p.with_name(p.name + ".json")
    p.write_text(json.dumps(to_t4(rows), indent=1))
    return p


def read_t4(path: str | Path, **kw: Any) -> list[StoredResult]:
    """Read a T4 results file; ``kw`` (kernel, backend, device) label the rows."""
    try:
        doc = json.loads(Path(path).read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise T4Error(f"[ktune] {path} is not a JSON file ({exc})") from None
    return from_t4(doc, **kw)


def import_t4(path: str | Path, store: Any, key: Any, kernel: str = "",
              backend: str = "") -> int:
    """Read a T4 file into ``store`` under ``key`` (a StoreKey); returns the rows written.

    The rows then count as measured: a sweep of the same source, device and toolchain skips them.
    """
    rows = read_t4(path, kernel=kernel, backend=backend, device=key.device)
    for r in rows:
        store.put(key, r.to_run_result(key.source_hash))
    return len(rows)
