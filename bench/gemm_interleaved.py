"""The TMA GEMM cell's best configs against cuBLAS, interleaved, with a CI on the ratio.

``gemm_vs_cublas.py`` times cuBLAS once (or twice) and each config once. On the H200 runs of
issue 8, cuBLAS's do_bench median moved from 1.38 to 1.62 ms between runs and even within one
process, so one sample per side can't carry a 95 % claim. Here every round times cuBLAS and each
config back to back (``triton.testing.do_bench``, median, rotating the order), and the ratio
median(cuBLAS) / median(config) gets a bootstrap 95 % CI over the rounds
(``jupyter_ktune.tune.report.ratio_ci``). The kernel is the notebook's own cell, loaded the way
the worker loads it, and checked once against ``torch.matmul``.

    python bench/gemm_interleaved.py [SIZE] [--rounds N] [--json PATH]     # on the GPU
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

BEST = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, NUM_SMS=132,
            EPILOGUE_SUBTILE=1, WARP_SPECIALIZE=0)
CONFIGS = {"tma s4": dict(BEST, num_stages=4), "tma s3": dict(BEST, num_stages=3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("size", type=int, nargs="?", default=8192)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--json", type=Path, default=Path("gemm_interleaved.json"))
    args = ap.parse_args()

    import numpy as np
    import torch
    import triton

    from gemm_vs_cublas import cells
    from jupyter_ktune.backends.triton import _ensure_allocator, load_module
    from jupyter_ktune.tune.report import ratio_ci

    _ensure_allocator()
    n = args.size
    kernel = getattr(load_module(cells()["matmul_tma"][1], "matmul_tma"), "matmul_tma")
    a = torch.randn(n, n, device="cuda").to(torch.bfloat16)
    b = torch.randn(n, n, device="cuda").to(torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    expected = torch.matmul(a, b)

    def launcher(cfg):
        grid = (min(cfg["NUM_SMS"], triton.cdiv(n, cfg["BLOCK_M"]) * triton.cdiv(n, cfg["BLOCK_N"])),)
        return lambda: kernel[grid](a, b, c, n, n, n, **cfg)

    sides = {"cuBLAS": lambda: torch.matmul(a, b)}
    for name, cfg in CONFIGS.items():
        fn = launcher(cfg)
        fn()
        torch.cuda.synchronize()
        err = (c.float() - expected.float()).abs().max().item()
        assert err < 1.0, f"{name}: max abs error {err} against torch.matmul"
        sides[name] = fn
    samples: dict[str, list[float]] = {k: [] for k in sides}
    names = list(sides)
    for r in range(args.rounds):
        for k in names[r % len(names):] + names[:r % len(names)]:  # rotate who goes first
            samples[k].append(float(triton.testing.do_bench(sides[k], return_mode="median")))
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.3f} ms" for k, v in samples.items()),
              flush=True)
    tflops = lambda ms: 2 * n ** 3 / (ms * 1e-3) / 1e12  # noqa: E731
    out = {"size": n, "rounds": args.rounds, "device": torch.cuda.get_device_name(),
           "torch": torch.__version__, "triton": triton.__version__, "configs": CONFIGS,
           "samples_ms": samples, "summary": {}}
    print(f"\n{n}^3 bf16, {args.rounds} interleaved rounds of do_bench medians on "
          f"{out['device']} (torch {torch.__version__}, triton {triton.__version__})")
    for k, v in samples.items():
        med = float(np.median(v))
        row = {"median_ms": med, "min_ms": min(v), "max_ms": max(v), "tflops": tflops(med)}
        line = f"{k:8} median {med:.3f} ms [{min(v):.3f}, {max(v):.3f}] {tflops(med):6.1f} TFLOP/s"
        if k != "cuBLAS":
            ratio, lo, hi = ratio_ci(np.asarray(v), np.asarray(samples["cuBLAS"]))
            row |= {"pct_of_cublas": 100 * ratio, "ci95_pct": [100 * lo, 100 * hi]}
            line += f"  {100 * ratio:5.1f} % of cuBLAS, 95 % CI [{100 * lo:.1f}, {100 * hi:.1f}]"
        out["summary"][k] = row
        print(line)
    args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
