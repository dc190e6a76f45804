"""Wall time to the best config: jupyter-ktune's sweep vs ``triton.autotune``, same configs.

The Triton bf16 matmul of examples/matmul_triton.ipynb over 72 configs (BLOCK_M x BLOCK_N x
BLOCK_K x num_warps x num_stages), each side with its own cold Triton cache. ktune: exhaustive
sweep (precompile pool on the CPUs, verification on, re-timing of the top 3). Triton: the first
call of an ``@triton.autotune`` kernel (serial compile + do_bench per config).

    python bench/sweep_vs_autotune.py --size 4096 --out results.json        # on the GPU
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
import sweep_phases  # noqa: E402

from jupyter_ktune.tuning.search import DEFAULT_STRATEGY  # noqa: E402

SPACE = ("# ktune: BLOCK_M in [64, 128]; BLOCK_N in [64, 128, 256]; BLOCK_K in [32, 64]\n"
         "# ktune: GROUP_M in [8]; num_warps in [4, 8]; num_stages in [2, 3, 4]\n"
         "# ktune: grid = cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N); flops = 2 * M * N * K\n")
def _example_kernel() -> str:
    """The ``@triton.jit`` matmul of examples/matmul_triton.ipynb, without its directives: one
    source for the notebook and this benchmark, so they cannot drift apart."""
    nb = json.loads((ROOT / "examples" / "matmul_triton.ipynb").read_text())
    cell = next("".join(c["source"]) for c in nb["cells"]
                if "".join(c["source"]).startswith("%%kernel matmul"))
    body = cell.split("\n", 1)[1]
    return "\n".join(line for line in body.splitlines()
                     if not line.lstrip().startswith("# ktune:")) + "\n"


KERNEL = _example_kernel()


def tagged_kernel(tag: str) -> str:
    """KERNEL with a comment as the body's first line: a new source hash for ktune's store and a
    new Triton cache key, so a second sweep in the same process compiles everything afresh."""
    lines = KERNEL.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("def "))
    end = next(i for i in range(start, len(lines)) if lines[i].rstrip().endswith("):"))
    return "\n".join(lines[:end + 1] + [f"    # {tag}"] + lines[end + 1:]) + "\n"


def make_io(size: int):
    """inputs/reference for the worker (the reference uses torch on the GPU when there is one)."""
    def inputs(M=size, N=size, K=size):
        import ml_dtypes
        import numpy as np
        rng = np.random.default_rng()
        a = rng.standard_normal((M, K), dtype=np.float32).astype(ml_dtypes.bfloat16)
        b = rng.standard_normal((K, N), dtype=np.float32).astype(ml_dtypes.bfloat16)
        return dict(a=a, b=b, c=np.empty((M, N), dtype=ml_dtypes.bfloat16), M=M, N=N, K=K)

    def reference(a, b, c, M, N, K):
        import numpy as np
        try:
            import torch
            if torch.cuda.is_available():
                ta = torch.from_numpy(a.astype(np.float32)).cuda()
                tb = torch.from_numpy(b.astype(np.float32)).cuda()
                return (ta @ tb).cpu().numpy()
        except ImportError:
            pass
        return a.astype(np.float32) @ b.astype(np.float32)
    return inputs, reference


def ktune_sweep(size: int, store: Path, budget_ms: float, strategy: str = "exhaustive",
                budget: int | None = None, kernel: str = KERNEL) -> dict:
    """A ktune sweep (cold Triton cache for this kernel source); returns times and the winner.

    The first sweep of the process also pays for the device worker's start (CUDA, cuBLAS) and
    the compile pool's; later ones find both running, as a sweep started from a notebook does.
    """
    import jupyter_ktune
    inputs, reference = make_io(size)
    spec = jupyter_ktune.parse_cell(
        f"matmul --backend triton --inputs inputs --reference reference --out c "
        f"--budget-ms {budget_ms}", SPACE + kernel, {"inputs": inputs, "reference": reference})
    t0 = time.perf_counter()
    report = jupyter_ktune.tune(
        spec, strategy, budget=budget, store=store, top_k=3,
        on_result=lambda p: print(f"{time.perf_counter() - t0:7.1f} s  {p.text()}  [worker ms: "
                                  + " ".join(f"{k} {v:.0f}" for k, v in
                                             p.result.extra.get("phases_ms", {}).items())
                                  + "]", flush=True))
    wall = time.perf_counter() - t0
    best = report.best
    phases = sweep_phases.breakdown(report, wall)
    print("ktune phases: " + sweep_phases.text(phases), flush=True)
    return {"strategy": strategy, "budget": budget, "wall_s": wall, "phases_s": phases,
            "sweep_s": report.evaluations[-1].at_s if report.evaluations else None,
            "time_to_best_s": report.time_to_best_s, "configs": report.valid_configs,
            "counts": report.counts, "winner": dict(best.config) if best else None,
            "winner_ms": best.median_ms if best else None, "verdict": report.verdict.text()
            if report.verdict else None, "info": dict(report.info),
            "ranked": [(dict(r.config), r.median_ms) for r in report.ranked[:10]]}


def triton_autotune(size: int) -> dict:
    """``@triton.autotune`` over the same configs; first call = tuning."""
    import importlib.util

    import torch
    import triton
    configs_src = (
        "import itertools\n"
        "CONFIGS = [triton.Config({'BLOCK_M': bm, 'BLOCK_N': bn, 'BLOCK_K': bk, 'GROUP_M': 8},\n"
        "                         num_warps=w, num_stages=s) for bm, bn, bk, w, s in\n"
        "           itertools.product((64, 128), (64, 128, 256), (32, 64), (4, 8), (2, 3, 4))]\n")
    src = ("import triton, triton.language as tl\nfrom triton import cdiv\n" + configs_src
           + KERNEL.replace("@triton.jit", "@triton.autotune(configs=CONFIGS, key=['M', 'N', 'K'])"
                            "\n@triton.jit"))
    path = Path(tempfile.mkdtemp()) / "tt_autotune_matmul.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("tt_autotune_matmul", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    configs = mod.CONFIGS
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(size, size, device="cuda", dtype=torch.bfloat16)

    def grid(meta):
        return (triton.cdiv(size, meta["BLOCK_M"]) * triton.cdiv(size, meta["BLOCK_N"]),)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    mod.matmul[grid](a, b, c, size, size, size)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    best = mod.matmul.best_config
    winner = dict(best.kwargs) | {"num_warps": best.num_warps, "num_stages": best.num_stages}
    timings = {str(k): v for k, v in getattr(mod.matmul, "configs_timings", {}).items()}
    return {"wall_s": wall, "configs": len(configs), "winner": winner,
            "timings_ms": dict(list(timings.items())[:100])}


def main() -> None:
    """Run both and write one JSON."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--budget-ms", type=float, default=30.0)
    ap.add_argument("--store", type=Path, default=Path(tempfile.mkdtemp()) / "sweep.sqlite")
    ap.add_argument("--out", type=Path, default=Path("sweep_vs_autotune.json"))
    ap.add_argument("--warm", action="store_true",
                    help="also sweep twice more in the same process (worker and pool running): "
                         "exhaustive, and the default strategy over a quarter of the space")
    args = ap.parse_args()
    out = {"size": args.size, "store": str(args.store)}
    base = Path(tempfile.mkdtemp(prefix="ktune-bench-"))
    os.environ["TRITON_CACHE_DIR"] = str(base / "ktune-cache")  # cold cache for ktune's side
    out["worker_start_s"] = sweep_phases.start_worker("triton")  # stated apart
    out["ktune"] = ktune_sweep(args.size, args.store, args.budget_ms)
    print(json.dumps(out["ktune"], default=str)[:2000], flush=True)
    args.out.write_text(json.dumps(out, indent=1, default=str))  # kept if a later step is cut
    if args.warm:
        # the same process again: worker and compile pool running, the Triton cache cold for
        # the tagged source. Exhaustive, then the default strategy with a quarter of the space.
        out["ktune_warm"] = ktune_sweep(args.size, args.store, args.budget_ms,
                                        kernel=tagged_kernel("warm exhaustive"))
        print(json.dumps(out["ktune_warm"], default=str)[:2000], flush=True)
        args.out.write_text(json.dumps(out, indent=1, default=str))
        n = out["ktune"]["configs"]
        out["ktune_warm_default"] = ktune_sweep(
            args.size, args.store, args.budget_ms, strategy=DEFAULT_STRATEGY,
            budget=-(-n // 4), kernel=tagged_kernel("warm default strategy"))
        print(json.dumps(out["ktune_warm_default"], default=str)[:2000], flush=True)
        args.out.write_text(json.dumps(out, indent=1, default=str))
    os.environ["TRITON_CACHE_DIR"] = str(base / "triton-cache")  # cold cache for autotune
    out["triton_autotune"] = triton_autotune(args.size)
    auto = out["triton_autotune"]
    out["speedup_wall"] = auto["wall_s"] / out["ktune"]["wall_s"]
    for side in ("ktune_warm", "ktune_warm_default"):
        if side in out:
            out[f"speedup_wall_{side}"] = auto["wall_s"] / out[side]["wall_s"]
            out[f"{side}_same_winner"] = out[side]["winner"] == auto["winner"]
    tw = out["triton_autotune"]["winner"]
    ranked = {json.dumps(c, sort_keys=True): ms for c, ms in out["ktune"]["ranked"]}
    tw_ms = ranked.get(json.dumps(tw, sort_keys=True))
    out["triton_winner_in_ktune_ms"] = tw_ms
    if tw_ms and out["ktune"]["winner_ms"]:
        out["triton_winner_vs_ktune_winner"] = tw_ms / out["ktune"]["winner_ms"]
    args.out.write_text(json.dumps(out, indent=1, default=str))
    print(json.dumps({k: v for k, v in out.items() if k != "ktune"}, default=str)[:3000])


if __name__ == "__main__":
    main()
