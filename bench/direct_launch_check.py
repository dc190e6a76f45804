"""Check, on a GPU, that :mod:`jupyter_ktune.backends.triton.direct_launch` launches the same
kernel as Triton's own launcher: bitwise the same outputs, the same device time, and what it
saves (Triton 3.6's launcher build) and costs (the host's enqueue), kernel by kernel.

For each kernel, in one process with a fresh Triton cache:
1. compile it (``jit.warmup``), give it a DirectLauncher (``install``; the reason if refused),
   launch through the JIT as a user does, and keep the outputs;
2. give it back to Triton (``reinstate``), launch again (this builds Triton's launcher: its
   seconds are printed), compare the outputs bit for bit;
3. time both ways, interleaved in blocks: device time per launch from CUDA events around 50
   back-to-back launches (median of 15 blocks), and host time per launch call.

The kernels: a scalar-argument kernel written here (fp32, i1, i32, an int equal to 1 that
Triton turns into a constexpr, an i64 over 2^31), a bf16 matmul with 160 KiB of dynamic shared
memory (the cuFuncSetAttribute path), and a row softmax.

    python3 bench/direct_launch_check.py            # H200; prints a table last
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="ktune-direct-")

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from jupyter_ktune.backends.triton import direct_launch as dl  # noqa: E402


@triton.jit
def scalars(x, y, n, a, flag, one, big, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x + offs, mask=m) * a + flag.to(tl.float32) + one + (big % 7).to(tl.float32)
    tl.store(y + offs, v, mask=m)


@triton.jit
def matmul(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * sam + (k + rk)[None, :] * sak)
        w = tl.load(b + (k + rk)[:, None] * sbk + rn[None, :] * sbn)
        acc = tl.dot(x, w, acc)
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.bfloat16))


@triton.jit
def softmax(x, y, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    v = tl.load(x + row * stride + cols, mask=cols < n_cols, other=-float("inf"))
    e = tl.exp(v - tl.max(v, 0))
    tl.store(y + row * stride + cols, e / tl.sum(e, 0), mask=cols < n_cols)


def cases():
    dev = "cuda"
    n = 1 << 20
    x = torch.randn(n, device=dev)
    yield ("scalars fp32/i1/i32/=1/i64", scalars, (triton.cdiv(n, 1024),), dict(
        x=x, y=torch.empty_like(x), n=n, a=1.5, flag=True, one=1, big=(1 << 33) + 5,
        BLOCK=1024), "y")
    m = 4096
    a = torch.randn(m, m, device=dev, dtype=torch.bfloat16)
    b = torch.randn(m, m, device=dev, dtype=torch.bfloat16)
    c = torch.empty(m, m, device=dev, dtype=torch.bfloat16)
    yield ("bf16 matmul 4096^3, 128x256x64 s3", matmul, (m // 128, m // 256), dict(
        a=a, b=b, c=c, M=m, N=m, K=m, sam=m, sak=1, sbk=m, sbn=1, scm=m, scn=1,
        BM=128, BN=256, BK=64, num_warps=8, num_stages=3), "c")
    r = torch.randn(4096, 1000, device=dev)
    yield ("softmax 4096x1000", softmax, (4096,), dict(
        x=r, y=torch.empty_like(r), stride=1000, n_cols=1000, BLOCK=1024), "y")


def device_us(launch, reps=50, blocks=15):
    times = []
    for _ in range(blocks):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(reps):
            launch()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3 / reps)
    return statistics.median(times)


def host_us(launch, reps=200):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        launch()
    t = (time.perf_counter() - t0) * 1e6 / reps
    torch.cuda.synchronize()
    return t


def main() -> int:
    print(f"triton {triton.__version__}, torch {torch.__version__}, "
          f"per-signature launcher: {dl.per_signature_launcher()}")
    rows, failures = [], 0
    for name, fn, grid, kw, out in cases():
        t0 = time.perf_counter()
        kernel = fn.warmup(grid=grid, **kw)
        compile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        why = dl.install(kernel)
        install_ms = (time.perf_counter() - t0) * 1e3
        if why is not None:
            print(f"{name}: not installed: {why}")
            failures += 1
            continue
        launch = lambda: fn[grid](**kw)  # noqa: E731
        kw[out].zero_()
        launch()
        torch.cuda.synchronize()
        direct_out = kw[out].clone()
        d_dev = device_us(launch)
        d_host = host_us(launch)
        dl.reinstate(kernel)
        kw[out].zero_()
        t0 = time.perf_counter()
        launch()  # Triton's own path: builds its launcher now
        torch.cuda.synchronize()
        build_s = time.perf_counter() - t0
        same = torch.equal(direct_out.view(torch.uint8), kw[out].view(torch.uint8))
        t_dev = device_us(launch)
        t_host = host_us(launch)
        # interleave once more, direct after Triton, for drift
        kernel2 = fn.warmup(grid=grid, **kw)
        kernel2._run, kernel2.module, kernel2.function = None, None, None
        dl.install(kernel2)
        d_dev2 = device_us(launch)
        failures += not same
        rows.append((name, compile_s, install_ms, build_s, same, d_dev, t_dev, d_dev2,
                     d_host, t_host))
        print(f"{name}: outputs bitwise equal: {same}; regs {kernel.n_regs}, "
              f"shared {kernel.metadata.shared} B")
    print()
    print(f"{'kernel':36} {'compile s':>9} {'install ms':>10} {'triton first launch s':>21} "
          f"{'same':>5} {'dev us direct':>13} {'dev us triton':>13} {'direct again':>12} "
          f"{'host us direct':>14} {'host us triton':>14}")
    for r in rows:
        print(f"{r[0]:36} {r[1]:9.3f} {r[2]:10.2f} {r[3]:21.3f} {str(r[4]):>5} {r[5]:13.2f} "
              f"{r[6]:13.2f} {r[7]:12.2f} {r[8]:14.2f} {r[9]:14.2f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
