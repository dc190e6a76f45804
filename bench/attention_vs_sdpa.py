"""Attention on the H200: the Triton FlashAttention forward of examples/attention.ipynb against
torch
SDPA (cuDNN and flash backends, same process), plus the kernel-name experiment.

Run on the H200 from the repository root::

    python bench/attention_vs_sdpa.py [--quick] [--json attention_vs_sdpa.json]
    python bench/attention_vs_sdpa.py --check      # CPU: parse the notebook's cells, no timing

The sweep: Z=4, H=32, D in (64, 128), causal and not, N_CTX = 512 ... 16384. The Triton
kernels (fp16 non-persistent and persistent, and the fp8 e4m3 cell) are timed by the device
worker (``DeviceWorker.run`` on a spec parsed from the notebook's cell: verified, L2 flushed by a
read, CUDA events, median with a 95% CI). SDPA is timed in the same worker with
``torch.nn.attention.sdpa_kernel`` forcing
``CUDNN_ATTENTION`` and then ``FLASH_ATTENTION`` (CUDA events, same read-flush of L2, median).

The kernel-name experiment compiles the same non-persistent kernel twice, as ``attn_fwd`` and as
``cutlass_attn_fwd`` (only the name differs), times them interleaved (A, B, A, B, ...), and
reports the ratio of medians (cutlass / plain) with a bootstrap 95% CI, and whether the two PTX
listings differ beyond the name. Whatever it shows is the result.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import sys
from pathlib import Path

import nbformat
import numpy as np

if importlib.util.find_spec("jupyter_ktune") is None:  # a checkout, nothing installed: use it
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jupyter_ktune.api import parse_cell  # noqa: E402
from jupyter_ktune.tuning.report import ratio_ci  # noqa: E402

NB = Path(__file__).resolve().parent.parent / "examples" / "attention.ipynb"
Z, H = 4, 32
CONTEXTS = [512, 1024, 2048, 4096, 8192, 16384]
# A reasonable H200 starting point per head dim (tune in the notebook's panel to improve).
CONFIGS = {64: dict(BLOCK_M=128, BLOCK_N=64, HEAD_DIM=64, num_warps=4, num_stages=3),
           128: dict(BLOCK_M=128, BLOCK_N=64, HEAD_DIM=128, num_warps=8, num_stages=3)}


def inputs(Z=Z, H=H, N_CTX=1024, D=64, causal=0, dtype=np.float16):
    rng = np.random.default_rng()
    q, k, v = (rng.standard_normal((Z, H, N_CTX, D), dtype=np.float32).astype(dtype)
               for _ in range(3))
    return dict(q=q, k=k, v=v, o=np.empty((Z, H, N_CTX, D), dtype=np.float16),
                sm_scale=float(1 / np.sqrt(D)), Z=Z, H=H, N_CTX=N_CTX, D=D, causal=causal)


def inputs_fp8(**kw):
    import ml_dtypes

    return inputs(dtype=ml_dtypes.float8_e4m3fn, **kw)


def reference(q, k, v, o, sm_scale, Z, H, N_CTX, D, causal, **_):
    """float32 softmax(Q K^T * scale (+ causal)) V: torch SDPA in float32 on the GPU (an
    implementation independent of the Triton kernels), else NumPy one head at a time."""
    try:
        import torch
        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    if gpu:
        out = np.empty(q.shape, dtype=np.float32)
        for z in range(Z):  # one batch item at a time bounds the float32 copies
            qt, kt, vt = (torch.from_numpy(np.asarray(x[z], dtype=np.float32)).cuda()
                          for x in (q, k, v))
            out[z] = torch.nn.functional.scaled_dot_product_attention(
                qt, kt, vt, is_causal=bool(causal), scale=sm_scale).cpu().numpy()
        return out
    out = np.empty(q.shape, dtype=np.float32)
    mask = np.tril(np.ones((N_CTX, N_CTX), dtype=bool)) if causal else None
    for z in range(Z):
        for h in range(H):
            s = q[z, h].astype(np.float32) @ k[z, h].astype(np.float32).T * sm_scale
            if mask is not None:
                s = np.where(mask, s, -np.inf)
            p = np.exp(s - s.max(-1, keepdims=True))
            out[z, h] = (p / p.sum(-1, keepdims=True)) @ v[z, h].astype(np.float32)
    return out


def kernel_cells() -> dict[str, tuple[str, str]]:
    """The notebook's %%kernel cells: (magic line, body) by kernel name; the fp8 cell (same
    kernel, fp8 inputs) as ``attn_fwd_fp8``."""
    nb = nbformat.read(NB, as_version=4)
    cells = {}
    for c in nb.cells:
        if c.cell_type == "code" and c.source.startswith("%%kernel"):
            line, body = c.source.split("\n", 1)
            line = line.removeprefix("%%kernel").split(" --config")[0]
            key = line.split()[0] + ("_fp8" if "inputs_fp8" in line else "")
            cells[key] = (line, body)
    return cells


def renamed(line: str, body: str, new: str) -> tuple[str, str]:
    old = line.split()[0]
    return line.replace(old, new, 1), body.replace(f"def {old}(", f"def {new}(", 1)


def specs(n_ctx: int = 1024, d: int = 64, causal: int = 0) -> dict:
    ns = {"inputs": functools.partial(inputs, N_CTX=n_ctx, D=d, causal=causal),
          "inputs_fp8": functools.partial(inputs_fp8, N_CTX=n_ctx, D=d, causal=causal),
          "reference": reference}
    out = {}
    cells = kernel_cells()
    cells["cutlass_attn_fwd"] = renamed(*cells["attn_fwd"], "cutlass_attn_fwd")
    for name, (line, body) in cells.items():
        out[name] = parse_cell(line + " --budget-ms 300 --timeout 600", body, ns)
    return out


# -- run inside the worker ---------------------------------------------------------------------
def _events_median(fn, reps: int = 30) -> tuple[float, list[float]]:
    import torch

    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    times = []
    for _ in range(3):
        fn()
    for _ in range(reps):
        flush.sum()  # a read evicts L2 without leaving dirty lines
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return float(np.median(times)), times


def sdpa_ms(n_ctx: int, d: int, causal: int, backend: str) -> dict:
    """Median ms of torch SDPA forced to one backend; or the reason it cannot run."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    q, k, v = (torch.randn(Z, H, n_ctx, d, device="cuda", dtype=torch.float16) for _ in range(3))
    try:
        with sdpa_kernel([getattr(SDPBackend, backend)]):
            ms, _ = _events_median(lambda: sdpa(q, k, v, is_causal=bool(causal)))
    except RuntimeError as exc:
        return {"ms": None, "reason": str(exc)[:200]}
    return {"ms": ms}


def name_experiment(body_a: str, body_b: str, cfg: dict, n_ctx: int, d: int, causal: int,
                    rounds: int = 200) -> dict:
    """Interleaved timing of two copies of one kernel that differ only in their names."""
    import torch
    import triton

    from jupyter_ktune.backends.triton.module import load_module

    ka = load_module(body_a, "attn_fwd").attn_fwd
    kb = load_module(body_b, "cutlass_attn_fwd").cutlass_attn_fwd
    q, k, v = (torch.randn(Z, H, n_ctx, d, device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    grid = (triton.cdiv(n_ctx, cfg["BLOCK_M"]) * Z * H,)
    args = (q, k, v, o, 1 / d ** 0.5, Z, H, n_ctx, d, causal)
    ca = ka[grid](*args, **cfg)
    cb = kb[grid](*args, **cfg)
    ta, tb = [], []
    for i in range(rounds):
        first, second = ((ka, ta), (kb, tb)) if i % 2 == 0 else ((kb, tb), (ka, ta))
        for kern, sink in (first, second):
            sink.append(_events_median(lambda kern=kern: kern[grid](*args, **cfg), reps=1)[0])
    def code(ptx: str, name: str) -> str:  # the PTX without its debug file paths and comments
        return "\n".join(line for line in ptx.replace(name, "K").splitlines()
                         if not line.lstrip().startswith((".file", "//")))

    ptx_a = code(ca.asm.get("ptx", ""), "attn_fwd")
    ptx_b = code(cb.asm.get("ptx", ""), "cutlass_attn_fwd")
    return {"plain_ms": ta, "cutlass_ms": tb, "ptx_differs": ptx_a != ptx_b,
            "n_regs": [getattr(ca, "n_regs", None), getattr(cb, "n_regs", None)]}


def check() -> int:
    from jupyter_ktune.backends.triton.cell import check_cell

    for name, spec in specs().items():
        sig = check_cell(spec)
        print(f"{name}: parsed, tunables {', '.join(spec.space.names)}; runtime args "
              f"{', '.join(sig.runtime)}")
    ratio, a, b = ratio_ci([1.0, 1.1, 0.9] * 10, [1.0, 1.05, 0.95] * 10)
    print(f"bootstrap self-test: ratio {ratio:.3f} CI [{a:.3f}, {b:.3f}]")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="parse the cells only (CPU)")
    ap.add_argument("--quick", action="store_true", help="N_CTX 1024 and 4096 only")
    ap.add_argument("--contexts", type=int, nargs="*", help="N_CTX values (default: all)")
    ap.add_argument("--dims", type=int, nargs="*", default=[64, 128], help="head dims D")
    ap.add_argument("--causal", type=int, nargs="*", default=[0, 1], help="causal values")
    ap.add_argument("--no-names", action="store_true", help="skip the kernel-name experiment")
    ap.add_argument("--json", default="attention_vs_sdpa.json")
    args = ap.parse_args()
    if args.check:
        return check()

    from jupyter_ktune.api import run_kernel
    from jupyter_ktune.runner.client import DeviceWorker

    contexts = args.contexts or ([1024, 4096] if args.quick else CONTEXTS)
    rows, names = [], None
    with DeviceWorker() as w:
        for d in args.dims:
            for causal in args.causal:
                for n in contexts:
                    sp = specs(n, d, causal)
                    cfg = CONFIGS[d]
                    row = {"D": d, "causal": causal, "N_CTX": n}
                    for name, extra in (("attn_fwd", {}),
                                        ("attn_fwd_persistent", {"NUM_PROGS": 132}),
                                        ("attn_fwd_fp8", {})):
                        r = run_kernel(sp[name], {**cfg, **extra}, worker=w)
                        t = r.measurement.timing if r.measurement else None
                        row[name] = {"status": r.status.value, "reason": r.reason[:200],
                                     "ms": t.median_ms if t else None}
                    for backend in ("CUDNN_ATTENTION", "FLASH_ATTENTION"):
                        row[backend] = w.call(sdpa_ms, n, d, causal, backend, timeout=600)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    Path(args.json).write_text(json.dumps({"rows": rows}, indent=1, default=str))
        if not args.no_names:
            cells = kernel_cells()
            body_a = cells["attn_fwd"][1]
            body_b = renamed(*cells["attn_fwd"], "cutlass_attn_fwd")[1]
            names = w.call(name_experiment, body_a, body_b, CONFIGS[128], 8192, 128, 0,
                           timeout=600)
            ratio, lo, hi = ratio_ci(names["plain_ms"], names["cutlass_ms"])
            names["ratio"], names["ci95"] = ratio, (lo, hi)
        device = w.device("triton").name

    flops = lambda r: 4 * Z * H * r["N_CTX"] ** 2 * r["D"] / (2 if r["causal"] else 1)  # noqa: E731
    print(f"\ndevice: {device}; fp16, Z={Z}, H={H}; TFLOP/s (ms)")
    cols = ("attn_fwd", "attn_fwd_persistent", "attn_fwd_fp8", "CUDNN_ATTENTION",
            "FLASH_ATTENTION")
    print(f"{'D':>4} {'causal':>6} {'N_CTX':>6} " + " ".join(f"{c:>24}" for c in cols))
    for r in rows:
        cells_txt = []
        for c in cols:
            ms = r[c].get("ms")
            why = (r[c].get("reason") or r[c].get("status", ""))[:18]
            cells_txt.append(f"{flops(r) / ms / 1e9:10.1f} ({ms:8.3f} ms)" if ms
                             else f"{'n/a: ' + why:>24}")
        print(f"{r['D']:>4} {r['causal']:>6} {r['N_CTX']:>6} "
              + " ".join(f"{t:>24}" for t in cells_txt))
    if names is None:
        Path(args.json).write_text(json.dumps({"device": device, "rows": rows}, indent=1))
        return 0
    lo, hi = names["ci95"]
    print(f"\nkernel-name experiment (D=128, N_CTX=8192, non-causal, {len(names['plain_ms'])} "
          f"interleaved launches each): median attn_fwd {np.median(names['plain_ms']):.4f} ms, "
          f"cutlass_attn_fwd {np.median(names['cutlass_ms']):.4f} ms, ratio {names['ratio']:.4f} "
          f"(95% CI {lo:.4f}..{hi:.4f}); "
          + ("indistinguishable" if lo <= 1 <= hi else "different")
          + f"; PTX differs beyond the name: {names['ptx_differs']}; regs {names['n_regs']}")
    Path(args.json).write_text(json.dumps({"device": device, "rows": rows, "names": names},
                                          indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
