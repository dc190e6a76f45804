"""The CUDA C++ WGMMA + TMA attention cell of ``examples/attention_wgmma.ipynb`` against cuDNN
(issue 20, item 1).

    python bench/attention_wgmma_vs_cudnn.py --check     # any machine with nvcc: no GPU
    python bench/attention_wgmma_vs_cudnn.py [--rounds 10] [--dims 64 128] [--contexts 4096 16384]

``--check`` compiles every config of the bench space (``--all``: the cell's whole space as its
``require`` lines allow on an H200) for sm_90a with nvcc, as the static report does, and checks
the SASS for the two GEMMs' HGMMA shapes (``64xBLOCK_Nx16`` for Q K^T, ``64xHEAD_DIMx16`` for
P V) and UTMALDG, and ptxas's report for no spills and no stack. Exit 1 if any config fails.

On the GPU, steps printed as they go, a table last (fp16, Z=4, H=32):

1. correctness through the extension (``run_kernel``: the worker builds the TMA maps, loads
   nvcc's cubin and verifies against a float32 NumPy reference on fresh inputs) at N = 1024
   and at N = 1000 (a partial last tile), causal and not, for every config of the space;
2. per (D, causal, N): the extension's timing of each correct config (verification off), and
   the best one's output checked in this process against torch SDPA (cuDNN) on the same inputs;
3. per (D, causal, N): interleaved rounds of ``triton.testing.do_bench`` medians, cuDNN SDPA
   and the best config back to back, order rotated, and a bootstrap 95 % CI on the ratio
   (``jupyter_ktune.tuning.report.ratio_ci``), as the GEMM comparison is decided.

TFLOP/s count 4 N^2 D per head (half of it causal). Writes attention_wgmma_vs_cudnn.json.

``--fp8`` runs the cell's e4m3 variant (``SPACE_FP8``) instead: verification with atol 0.5 /
rtol 0.1 (P is rounded to e4m3), the extension's timing, and interleaved rounds against cuDNN
in fp16 on the same values, and against torch SDPA on float8 tensors where torch exposes it
(the error is recorded where it does not).

The cell's ``HEAD_DIM`` and ``FP8`` are tunables of one value, tied to the inputs; ``spec_for``
rewrites those two lines for the head dim and dtype it builds the inputs with.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # a checkout without installing (the worker too)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
NB = ROOT / "examples" / "attention_wgmma.ipynb"
from notebook_cell import kernel_cell  # noqa: E402 - bench/ is on sys.path as the script dir

H200 = {"SMEM_PER_BLOCK": 232448, "SM_COUNT": 132}
Z, H = 4, 32

_D128 = dict(HEAD_DIM=128, BLOCK_N=128, CONSUMERS=2, STAGES=2, OVERLAP=1, PINGPONG=0,
             PERSISTENT=1, EXP_POLY=0)
_D64 = dict(HEAD_DIM=64, BLOCK_N=128, CONSUMERS=3, STAGES=3, OVERLAP=1, PINGPONG=0,
            PERSISTENT=1, EXP_POLY=0)
#: the bench space per head dim: the notebook's start, the plain kernel (no overlap, no
#: ping-pong, one CTA per tile), and the neighbours that won a case in the earlier runs
SPACE = {
    128: [_D128, dict(_D128, OVERLAP=0, PERSISTENT=0), dict(_D128, PERSISTENT=0),
          dict(_D128, BLOCK_N=192), dict(_D128, BLOCK_N=176, PINGPONG=1),
          dict(_D128, STAGES=3)],
    64: [_D64, dict(_D64, CONSUMERS=2, OVERLAP=0, PERSISTENT=0), dict(_D64, PERSISTENT=0),
         dict(_D64, CONSUMERS=2, BLOCK_N=192, PINGPONG=1),
         dict(_D64, CONSUMERS=2, PINGPONG=1), dict(_D64, CONSUMERS=2, BLOCK_N=176, STAGES=2,
                                                  PINGPONG=1)],
}


#: TMA box columns and swizzle span, per the cell's FP8 tunable: a box row is one swizzle span
#: (64 fp16 columns in 128 bytes; a whole e4m3 row of HEAD_DIM bytes).
PANEL, SPAN = "HEAD_DIM if FP8 else 64", "HEAD_DIM if FP8 else 128"
#: fp8 tolerance, as examples/attention.ipynb's fp8 cell: P is rounded to e4m3 (3 mantissa bits)
FP8_TOLERANCE = " --atol 0.5 --rtol 0.1"


def make_inputs(n_ctx: int, d: int, causal: int, zh: int = Z * H, fp8: bool = False):
    """The notebook's inputs function at one shape (Q, K, V in e4m3 with ``fp8``)."""
    def inputs() -> dict[str, Any]:
        import ml_dtypes
        import numpy as np

        import jupyter_ktune

        rng = np.random.default_rng()
        shape = (zh * n_ctx, d)
        dtype = ml_dtypes.float8_e4m3fn if fp8 else np.float16
        q, k, v = (rng.standard_normal(shape, dtype=np.float32).astype(dtype) for _ in range(3))
        return dict(q=q, k=k, v=v, o=np.empty(shape, np.float16), sm_scale=float(1 / np.sqrt(d)),
                    N_CTX=n_ctx, ZH=zh, causal=causal,
                    q_map=jupyter_ktune.tma("q", box=("64 * CONSUMERS", PANEL), swizzle=SPAN),
                    k_map=jupyter_ktune.tma("k", box=("BLOCK_N", PANEL), swizzle=SPAN),
                    v_map=jupyter_ktune.tma("v", box=("BLOCK_N", PANEL), swizzle=SPAN))
    return inputs


def reference(q: Any, k: Any, v: Any, sm_scale: float, N_CTX: int, causal: int,
              **_: Any) -> Any:
    """float32 attention one head at a time (NumPy), as the notebook's reference."""
    import numpy as np

    out = np.empty(q.shape, np.float32)
    keep = np.tril(np.ones((N_CTX, N_CTX), dtype=bool)) if causal else None
    for h in range(q.shape[0] // N_CTX):
        rows = slice(h * N_CTX, (h + 1) * N_CTX)
        s = (q[rows].astype(np.float32) @ k[rows].astype(np.float32).T) * sm_scale
        if causal:
            s = np.where(keep, s, -np.inf)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out[rows] = (p / p.sum(axis=1, keepdims=True)) @ v[rows].astype(np.float32)
    return out


def spec_for(n_ctx: int, d: int, causal: int, zh: int = Z * H, body_edit=None,
             fp8: bool = False):
    from jupyter_ktune import parse_cell

    line, body = kernel_cell(NB, "attn_fwd")
    body = body.replace("HEAD_DIM in [128]", f"HEAD_DIM in [{d}]", 1)  # the cell's D is one
    if fp8:  # the cell's dtype is one too
        body, line = body.replace("FP8 in [0]", "FP8 in [1]", 1), line + FP8_TOLERANCE
    if body_edit is not None:
        body = body_edit(body)
    return parse_cell(line, body, {"inputs": make_inputs(n_ctx, d, causal, zh, fp8),
                                   "reference": reference})


#: the fp8 space: the fp16 starting configs in e4m3 (FP8 needs OVERLAP, BLOCK_N 64 or 128)
SPACE_FP8 = {128: [dict(_D128, FP8=1), dict(_D128, FP8=1, STAGES=3)],
             64: [dict(_D64, FP8=1), dict(_D64, FP8=1, CONSUMERS=2, PINGPONG=1)]}


def label(cfg: dict) -> str:
    return (f"D{cfg['HEAD_DIM']} n{cfg['BLOCK_N']} c{cfg['CONSUMERS']} s{cfg['STAGES']} "
            f"ov{cfg['OVERLAP']} pp{cfg['PINGPONG']} p{cfg['PERSISTENT']} e{cfg['EXP_POLY']}"
            + (" fp8" if cfg.get("FP8") else ""))


def check(all_configs: bool) -> int:
    """Compile every config for sm_90a: both HGMMA shapes and UTMALDG, no spills, no stack."""
    from jupyter_ktune.backends.cuda.backend import CudaBackend

    backend, bad, n = CudaBackend(), 0, 0
    print(f"{'config':32} {'regs':>4} {'spill':>5} {'stack':>5}  HGMMA / UTMALDG")
    for d, fp8 in ((64, False), (128, False), (64, True), (128, True)):
        spec = spec_for(4096, d, 0, fp8=fp8)
        configs = (list(spec.space.configs(H200)) if all_configs
                   else [spec.space.config(c) for c in (SPACE_FP8 if fp8 else SPACE)[d]])
        for cfg in configs:
            n += 1
            why = spec.space.violations(cfg, H200)
            if why:
                print(f"{label(dict(cfg)):32} not allowed: {'; '.join(why)}")
                bad += 1
                continue
            k = backend.static_report(spec, cfg).kernel("attn_fwd")
            k_step = 32 if fp8 else 16  # 8-bit wgmma: QGMMA, k32
            want = {f"{'QGMMA' if fp8 else 'HGMMA'}.64x{n}x{k_step}.F32"
                    for n in (cfg["BLOCK_N"], d)}
            mma = sorted(m for m in k.sass.mnemonics if m.startswith(("HGMMA", "QGMMA")))
            have = {".".join(m.split(".")[:3]) for m in mma}
            ok = (want <= have and k.sass.opcodes.get("UTMALDG", 0) > 0
                  and k.spill_stores == k.spill_loads == k.stack_frame == 0)
            bad += not ok
            print(f"{label(dict(cfg)):32} {k.registers:4} {k.spill_stores + k.spill_loads:5} "
                  f"{k.stack_frame:5}  {','.join(mma) or 'NONE'} / "
                  f"{k.sass.opcodes.get('UTMALDG', 0)}  {'ok' if ok else 'FAIL'}")
    print(f"{n - bad} of {n} configs ok (sm_90a, nvcc)")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compile and inspect only (no GPU)")
    ap.add_argument("--all", action="store_true", help="with --check: the cell's whole space")
    ap.add_argument("--dims", type=int, nargs="+", default=[128, 64])
    ap.add_argument("--contexts", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--causal", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--fp8", action="store_true",
                    help="the e4m3 cell (SPACE_FP8): verify, time, race cuDNN fp16 (and fp8 SDPA "
                         "where torch has it)")
    ap.add_argument("--json", type=Path, default=Path("attention_wgmma_vs_cudnn.json"))
    args = ap.parse_args()
    if args.check:
        return check(args.all)
    import attention_wgmma_gpu as gpu  # noqa: PLC0415 - the GPU half, torch and triton

    return gpu.run(args, sys.modules[__name__])


if __name__ == "__main__":
    sys.exit(main())
