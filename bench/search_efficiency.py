"""Search efficiency: evaluations each strategy needs to get within 3% of the exhaustive best.

Spaces are recorded exhaustively once into a store (``--record``, on the GPU): the Triton
bf16 matmul (the sweep_vs_autotune store is reused when given), the FlashAttention forward of
examples/attention.ipynb (fp16, causal, Z=4, H=32, N_CTX=4096, D=64: 128 configs), a fused
row softmax and a memory-bound scaled copy. Each strategy is then replayed from the store with 20
seeds. ``--synthetic`` replays a
synthetic-but-realistic GEMM model instead (CPU, to test the machinery); the GPU replay decides
``DEFAULT_STRATEGY``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

SOFTMAX = '''# ktune: BLOCK in [4096, 8192]; ROWS in [1, 2, 4]; num_warps in [2, 4, 8, 16]
# ktune: num_stages in [1, 2]; grid = cdiv(R, ROWS)
@triton.jit
def softmax(x, y, R, C, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    for i in range(ROWS):
        row = tl.program_id(0) * ROWS + i
        if row < R:
            cols = tl.arange(0, BLOCK)
            v = tl.load(x + row * C + cols, mask=cols < C, other=-float("inf"))
            v = v - tl.max(v, axis=0)
            e = tl.exp(v)
            tl.store(y + row * C + cols, e / tl.sum(e, axis=0), mask=cols < C)
'''
COPY = '''# ktune: BLOCK in [256, 512, 1024, 2048, 4096, 8192]; num_warps in [1, 2, 4, 8]
# ktune: num_stages in [1, 2]; grid = cdiv(n, BLOCK); bytes = 8 * n
@triton.jit
def scale(x, y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + i, 2 * tl.load(x + i, mask=i < n), mask=i < n)
'''


def softmax_io(rows=8192, cols=4096):
    """Inputs and reference of the softmax."""
    def inputs():
        import numpy as np
        x = np.random.default_rng().standard_normal((rows, cols), dtype=np.float32)
        return dict(x=x, y=np.empty_like(x), R=rows, C=cols)

    def reference(x, y, R, C):
        import numpy as np
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return inputs, reference


def copy_io(n=1 << 26):
    """Inputs and reference of the scaled copy."""
    def inputs():
        import numpy as np
        x = np.random.default_rng().random(n, dtype=np.float32)
        return dict(x=x, y=np.empty_like(x), n=n)

    def reference(x, y, n):
        return 2 * x
    return inputs, reference


def attention_cell() -> tuple[str, str]:
    """examples/attention.ipynb's non-persistent fp16 kernel (magic-line options, body), with
    HEAD_DIM fixed at 64 for D = 64: 4 x 4 x 2 x 4 = 128 configs."""
    nb = json.loads((ROOT / "examples" / "attention.ipynb").read_text())
    src = next("".join(c["source"]) for c in nb["cells"]
               if "".join(c["source"]).startswith(
                   "%%kernel attn_fwd --backend triton --inputs inputs "))
    line, body = src.split("\n", 1)
    words, kept = line.split()[2:], []
    skip = {"--config", "--budget-ms", "--backend", "--inputs", "--reference"}
    while words:
        w = words.pop(0)
        if w in skip:
            words.pop(0)  # and its value: this script sets these itself
        else:
            kept.append(w)
    opts = " ".join(kept)
    body = body.replace("HEAD_DIM in [64, 128]", "HEAD_DIM in [64]")
    return opts, body


def attention_io(Z=4, H=32, n_ctx=4096, d=64):
    """Inputs and a float32 reference (torch SDPA on the GPU) of causal attention."""
    def inputs():
        import numpy as np
        rng = np.random.default_rng()
        q, k, v = (rng.standard_normal((Z, H, n_ctx, d), dtype=np.float32).astype(np.float16)
                   for _ in range(3))
        return dict(q=q, k=k, v=v, o=np.empty_like(q), sm_scale=float(d ** -0.5), Z=Z, H=H,
                    N_CTX=n_ctx, D=d, causal=1)

    def reference(q, k, v, o, sm_scale, Z, H, N_CTX, D, causal):
        import numpy as np
        import torch
        out = np.empty(q.shape, dtype=np.float32)
        for z in range(Z):
            qt, kt, vt = (torch.from_numpy(x[z].astype(np.float32)).cuda() for x in (q, k, v))
            out[z] = torch.nn.functional.scaled_dot_product_attention(
                qt, kt, vt, is_causal=bool(causal), scale=sm_scale).cpu().numpy()
        return out
    return inputs, reference


def record(store: Path, budget_ms: float, spaces: list[str]) -> None:
    """Sweep the named spaces exhaustively into ``store`` (GPU)."""
    import time

    import jupyter_ktune
    attn_opts, attn_body = attention_cell()
    table = {"softmax": ("--out y", SOFTMAX, softmax_io()),
             "scale": ("--out y", COPY, copy_io()),
             "attn_fwd": (attn_opts, attn_body, attention_io())}
    for name in spaces:
        opts, src, (inputs, reference) = table[name]
        spec = jupyter_ktune.parse_cell(
            f"{name} --backend triton --inputs inputs --reference reference {opts} "
            f"--budget-ms {budget_ms}", src, {"inputs": inputs, "reference": reference})
        t0 = time.perf_counter()
        r = jupyter_ktune.tune(spec, "exhaustive", store=store, top_k=0,
                               on_result=lambda p, t0=t0, name=name: print(
            f"{time.perf_counter() - t0:6.1f} s {name} {p.text()}", flush=True))
        print(r.summary(), flush=True)


def replay_all(spaces: dict, seeds: int, tol: float) -> dict:
    """Replay every strategy over every recorded space; returns the table."""
    from jupyter_ktune.tuning.search import STRATEGIES, evaluations_to_within, replay
    table = {}
    for label, (space, recorded) in spaces.items():
        ok = [v for v in recorded.values() if v is not None]
        best, n = min(ok), len(recorded)
        row = {"configs": n, "timed_ok": len(ok)}
        for name in sorted(STRATEGIES):
            evals = [evaluations_to_within(replay(name, space, recorded, seed=s), best, tol) or n
                     for s in range(seeds)]
            row[name] = {"median": statistics.median(evals), "mean": statistics.mean(evals),
                         "p90": sorted(evals)[int(0.9 * (len(evals) - 1))],
                         "median_pct_of_space": 100 * statistics.median(evals) / n}
        table[label] = row
    return table


def stored_spaces(store_paths: list[Path]) -> dict:
    """Each (kernel, device) of the stores as (Space, {config: median})."""
    import jupyter_ktune  # noqa: F401 - parse_cell registry
    from jupyter_ktune.space import Param, Space
    from jupyter_ktune.tuning.store import Store
    out = {}
    for p in store_paths:
        with Store(p) as s:
            for key in s.keys():
                rows = s.results(key)
                if not rows:
                    continue
                names = sorted(rows[0].config)
                params = tuple(Param(n, tuple(sorted({r.config[n] for r in rows}))) for n in names)
                space = Space(params)
                recorded = {r.config: (r.median_ms if r.ok else None) for r in rows}
                # configs that were not allowed never ran: the space replayed is what was recorded
                space = _restricted(space, recorded)
                out[f"{rows[0].kernel} on {key.device}"] = (space, recorded)
    return out


def _restricted(space, recorded):
    from jupyter_ktune.space import Constraint, Space
    keys = {json.dumps(dict(c), sort_keys=True) for c in recorded}

    class _Only(Constraint):
        def holds(self, env):  # noqa: D102
            d = {p.name: env[p.name] for p in space.params}
            return json.dumps(d, sort_keys=True) in keys
    return Space(space.params, (_Only("True"),))


def main() -> None:
    """Record (GPU) and/or replay, then write JSON."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--record", type=Path, help="store to record the spaces into (GPU)")
    ap.add_argument("--spaces", nargs="*", default=["attn_fwd", "softmax", "scale"],
                    help="which spaces --record sweeps")
    ap.add_argument("--stores", type=Path, nargs="*", default=[], help="stores to replay")
    ap.add_argument("--synthetic", action="store_true", help="replay the synthetic GEMM model")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budget-ms", type=float, default=20.0)
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "search_eff.json")
    args = ap.parse_args()
    if args.record:
        record(args.record, args.budget_ms, args.spaces)
        args.stores.append(args.record)
    spaces = stored_spaces(args.stores)
    if args.synthetic:
        from test_search import RECORDED, SPACE
        spaces["synthetic GEMM model (CPU)"] = (SPACE, RECORDED)
    table = replay_all(spaces, args.seeds, 0.03)
    args.out.write_text(json.dumps(table, indent=1))
    for label, row in table.items():
        print(f"{label}: {row['configs']} configs")
        for k, v in row.items():
            if isinstance(v, dict):
                print(f"  {k:10s} median {v['median']:6.1f} evals ({v['median_pct_of_space']:.0f}%)"
                      f"  mean {v['mean']:.1f}  p90 {v['p90']}")


if __name__ == "__main__":
    main()
