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


def from_t4(doc: Mapping[str, Any], kernel: str = "", backend: str = "",
            device: str = "") -> list[StoredResult]:
    """Read a T4 document (as Kernel Tuner writes it) into stored-result rows."""
    if not isinstance(doc, Mapping) or "results" not in doc:
        raise ValueError("[ktune] not a T4 results file: it has no 'results' list "
                         "(Kernel Tuner writes one with tune_kernel(..., ) + store_output_file)")
    version = str(doc.get("schema_version", ""))
    if version.split(".")[0] != T4_VERSION.split(".")[0]:
        raise ValueError(f"[ktune] T4 schema version {version!r} is not supported "
                         f"(this ktune reads {T4_VERSION})")
    rows = []
    for item in doc["results"]:
        status = _STATUS.get(item.get("invalidity", "correct"), Status.RUNTIME_ERROR)
        runtimes = (item.get("times") or {}).get("runtimes") or []
        if not runtimes:
            t = next((m.get("value") for m in item.get("measurements", [])
                      if m.get("name") == "time"), None)
            runtimes = [] if t is None else [t]
        times = np.asarray([float(t) for t in runtimes], dtype=float) if runtimes else None
        stamp = item.get("timestamp")
        try:
            created = _dt.datetime.fromisoformat(stamp).timestamp() if stamp else 0.0
        except ValueError:
            created = 0.0
        rows.append(StoredResult(config=Config(item["configuration"]), status=status,
                                 times_ms=times, method="Kernel Tuner (T4 import)",
                                 kernel=kernel, backend=backend, device=device,
                                 created=created))
    return rows


def write_t4(path: str | Path, rows: Iterable[StoredResult]) -> Path:
    """Write ``rows`` as a T4 results file (``.json`` added when missing)."""
    p = Path(path)
    if p.suffix != ".json":
        p = p.with_name(p.name + ".json")
    p.write_text(json.dumps(to_t4(rows), indent=1))
    return p


def read_t4(path: str | Path, **kw: Any) -> list[StoredResult]:
    """Read a T4 results file; ``kw`` (kernel, backend, device) label the rows."""
    return from_t4(json.loads(Path(path).read_text()), **kw)


def import_t4(path: str | Path, store: Any, key: Any, kernel: str = "",
              backend: str = "") -> int:
    """Read a T4 file into ``store`` under ``key`` (a StoreKey); returns the rows written.

    The rows then count as measured: a sweep of the same source, device and toolchain skips them.
    """
    rows = read_t4(path, kernel=kernel, backend=backend, device=key.device)
    for r in rows:
        store.put(key, r.to_run_result(key.source_hash))
    return len(rows)
