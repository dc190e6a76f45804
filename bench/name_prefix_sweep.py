"""The kernel-name prefix as a sweep dimension crossed with the tunables (issue 38 item 3).

Usage::

    python bench/name_prefix_sweep.py [--only attn-fp16 triton-attn-fp8 ...] [--rounds 12]
                                      [--out DIR]

``bench/name_prefix.py`` compares ``name_prefix = "cutlass_"`` against no prefix at each
kernel's recorded best config. That leaves open whether the name matters at some other config,
or moves the winner. Here the prefix is one more dimension of the cell's own space:
``name_prefix in ["", "cutlass_"]`` crossed with a neighbourhood of the tunables around the best
(the whole spaces are 1,536 and 512 configs, more than a device call sweeps; the neighbourhood
is named in ``NEIGHBOURHOODS`` and printed), swept exhaustively by ``tune`` with racing off, so
that both prefixes of every config are timed in full. Per case the table gives each config's
median with and without the prefix and their ratio (one sweep's measurements, not interleaved:
read them as a survey), whether the winner moves, and then the compare view's ratio with its
95 % CI from interleaved rounds (``compare_configs``) at the sweep's winner, with and without.

Cases (the cells of ``examples/attention_wgmma.ipynb`` and ``examples/attention.ipynb``, D 128,
N 4096, not causal, fp16 and fp8): ``attn-fp16``, ``attn-fp8``, ``triton-attn-fp16``,
``triton-attn-fp8``. On a machine without a GPU each case says why it was not timed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent)]

import name_prefix as npx  # noqa: E402 - bench/ is on sys.path above

#: case -> the tunables' values swept (each beside both prefixes); the rest of the cell's
#: space is held at the case's best config (name_prefix.ATTN_BEST / TRITON_ATTN_BEST)
NEIGHBOURHOODS = {
    "attn-fp16": dict(BLOCK_N=[128, 176, 192], STAGES=[2, 3], PERSISTENT=[0, 1]),
    "attn-fp8": dict(BLOCK_N=[128, 176, 192], STAGES=[2, 3], PERSISTENT=[0, 1]),
    "triton-attn-fp16": dict(BLOCK_M=[64, 128], BLOCK_N=[32, 64, 128], num_warps=[4, 8],
                             num_stages=[2, 3]),
    "triton-attn-fp8": dict(BLOCK_M=[64, 128], BLOCK_N=[32, 64, 128], num_warps=[4, 8],
                            num_stages=[2, 3]),
}


def narrowed(case: str) -> Any:
    """The case's cell with its space cut to the neighbourhood: the swept names take their
    ``NEIGHBOURHOODS`` values, ``name_prefix`` both of its own, every other tunable its value
    in the case's best config (the cell, its directives and constraints are unchanged)."""
    import dataclasses

    from jupyter_ktune.space import Param, Space

    _title, make, best, _b = npx.CASES[case]
    spec = make()
    swept = NEIGHBOURHOODS[case]
    params = []
    for p in spec.space.params:
        values = (p.values if p.name == "name_prefix" else
                  tuple(swept[p.name]) if p.name in swept else (best[p.name],))
        params.append(Param(p.name, values, p.line))
    space = Space(tuple(params), spec.space.constraints)
    return dataclasses.replace(spec, space=space)


def sweep(spec: Any) -> dict:
    """Every config of ``spec`` timed in full (racing off), each prefix's median per config."""
    from jupyter_ktune import tune

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        report = tune(spec, "exhaustive", store=Path(tmp) / "sweep.sqlite", race=False, top_k=0)
    by_config: dict[str, dict[str, Any]] = {}
    for e in report.evaluations:
        c = dict(e.result.config)
        prefix = c.pop("name_prefix", "")
        key = json.dumps(dict(sorted(c.items())))
        by_config.setdefault(key, {})[prefix] = (e.result.median_ms if e.result.ok else
                                                 f"{e.result.status.value}: {e.result.reason}"
                                                 [:120])
    best = report.best
    return {"wall_s": round(time.perf_counter() - t0, 1), "configs": len(report.evaluations),
            "by_config": by_config, "winner": dict(best.config) if best else None,
            "winner_ms": best.median_ms if best else None}


def ratios(by_config: dict[str, dict[str, Any]]) -> list[tuple[str, float, float, float]]:
    """(config, ms without, ms with the prefix, with / without) for every config where both
    prefixes gave a time."""
    out = []
    for key, got in by_config.items():
        a, b = got.get(""), got.get("cutlass_")
        if isinstance(a, float) and isinstance(b, float) and a > 0:
            out.append((key, a, b, b / a))
    return out


def main() -> int:
    from jupyter_ktune.runner.client import DeviceWorker
    from jupyter_ktune.tuning.compare import compare_configs

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=list(NEIGHBOURHOODS),
                    default=list(NEIGHBOURHOODS))
    ap.add_argument("--rounds", type=int, default=12, help="interleaved rounds at the winner")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    import cloudpickle  # the worker cannot import bench/ scripts: their functions go by value

    for module in (npx.attn, npx.controls, npx.gemm, npx.tattn):
        cloudpickle.register_pickle_by_value(module)
    rows: dict[str, Any] = {}
    for case in args.only:
        row: dict[str, Any] = {"title": npx.CASES[case][0], "swept": NEIGHBOURHOODS[case]}
        try:
            spec = narrowed(case)
            row["space"] = spec.space.size
            row.update(sweep(spec))
            pairs = ratios(row["by_config"])
            row["ratio_median"] = statistics.median(r for *_x, r in pairs) if pairs else None
            row["ratio_range"] = [min(r for *_x, r in pairs), max(r for *_x, r in pairs)] \
                if pairs else None
            if row["winner"]:
                base = dict(row["winner"])
                a, b = dict(base, name_prefix=""), dict(base, name_prefix="cutlass_")
                with DeviceWorker() as worker:
                    c = compare_configs(spec, worker, a, b, rounds=args.rounds)
                row["compare_at_winner"] = {**c.to_dict(), "text": c.text()}
        except Exception as exc:  # noqa: BLE001 - one case's failure is its row
            row["reason"] = f"{type(exc).__name__}: {exc}"[:500]
        rows[case] = row
        print(case, json.dumps({k: v for k, v in row.items() if k != "by_config"},
                               default=str)[:2000], flush=True)
        for key, a, b, r in ratios(row.get("by_config", {})):
            print(f"  {key}  {a * 1e3:9.1f} us  cutlass_ {b * 1e3:9.1f} us  {r:.4f}")
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "name_prefix_sweep.json").write_text(json.dumps(rows, indent=1,
                                                                        default=str))
    print(f"\n{'case':<17} {'configs':>7} {'with/without: median [range]':<30} "
          f"{'winner prefix':<13} at the winner, interleaved: B/A [95 % CI]")
    for case, r in rows.items():
        rng = r.get("ratio_range")
        survey = (f"{r['ratio_median']:.4f} [{rng[0]:.3f}, {rng[1]:.3f}]" if rng else
                  (r.get("reason") or "")[:30])
        c = r.get("compare_at_winner") or {}
        ci = c.get("ci")
        at = f"{c['ratio']:.4f} [{ci[0]:.4f}, {ci[1]:.4f}]" if c.get("ratio") and ci else "-"
        winner = repr((r.get("winner") or {}).get("name_prefix", "-"))
        print(f"{case:<17} {r.get('configs', 0):>7} {survey:<30} {winner:<13} {at}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
