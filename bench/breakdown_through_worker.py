"""Check cycle breakdowns end to end on an H200, through a real device worker, kind by kind.

Usage (from the project root; ``--check`` needs no GPU)::

    PYTHONPATH=/tmp/site:$PWD python3 bench/breakdown_through_worker.py --out DIR
    python bench/breakdown_through_worker.py --check

Every request goes the way the notebook's "Cycle breakdown" button sends it: a
``("profile", spec, config, lines)`` request to :class:`jupyter_ktune.runner.client.DeviceWorker`,
so the worker process, pickling, and ``profile_variant``'s dispatch are what is tested, not the
profilers called directly (bench/breakdown_overhead.py does that, for overhead numbers):

a. CUDA C++ GEMM (tests/fixtures/breakdown/gemm_scoped.cu, 1024^3) scopes, KT_SCOPE; twice
   (the first includes NVRTC)
b. the same with ``lines=True``: ncu per-line stall samples
c. the Triton bf16 GEMM of examples/matmul_triton.ipynb (breakdown_overhead's cell, 2048^3)
   scopes, Proton; twice (the first includes Triton's compile)
d. the Triton GEMM with ``lines=True``: do ncu's SASS PCs map to the *cell's* lines? (each top
   line is printed with the cell text at that line)
e. a Pallas Mosaic GPU cell (``plgpu.kernel`` with ``jax.named_scope`` scopes) through the
   profile_mosaic wiring: the cell itself has no profiler settings
f. the sm_90a WGMMA + TMA GEMM of examples/gemm_wgmma.ipynb (4096^3): its producer's ``load``
   and consumers' ``mma`` / ``store`` scopes, traced from an nvcc build (issue 20 item 3), at
   the notebook's tuned config and at its plain one, with the overlap summary of each
g. the tuned WGMMA GEMM with ``lines=True``: ncu's per-line stalls on the cell's lines
h. the WGMMA attention of examples/attention_wgmma.ipynb (fp16, Z*H = 128, N = 4096, D = 64
   and 128, non-causal): the producer's ``load`` and the consumers' ``mma`` / ``store`` scopes
i. the same attention with ``lines=True``: where its warps stall, by cell line

Each request has its own timeout and try/except, so one failure leaves the rest to run. Writes
DIR/breakdown_check.json and prints a short table last.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import attention_wgmma_vs_cudnn as aw  # noqa: E402 - the WGMMA attention cell
import breakdown_overhead as bo  # noqa: E402 - the CUDA spec and the Triton cell, reused
import gemm_wgmma_vs_cublas as wg  # noqa: E402 - the WGMMA GEMM cell, read from the notebook

CUDA_SIZE = 1024
WGMMA_SIZE = 4096
TRITON_SIZE = 2048  # 16 x 16 = 256 CTAs: well under Proton's 4096-CTA limit

PALLAS_CELL = '''# ktune: BLOCKS in [132]
LOWERINGS = ["mosaic_gpu"]
import jax
from jax.experimental.pallas import mosaic_gpu as plgpu


def scale(BLOCKS):
    def body(x_ref, o_ref):
        with jax.named_scope("load"):
            x = x_ref[...]
        with jax.named_scope("compute"):
            o = x * 2.0 + 1.0
        with jax.named_scope("store"):
            o_ref[...] = o

    def run(x):
        return plgpu.kernel(body, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
                            grid=(BLOCKS,), grid_names=("g",))(x)
    return run
'''


def cuda_request() -> tuple[Any, Any]:
    """Build the scoped fp32 GEMM of the breakdown fixtures (breakdown_overhead.cuda_spec)."""
    spec = bo.cuda_spec(CUDA_SIZE)
    return spec, spec.space.config({"BM": 64, "BN": 64, "BK": 32})


def triton_request() -> tuple[Any, Any]:
    """Build breakdown_overhead's Triton bf16 GEMM cell (the example's, with Proton scopes)."""
    spec = bo.triton_spec(TRITON_SIZE)
    return spec, spec.space.config({})


def pallas_request() -> tuple[Any, Any]:
    """Build a Mosaic GPU cell with named scopes and no profiler settings of its own."""
    from jupyter_ktune.api import parse_cell

    def inputs():
        x = np.random.rand(128).astype(np.float32)
        return dict(x=x, o=np.empty_like(x))

    spec = parse_cell("scale --backend pallas --inputs inputs --out o --no-verify", PALLAS_CELL,
                      {"inputs": inputs})
    return spec, spec.space.config({})


def wgmma_request(config: dict[str, Any]) -> Any:
    """A builder for the notebook's WGMMA GEMM cell at ``config`` (sm_90a, nvcc)."""
    def build() -> tuple[Any, Any]:
        spec = wg.spec_for(WGMMA_SIZE)
        return spec, spec.space.config(config)
    return build


def attention_request(d: int) -> Any:
    """A builder for the notebook's attention cell at the bench's starting config for ``d``."""
    def build() -> tuple[Any, Any]:
        spec = aw.spec_for(4096, d, 0)
        return spec, spec.space.config(aw.SPACE[d][0])
    return build


WGMMA_PLAIN = wg.SPACE[1]  # the notebook's plain setting: 1 consumer, 2 stages, per-tile grid


# (label, builder, lines, timeout s, repeats)
REQUESTS = (
    ("a_cuda_scopes", cuda_request, False, 60, 2),
    ("c_triton_scopes", triton_request, False, 90, 2),
    ("e_pallas_mosaic_scopes", pallas_request, False, 120, 1),
    ("b_cuda_lines", cuda_request, True, 120, 1),
    ("d_triton_lines", triton_request, True, 120, 1),
    ("f_wgmma_scopes_tuned", wgmma_request(wg._BASE), False, 120, 2),
    ("f_wgmma_scopes_plain", wgmma_request(WGMMA_PLAIN), False, 120, 1),
    ("g_wgmma_lines", wgmma_request(wg._BASE), True, 180, 1),
    ("h_attn64_scopes", attention_request(64), False, 120, 1),
    ("h_attn128_scopes", attention_request(128), False, 120, 1),
    ("i_attn64_lines", attention_request(64), True, 180, 1),
    ("i_attn128_lines", attention_request(128), True, 180, 1),
)


def cell_text(spec: Any, line: int) -> str:
    """Return the cell's text at cell line ``line`` (1 is the %%kernel line), or a marker."""
    if line == 1:
        return "<the %%kernel line>"
    body = spec.source.splitlines()
    i = line - spec.body_line
    return body[i].strip()[:70] if 0 <= i < len(body) else f"<outside the cell ({len(body)} lines)>"


def summarise(bd: Any, spec: Any) -> dict[str, Any]:
    """Return what a person needs to judge the breakdown: counts, scopes, top lines, notes."""
    res: dict[str, Any] = {"source": bd.source, "kernel": bd.kernel, "unit_kind": bd.unit_kind,
                           "sm_clock_mhz": bd.sm_clock_mhz, "clock_source": bd.clock_source,
                           "events": len(bd), "scopes": bd.scopes, "trace_bytes": bd.trace_bytes,
                           "parse_ms": round(bd.parse_ms, 2), "notes": list(bd.notes),
                           "kernel_ns": bd.kernel_ns, "n_lines": len(bd.lines)}
    if len(bd):
        res["scope_table"] = [{k: v for k, v in row.items() if not isinstance(v, (list, dict))}
                              for row in bd.scope_table()]
        try:  # what warp specialisation buys: memory and compute scopes overlapping
            res["overlap"] = {k: v for k, v in bd.overlap().items()
                              if not isinstance(v, (list, dict))}
        except Exception as exc:  # noqa: BLE001 - the summary is a finding, not a crash
            res["overlap"] = f"{type(exc).__name__}: {exc}"
    top = sorted(bd.lines.items(), key=lambda kv: -kv[1]["samples"])[:3]
    res["top_lines"] = [{"line": int(ln), "samples": int(row["samples"]),
                         "top_stall": next(iter(row["stalls"]), None), "text": cell_text(spec, ln)}
                        for ln, row in top]
    n_body = len(spec.source.splitlines()) + spec.body_line - 1
    res["lines_outside_cell"] = sorted(int(ln) for ln in bd.lines if not 1 <= int(ln) <= n_body)
    return res


def run_one(worker: Any, label: str, build: Any, lines: bool, timeout: float,
            repeats: int) -> dict[str, Any]:
    """Send the profile request ``repeats`` times; record walls, the summary or the error."""
    res: dict[str, Any] = {"request": label, "lines_view": lines, "timeout_s": timeout,
                           "wall_s": []}
    try:
        spec, config = build()
    except Exception:  # noqa: BLE001 - a spec that does not build is this request's result
        res["error"] = traceback.format_exc()[-1500:]
        return res
    for _ in range(repeats):
        t0 = time.perf_counter()
        try:
            kind, value = worker.request(("profile", spec, config, lines), timeout)
        except Exception as exc:  # noqa: BLE001 - timeout or a dead worker: record, go on
            res["wall_s"].append(round(time.perf_counter() - t0, 2))
            res["error"] = f"{type(exc).__name__}: {exc}"[-1500:]
            return res
        res["wall_s"].append(round(time.perf_counter() - t0, 2))
        if kind != "ok":
            res["error"] = str(getattr(value, "reason", value))[-2500:]
            return res
        try:
            res.update(summarise(value, spec))
        except Exception:  # noqa: BLE001
            res["error"] = "summary failed: " + traceback.format_exc()[-1200:]
            return res
    return res


def table(results: list[dict[str, Any]]) -> str:
    """One row per request: ok, walls, events, lines, the top line, bytes, error or first note."""
    rows = [("request", "ok", "wall s", "events", "lines", "top line (stall)", "trace B",
             "error / note")]
    for r in results:
        top = r.get("top_lines") or []
        t = f"{top[0]['line']}:{top[0]['top_stall']} {top[0]['text'][:28]}" if top else ""
        err = (r.get("error") or "").strip().splitlines() or (r.get("notes") or [])[:1]
        rows.append((r["request"], "no" if "error" in r else "yes",
                     "/".join(f"{w:.1f}" for w in r["wall_s"]), str(r.get("events", "")),
                     str(r.get("n_lines", "")), t, str(r.get("trace_bytes", "")),
                     err[0][:60] if err else ""))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
                     for row in rows)


def check() -> int:
    """CPU: every spec builds, passes its backend's host-side check, and pickles."""
    import cloudpickle

    from jupyter_ktune.backends import get_backend

    for module in (bo, wg, aw):
        cloudpickle.register_pickle_by_value(module)
    bad = 0
    for label, build, lines, _, _ in REQUESTS:
        try:
            spec, config = build()
            get_backend(spec.backend).check(spec)
            back = cloudpickle.loads(cloudpickle.dumps((spec, config, lines)))
            assert back[0].source_hash == spec.source_hash and dict(back[1]) == dict(config)
            print(f"ok   {label}: {spec.backend} {spec.name} {dict(config)}")
        except Exception:  # noqa: BLE001
            bad += 1
            print(f"FAIL {label}:\n{traceback.format_exc()}")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="folder for breakdown_check.json")
    ap.add_argument("--check", action="store_true", help="CPU only: build and check the specs")
    ap.add_argument("--only", nargs="+", metavar="PREFIX", default=None,
                    help="run only the requests whose label starts with one of these (e.g. f g)")
    args = ap.parse_args()
    requests = [r for r in REQUESTS
                if args.only is None or any(r[0].startswith(p) for p in args.only)]
    if args.check:
        return check()
    if args.out is None:
        ap.error("--out DIR is required (or --check)")
    import cloudpickle

    from jupyter_ktune.runner.client import DeviceWorker

    # the CUDA spec's inputs/reference live in breakdown_overhead, which the worker cannot import
    for module in (bo, wg, aw):
        cloudpickle.register_pickle_by_value(module)
    args.out.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()
    results: list[dict[str, Any]] = []
    with DeviceWorker() as worker:
        t0 = time.perf_counter()
        try:
            worker.request(("ping",), 120)
            start = {"worker_start_s": round(time.perf_counter() - t0, 2)}
        except Exception as exc:  # noqa: BLE001
            start = {"worker_start_error": f"{type(exc).__name__}: {exc}"}
        for label, build, lines, timeout, repeats in requests:
            res = run_one(worker, label, build, lines, timeout, repeats)
            print(f"[{label}] {'error' if 'error' in res else 'ok'} in {res['wall_s']} s",
                  flush=True)
            results.append(res)
        log = worker.log_tail(40)
    summary = {**start, "total_s": round(time.perf_counter() - t_all, 1),
               "results": sorted(results, key=lambda r: r["request"]), "worker_log_tail": log}
    (args.out / "breakdown_check.json").write_text(json.dumps(summary, indent=1, default=str))
    print(json.dumps({r["request"]: r.get("error", "")[:300] for r in results}, indent=1))
    print(f"total {summary['total_s']} s; details in {args.out / 'breakdown_check.json'}")
    print(table(summary["results"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
