"""How fast are the store's queries as it grows? (CPU; issue 21)

Builds a store of ``--kernels`` x ``--configs`` rows (default 100 x 10,000 = 1M rows, each with
``--runs`` stored run times, as a sweep writes them) and times, under one key of 10k configs:

- best-of, the old way: decode every row of the key in Python and take the minimum (306 ms at
  1M rows on the H200 host, the figure the issue quotes);
- best-of and top-10 by SQL (``Store.best`` / ``Store.top``: index on key + median);
- the panel's history, bounded (``Store.history``, the latest 500 rows);
- one config's lookup (``Store.get``).

Each figure is the median of ``--repeat`` calls, in ms. ``--check`` runs a small store (10 x 1000)
and checks that the SQL answers equal the decode-everything answers.

Examples
--------
    python3 bench/store_queries.py --out /tmp/sq          # 1M rows, ~1 min to build
    python3 bench/store_queries.py --check
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from jupyter_ktune.results import Status  # noqa: E402
from jupyter_ktune.space import Config  # noqa: E402
from jupyter_ktune.tuning.store import Store, StoreKey  # noqa: E402
from jupyter_ktune.tuning.store_schema import INSERT  # noqa: E402

DEVICE, TOOLCHAIN = "NVIDIA H200", '{"triton":"3.6.0"}'


def build(path: Path, kernels: int, configs: int, runs: int, seed: int = 0) -> float:
    """Write the rows straight through the store's INSERT (as ``Store.put`` lays them out)."""
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    with Store(path) as store:
        conn = store._conn  # noqa: SLF001 - a bench filling the file in bulk
        conn.execute("BEGIN")
        for k in range(kernels):
            base = rng.uniform(0.05, 5.0, configs)
            rows = []
            for i in range(configs):
                times = base[i] * (1 + 0.01 * rng.standard_normal(runs))
                cfg = Config({"BLOCK_M": 16 << (i % 4), "BLOCK_N": 16 << (i // 4 % 4),
                              "I": i}).key()
                status = (Status.WRONG if i % 97 == 0 else Status.OK).value
                rows.append((f"src{k:03d}", cfg, DEVICE, TOOLCHAIN, "sweep", f"kernel{k}",
                             "triton", status, "", float(np.median(times)),
                             json.dumps(np.round(times, 6).tolist()),
                             "torch events around each launch, median of 50", None,
                             json.dumps({"registers": 128, "smem_bytes": 65536}),
                             time.time() + i * 1e-3, 1, "space-sig"))
            conn.executemany(INSERT, rows)
        conn.execute("COMMIT")
    return time.perf_counter() - t0


def timed(fn, repeat: int) -> tuple[float, object]:
    out, times = None, []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), out


def best_by_decoding(store: Store, key: StoreKey):
    ok = [r for r in store.results(key) if r.ok]
    return min(ok, key=lambda r: r.median_ms)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=100)
    ap.add_argument("--configs", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--check", action="store_true", help="small store, answers checked")
    ap.add_argument("--out", type=Path, help="folder for store_queries.json (the store is "
                    "built in a temporary folder)")
    a = ap.parse_args()
    if a.check:
        a.kernels, a.configs, a.runs, a.repeat = 10, 1000, 20, 3
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.sqlite"
        build_s = build(path, a.kernels, a.configs, a.runs)
        size_mb = os.path.getsize(path) / 2 ** 20
        key = StoreKey(f"src{a.kernels // 2:03d}", DEVICE, TOOLCHAIN)
        with Store(path) as store:
            store.history(key, 1)  # page the index in, as a notebook's first query does
            decode_ms, best_old = timed(lambda: best_by_decoding(store, key), a.repeat)
            best_ms, best_new = timed(lambda: store.best(key), a.repeat)
            top_ms, top = timed(lambda: store.top(key, 10), a.repeat)
            hist_ms, hist = timed(lambda: store.history(key, 500), a.repeat)
            get_ms, _ = timed(lambda: store.get(key, best_new.config), a.repeat)
            rows = len(store)
        same = (best_old.config == best_new.config and len(top) == 10 and len(hist) == 500
                and all(x.median_ms <= y.median_ms for x, y in zip(top, top[1:], strict=False)))
        result = {"rows": rows, "rows_under_key": a.configs, "file_mb": round(size_mb, 1),
                  "build_s": round(build_s, 1), "best_by_decoding_all_ms": round(decode_ms, 2),
                  "best_sql_ms": round(best_ms, 3), "top10_sql_ms": round(top_ms, 3),
                  "history_500_ms": round(hist_ms, 2), "get_one_ms": round(get_ms, 3),
                  "sql_answers_match": same, "target_ms": 50}
    print(f"store: {rows:,} rows ({a.kernels} kernels x {a.configs:,} configs, {a.runs} runs "
          f"each), {size_mb:.0f} MB, built in {build_s:.1f} s")
    print(f"under one key ({a.configs:,} configs), median of {a.repeat} calls:")
    print(f"  best-of, decoding every row (old)  {decode_ms:9.2f} ms")
    print(f"  best-of, SQL on the median index   {best_ms:9.3f} ms")
    print(f"  top-10, SQL                        {top_ms:9.3f} ms")
    print(f"  panel history, latest 500 rows     {hist_ms:9.2f} ms")
    print(f"  one config's lookup                {get_ms:9.3f} ms")
    print(f"SQL answers equal the decoded ones: {same}; target <= 50 ms: "
          f"{'met' if max(best_ms, hist_ms) <= 50 else 'NOT met'}")
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "store_queries.json").write_text(json.dumps(result, indent=1))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
