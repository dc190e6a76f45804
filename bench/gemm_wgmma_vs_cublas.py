"""The CUDA C++ WGMMA + TMA GEMM cell of ``examples/gemm_wgmma.ipynb`` against cuBLAS (issue 20).

    python bench/gemm_wgmma_vs_cublas.py --check          # any machine with nvcc: no GPU
    python bench/gemm_wgmma_vs_cublas.py [--rounds 15]    # on the H200, from the repo root

``--check`` compiles every config of the bench space (``--all``: of the cell's whole space,
as the ``require`` lines allow it on an H200) for sm_90a with nvcc, as the static report does,
and checks each one's SASS for ``HGMMA`` and ``UTMALDG`` and ptxas's report for no spills and
no stack; it exits 1 if any config fails.

On the GPU, four steps, each printed as it goes, a table last:

1. correctness through the extension (``run_kernel``: the worker builds the TMA descriptors,
   loads nvcc's sm_90a cubin, verifies against a float32 reference on fresh inputs) at 1024^3
   for every config of the space (a small size keeps the CPU reference quick);
2. the extension's own timing of every config at SIZE^3 (default 8192), verification off;
3. the best config loaded in this process and checked against ``torch.matmul(A, B.T)`` at
   SIZE^3;
4. interleaved rounds of ``triton.testing.do_bench`` medians, cuBLAS and the best config back to
   back with the order rotated, and a bootstrap 95 % CI on the ratio of medians
   (``jupyter_ktune.tuning.report.ratio_ci``), as ``bench/gemm_interleaved.py`` does.

Writes gemm_wgmma_vs_cublas.json (or ``--json PATH``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # a checkout without installing (the worker too)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
NB = ROOT / "examples" / "gemm_wgmma.ipynb"
from notebook_cell import kernel_cell  # noqa: E402 - bench/ is on sys.path as the script dir

H200 = {"SMEM_PER_BLOCK": 232448, "SM_COUNT": 132}  # for --check --all without a device

_BASE = dict(BM=128, BN=256, BK=64, STAGES=4, SWIZZLE="128B", CONSUMERS=2, PERSISTENT=1,
             GROUP_M=8)
#: the bench space: the notebook's start, its plain setting, and neighbours of the start
SPACE = [
    _BASE,
    dict(BM=128, BN=128, BK=64, STAGES=2, SWIZZLE="128B", CONSUMERS=1, PERSISTENT=0, GROUP_M=8),
    dict(_BASE, PERSISTENT=0),
    dict(_BASE, STAGES=3),
    dict(_BASE, GROUP_M=16),
    dict(_BASE, BK=128, STAGES=2),
    dict(_BASE, SWIZZLE="64B"),
    dict(_BASE, BM=256, BN=128, STAGES=4),
    dict(_BASE, BN=128, CONSUMERS=1, STAGES=5),
]


def make_inputs(n: int):
    """Return an inputs function for n^3 (M = N = K), the notebook's own."""
    def inputs() -> dict[str, Any]:
        import ml_dtypes
        import numpy as np

        import jupyter_ktune

        rng = np.random.default_rng()
        bf16 = ml_dtypes.bfloat16
        return dict(A=rng.standard_normal((n, n), dtype=np.float32).astype(bf16),
                    B=rng.standard_normal((n, n), dtype=np.float32).astype(bf16),
                    C=np.empty((n, n), bf16), M=n, N=n, K=n,
                    a_map=jupyter_ktune.tma("A", box=("BM", "SWIZZLE // 2"), swizzle="SWIZZLE"),
                    b_map=jupyter_ktune.tma("B", box=("BN", "SWIZZLE // 2"), swizzle="SWIZZLE"))
    return inputs


def reference(A: Any, B: Any, **_: Any) -> Any:
    import numpy as np

    return A.astype(np.float32) @ B.astype(np.float32).T


def spec_for(n: int):
    from jupyter_ktune import parse_cell

    line, body = kernel_cell(NB, "gemm_wgmma")
    return parse_cell(line, body, {"inputs": make_inputs(n), "reference": reference})


def label(cfg: dict) -> str:
    return (f"{cfg['BM']}x{cfg['BN']}x{cfg['BK']} s{cfg['STAGES']} {cfg['SWIZZLE']} "
            f"c{cfg['CONSUMERS']} {'pers' if cfg['PERSISTENT'] else 'tile'} g{cfg['GROUP_M']}")


def check(all_configs: bool) -> int:
    """Compile every config for sm_90a; HGMMA and UTMALDG in the SASS, no spills, no stack.

    The HGMMA must be the config's own shape, 64 x BN x 16 bf16 -> f32: ptxas also emits a
    placeholder ``HGMMA.64x8x16.F16`` for wgmma fences even when no mma is left.
    """
    from jupyter_ktune.backends.cuda.backend import CudaBackend

    spec, backend = spec_for(8192), CudaBackend()
    configs = (list(spec.space.configs(H200)) if all_configs
               else [spec.space.config(c) for c in SPACE])
    bad = 0
    print(f"{'config':34} {'regs':>4} {'spill':>5} {'stack':>5}  HGMMA / UTMALDG")
    for cfg in configs:
        why = spec.space.violations(cfg, H200)
        if why:
            print(f"{label(dict(cfg)):34} not allowed: {'; '.join(why)}")
            bad += 1
            continue
        k = backend.static_report(spec, cfg).kernel("gemm_wgmma")
        mma = sorted(m for m in k.sass.mnemonics if m.startswith("HGMMA"))
        tma = k.sass.opcodes.get("UTMALDG", 0)
        want = f"HGMMA.64x{cfg['BN']}x16.F32.BF16"
        ok = want in mma and tma > 0 and k.spill_stores == k.spill_loads == k.stack_frame == 0
        bad += not ok
        print(f"{label(dict(cfg)):34} {k.registers:4} {k.spill_stores + k.spill_loads:5} "
              f"{k.stack_frame:5}  {','.join(mma) or 'NONE'} / {tma}  {'ok' if ok else 'FAIL'}")
    print(f"{len(configs) - bad} of {len(configs)} configs ok (sm_90a, nvcc)")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("size", type=int, nargs="?", default=8192)
    ap.add_argument("--check", action="store_true", help="compile and inspect only (no GPU)")
    ap.add_argument("--all", action="store_true", help="with --check: the cell's whole space")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--json", type=Path, default=Path("gemm_wgmma_vs_cublas.json"))
    args = ap.parse_args()
    if args.check:
        return check(args.all)

    import numpy as np
    import torch
    import triton

    from jupyter_ktune import run_kernel
    from jupyter_ktune.backends.cuda.backend import CudaBackend
    from jupyter_ktune.tuning.report import ratio_ci

    n, out = args.size, {"size": args.size, "configs": SPACE, "steps": {}}
    print("1. correctness through the extension at 1024^3 (float32 reference on the host)")
    small, correct = spec_for(1024), []
    for cfg in SPACE:
        r = run_kernel(small, cfg)
        good = r.status.value == "ok"
        correct.append(good)
        print(f"   {label(cfg):34} {r.status.value}  {r.reason[:200]}", flush=True)
    out["steps"]["correct_1024"] = correct

    print(f"2. the extension's timing at {n}^3 (verification off)")
    big, timed = spec_for(n).with_options(verify=False), {}
    for cfg, good in zip(SPACE, correct, strict=True):
        if not good:
            continue
        r = run_kernel(big, cfg)
        if r.median_ms:
            timed[label(cfg)] = (r.median_ms, cfg)
        print(f"   {label(cfg):34} {r.status.value} {r.median_ms} ms", flush=True)
    out["steps"]["extension_ms"] = {k: v[0] for k, v in timed.items()}
    if not timed:
        print("no config ran correctly; nothing to compare")
        args.json.write_text(json.dumps(out, indent=1))
        return 1
    best_label, (_, best) = min(timed.items(), key=lambda kv: kv[1][0])

    print(f"3. {best_label} in this process, checked against torch.matmul(A, B.T) at {n}^3")
    spec = spec_for(n)
    backend = CudaBackend()
    host = make_inputs(n)()
    bound = backend.compile(spec, spec.space.config(best)).bind(host)
    a = torch.from_numpy(host["A"].view(np.int16)).cuda().view(torch.bfloat16)
    b = torch.from_numpy(host["B"].view(np.int16)).cuda().view(torch.bfloat16)
    expected = torch.matmul(a, b.T)
    bound.launch()
    torch.cuda.synchronize()
    got = torch.from_numpy(bound.read_outputs()["C"].view(np.int16)).cuda().view(torch.bfloat16)
    err = ((got.float() - expected.float()).abs().max() / expected.float().abs().max()).item()
    print(f"   max |C - cuBLAS| / max |cuBLAS| = {err:.2e}")
    out["steps"]["rel_err_vs_cublas"] = err
    if not err < 2e-2:
        print("   WRONG against cuBLAS: not timing it")
        args.json.write_text(json.dumps(out, indent=1))
        return 1

    print(f"4. {args.rounds} interleaved rounds of do_bench medians")
    sides = {"cuBLAS": lambda: torch.matmul(a, b.T), best_label: bound.launch}
    samples: dict[str, list[float]] = {k: [] for k in sides}
    names = list(sides)
    for r in range(args.rounds):
        for k in names[r % 2:] + names[:r % 2]:  # rotate who goes first
            samples[k].append(float(triton.testing.do_bench(sides[k], return_mode="median")))
        print(f"   round {r + 1}: " + ", ".join(f"{k} {v[-1]:.3f} ms" for k, v in samples.items()),
              flush=True)
    tflops = lambda ms: 2 * n ** 3 / (ms * 1e-3) / 1e12  # noqa: E731
    out["samples_ms"] = samples
    out["device"] = torch.cuda.get_device_name()
    print(f"\n{n}^3 bf16 on {out['device']}, {args.rounds} interleaved rounds (torch "
          f"{torch.__version__}, triton {triton.__version__})")
    print(f"{'side':34} {'median ms':>9} {'TFLOP/s':>8}  % of cuBLAS [95 % CI]")
    for k, v in samples.items():
        med = float(np.median(v))
        line = f"{k:34} {med:9.3f} {tflops(med):8.1f}"
        if k != "cuBLAS":
            ratio, lo, hi = ratio_ci(np.asarray(v), np.asarray(samples["cuBLAS"]))
            out["pct_of_cublas"] = [100 * ratio, 100 * lo, 100 * hi]
            line += f"  {100 * ratio:5.1f} [{100 * lo:.1f}, {100 * hi:.1f}]  (target >= 90)"
        print(line)
    args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
