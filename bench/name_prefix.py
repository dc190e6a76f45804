"""Does a kernel's name change its time? The ``name_prefix`` experiment of issue 38 item 3.

Usage::

    python bench/name_prefix.py [--rounds 12] [--out DIR] [--only gemm attn-fp16 ...]

The story kernel engineers tell is that some toolchains treat a kernel whose name starts with
``cutlass_`` differently. This answers it for the project's own Hopper kernels with the compare
machinery a user has (``compare_configs``: the two configs re-run interleaved, A B A B ..., the
ratio median(B)/median(A) with a paired bootstrap 95 % CI), A being each kernel's recorded best
config and B the same config with ``name_prefix = "cutlass_"``:

- ``gemm``: the WGMMA + TMA GEMM of ``examples/gemm_wgmma.ipynb`` at 8192^3 bf16;
- ``attn-fp16`` and ``attn-fp8``: the WGMMA attention of ``examples/attention_wgmma.ipynb``,
  D = 128, N = 4096, not causal;
- ``triton-attn-fp16`` and ``triton-attn-fp8``: the Triton attention of
  ``examples/attention.ipynb`` (the fp8 cell is the same kernel on e4m3 inputs), D = 128,
  N = 4096, not causal, a fixed good config (BLOCK_M 128, BLOCK_N 64, 8 warps, 3 stages);
- ``triton-mm``: the Triton matmul of ``bench/compiler_controls.py`` (2048^3 fp32, TF32 dot);
- ``gemm-maxrreg64``, ``gemm-maxrreg128``: not the name: the WGMMA GEMM's best config against
  itself built with ``nvcc_flags = ["-maxrregcount=N"]`` (a register cap swept, issue 38 item 3).

The best configs are the winners recorded in ``bench/results/gemm_wgmma_vs_cublas`` and
``bench/results/attention_wgmma_vs_cudnn``. The cells are the notebooks' own, with one added
line, ``name_prefix in ["", "cutlass_"]``. Each row also gives the static difference (the
symbol, registers, SASS classes): a renamed kernel must build to the same code. On a machine
without a GPU every row says why it was not timed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent)]

import attention_vs_sdpa as tattn  # noqa: E402 - bench/ is on sys.path above
import attention_wgmma_vs_cudnn as attn  # noqa: E402
import compiler_controls as controls  # noqa: E402
import gemm_wgmma_vs_cublas as gemm  # noqa: E402
from notebook_cell import kernel_cell  # noqa: E402

PREFIX = 'name_prefix in ["", "cutlass_"]'

GEMM_BEST = dict(BM=128, BN=256, BK=64, STAGES=3, SWIZZLE="128B", CONSUMERS=2, PERSISTENT=1,
                 GROUP_M=8)  # gemm_wgmma_vs_cublas 2026-12-01-0831: 95.9 % of cuBLAS
ATTN_BEST = dict(HEAD_DIM=128, FP8=0, BLOCK_N=192, CONSUMERS=2, STAGES=2, OVERLAP=1,
                 PINGPONG=0, PERSISTENT=1, EXP_POLY=0)  # attention_wgmma_vs_cudnn 2026-12-01-1607


def with_prefix_line(body: str, comment: str) -> str:
    """The cell body with ``name_prefix`` declared on a line of its own, before its first
    ``ktune:`` line (the directives' place)."""
    lines = body.splitlines(keepends=True)
    at = next(i for i, s in enumerate(lines) if s.lstrip().startswith(f"{comment} ktune:"))
    return "".join(lines[:at] + [f"{comment} ktune: {PREFIX}\n"] + lines[at:])


MAXRREG = (64, 128)  # the register caps the GEMM is built with (its best uses 168)


def gemm_spec(n: int = 8192, flags: bool = False) -> Any:
    from jupyter_ktune import parse_cell

    line, body = kernel_cell(gemm.NB, "gemm_wgmma")
    body = with_prefix_line(body, "//")
    if flags:
        caps = ", ".join(f'["-maxrregcount={r}"]' for r in MAXRREG)
        body = body.replace(f"// ktune: {PREFIX}\n", f"// ktune: {PREFIX}\n"
                            f"// ktune: nvcc_flags in [[], {caps}]\n", 1)
    return parse_cell(line, body, {"inputs": gemm.make_inputs(n), "reference": gemm.reference})


def triton_attn_spec(fp8: bool, n_ctx: int = 4096, d: int = 128) -> Any:
    import functools

    from jupyter_ktune import parse_cell

    line, body = tattn.kernel_cells()["attn_fwd_fp8" if fp8 else "attn_fwd"]
    ns = {"inputs": functools.partial(tattn.inputs, N_CTX=n_ctx, D=d, causal=0),
          "inputs_fp8": functools.partial(tattn.inputs_fp8, N_CTX=n_ctx, D=d, causal=0),
          "reference": tattn.reference}
    return parse_cell(line + " --budget-ms 300 --timeout 600", with_prefix_line(body, "#"), ns)


TRITON_ATTN_BEST = dict(BLOCK_M=128, BLOCK_N=64, HEAD_DIM=128, num_warps=8, num_stages=3)


def attn_spec(fp8: bool) -> Any:
    return attn.spec_for(4096, 128, 0, body_edit=lambda b: with_prefix_line(b, "//"), fp8=fp8)


#: case -> (title, spec maker, config A, config B); B differs from A in one compiler control
CASES = {
    "gemm": ("WGMMA GEMM 8192^3 bf16", gemm_spec, dict(GEMM_BEST, name_prefix=""),
             dict(GEMM_BEST, name_prefix="cutlass_")),
    "attn-fp16": ("WGMMA attention fp16 D128 N4096", lambda: attn_spec(False),
                  dict(ATTN_BEST, name_prefix=""), dict(ATTN_BEST, name_prefix="cutlass_")),
    "attn-fp8": ("WGMMA attention fp8 D128 N4096", lambda: attn_spec(True),
                 dict(ATTN_BEST, FP8=1, BLOCK_N=128, name_prefix=""),
                 dict(ATTN_BEST, FP8=1, BLOCK_N=128, name_prefix="cutlass_")),
    "triton-attn-fp16": ("Triton attention fp16 D128 N4096", lambda: triton_attn_spec(False),
                         dict(TRITON_ATTN_BEST, name_prefix=""),
                         dict(TRITON_ATTN_BEST, name_prefix="cutlass_")),
    "triton-attn-fp8": ("Triton attention fp8 D128 N4096", lambda: triton_attn_spec(True),
                        dict(TRITON_ATTN_BEST, name_prefix=""),
                        dict(TRITON_ATTN_BEST, name_prefix="cutlass_")),
    "triton-mm": ("Triton matmul 2048^3", lambda: controls.triton_mm_spec(2048),
                  dict(BLOCK=128, maxnreg=255, num_warps=4, name_prefix=""),
                  dict(BLOCK=128, maxnreg=255, num_warps=4, name_prefix="cutlass_")),
    **{f"gemm-maxrreg{r}": (f"WGMMA GEMM 8192^3 bf16, -maxrregcount={r}",
                            lambda: gemm_spec(flags=True),
                            dict(GEMM_BEST, name_prefix="", nvcc_flags=()),
                            dict(GEMM_BEST, name_prefix="", nvcc_flags=(f"-maxrregcount={r}",)))
       for r in MAXRREG},
}


def main() -> int:
    from jupyter_ktune.runner.client import DeviceWorker
    from jupyter_ktune.tuning.compare import compare_configs

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--only", nargs="+", choices=list(CASES), default=list(CASES))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    import cloudpickle  # the worker cannot import bench/ scripts: their functions go by value

    for module in (attn, controls, gemm, tattn):
        cloudpickle.register_pickle_by_value(module)
    rows = []
    with DeviceWorker() as worker:
        for key in args.only:
            title, make, a, b = CASES[key]
            t0 = time.perf_counter()
            try:
                spec = make()
                c = compare_configs(spec, worker, a, b, rounds=args.rounds)
                row = {"case": key, "title": title, **c.to_dict(), "text": c.text()}
            except Exception as exc:  # noqa: BLE001 - one case's failure is its row
                row = {"case": key, "title": title, "ratio": None, "ci": None,
                       "reason": f"{type(exc).__name__}: {exc}"[:500], "text": "error"}
            row["wall_s"] = round(time.perf_counter() - t0, 1)
            rows.append(row)
            short = {k: row.get(k) for k in ("case", "ratio", "ci", "verdict", "static_diff",
                                              "static_note", "reason", "wall_s")}
            print(json.dumps(short, default=str), flush=True)
            if args.out is not None:
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / "name_prefix.json").write_text(json.dumps(rows, indent=1,
                                                                       default=str))
    print(f"\n{'case':<17} {'B/A (B: cutlass_ or the register cap)':<38} verdict")
    for r in rows:
        ci = r.get("ci")
        ratio = (f"{r['ratio']:.4f} [{ci[0]:.4f}, {ci[1]:.4f}]" if r.get("ratio") and ci
                 else (r.get("reason") or "")[:60])
        print(f"{r['case']:<17} {ratio:<38} {r.get('verdict', '')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
