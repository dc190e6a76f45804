"""Cycle breakdown on a GPU: overhead, trace size, run-to-drawn latency; records the fixtures.

Usage (on the H200, from the project root)::

    python bench/breakdown_overhead.py OUT_DIR [--quick]

Parts, each independent (a failure is printed and the next part runs):

1. CUDA C++: the tiled fp32 GEMM of tests/fixtures/breakdown/gemm_scoped.cu (scopes load, mma,
   store) at 2048^3, timed plain and instrumented (KT_PROFILE, sampled blocks and warps) with the
   project's timing protocol; trace bytes; seconds from the profile request to the Bokeh views
   drawn (document serialised). Writes a KT_SCOPE buffer subset (kt_scope_gemm.npz).
2. Triton: the GEMM of examples/matmul_triton.ipynb with Proton scopes, plain vs instrumented
   (CUDA events per launch, median), trace size, parse time. Writes proton_gemm.chrome_trace
   (a subset of CTAs).
3. Pallas on Mosaic GPU: a small plgpu.kernel with named scopes, profile_space/profile_dir in a
   fresh directory. Writes mosaic_trace.json.
4. ncu: the CUDA GEMM at 256^3 under ncu (SourceCounters, WarpStateStats, --clock-control none).
   Writes gemm_small.ncu-rep and the per-line result.

Prints one JSON summary at the end (copied into bench/results/breakdown_overhead/).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FIX = ROOT / "tests" / "fixtures" / "breakdown"
SUMMARY: dict[str, object] = {}


def part(fn):
    def run(*a, **k):
        t0 = time.perf_counter()
        try:
            fn(*a, **k)
        except Exception:  # noqa: BLE001 - report and go on to the next part
            traceback.print_exc()
            SUMMARY[fn.__name__ + "_error"] = traceback.format_exc()[-800:]
        print(f"[{fn.__name__}] {time.perf_counter() - t0:.1f} s", flush=True)
    run.__name__ = fn.__name__
    return run


def cuda_spec(size: int, bk: int = 32):
    from jupyter_ktune.api import parse_cell

    def inputs(M=size, N=size, K=size):
        a = np.random.rand(M, K).astype(np.float32)
        b = np.random.rand(K, N).astype(np.float32)
        return dict(a=a, b=b, c=np.empty((M, N), np.float32), M=M, N=N, K=K)

    def reference(a, b, c, M, N, K):
        return a @ b

    text = (FIX / "gemm_scoped.cu").read_text()
    first, body = text.split("\n", 1)
    line = (first.split("%%kernel", 1)[1].strip()
            + f" --config BM=64 --config BN=64 --config BK={bk}")
    return parse_cell(line, body, {"inputs": inputs, "reference": reference})


def draw_seconds(bd) -> float:
    from bokeh.embed import json_item

    from jupyter_ktune.ui.breakdown import BreakdownViews

    t0 = time.perf_counter()
    v = BreakdownViews()
    v.show(bd)
    json.dumps(json_item(v.layout))
    return time.perf_counter() - t0


@part
def cuda_part(out: Path, quick: bool) -> None:
    import cupy

    from jupyter_ktune.backends import get_backend
    from jupyter_ktune.backends.cuda.profile import (
        ScopeSampling,
        instrumented_variant,
        profile_cuda,
    )
    from jupyter_ktune.measure.timing import TimingPlan, time_kernel

    size = 2048
    spec = cuda_spec(size)
    config = spec.space.config({"BM": 64, "BN": 64, "BK": 32})
    backend = get_backend("cuda")
    args = spec.inputs()
    plain = backend.compile(spec, config).bind(args)
    timer = backend.timer()
    plan = TimingPlan(budget_ms=300 if not quick else 100)
    res = {}
    # end to end: request -> breakdown -> drawn (twice: the first includes NVRTC)
    for i in range(2):
        t0 = time.perf_counter()
        bd, words, sampling = profile_cuda(backend, spec, config, args)
        res[f"profile_s_{i}"] = time.perf_counter() - t0
        res[f"run_to_drawn_s_{i}"] = res[f"profile_s_{i}"] + draw_seconds(bd)
    res["parse_ms"] = bd.parse_ms
    res["trace_bytes"] = int(words.nbytes)
    res["events"] = len(bd)
    res["sampling"] = sampling.describe()
    res["clock"] = f"{bd.sm_clock_mhz} MHz ({bd.clock_source})"
    res["notes"] = list(bd.notes)
    res["scopes"] = bd.scope_table()
    ov = bd.overlap()
    res["overlap"] = {k: ov[k] for k in ("overlap", "memory_only", "compute_only", "idle")}
    # the fixture: the first 8 traced blocks' slots
    keep = 8 * sampling.warps * sampling.slot_words
    np.savez_compressed(out / "kt_scope_gemm.npz", words=words[:keep],
                        sampling=np.array([sampling.block_stride, 8, sampling.warp_stride,
                                           sampling.warps, sampling.events]),
                        sm_mhz=np.array(bd.sm_clock_mhz))
    # overhead: plain vs instrumented with several samplings, interleaved twice
    variants = {"plain": plain}
    for label, blocks, warps in (("sampled_64blk_4warps", 64, 4), ("sampled_16blk_1warp", 16, 1),
                                 ("all_blocks_all_warps", 10**6, 8)):
        grid_blocks = int(np.prod(plain.grid))
        s = ScopeSampling.for_launch(grid_blocks, 8, blocks, warps, 256)
        var, module = instrumented_variant(spec, config, s, backend.device().limits)
        b = var.bind(args)
        buf = cupy.zeros(s.buffer_words, dtype=cupy.uint32)
        cupy.ndarray((1,), cupy.uint64, module.get_global("kt_profile_out")).fill(buf.data.ptr)
        variants[label] = b
        res[f"{label}_buffer_bytes"] = s.buffer_words * 4
        res[f"{label}_keep"] = buf  # keep alive
    times = {k: [] for k in variants}
    for _ in range(2):
        for k, b in variants.items():
            times[k].append(time_kernel(b.launch, timer, plan).median_ms)
    res.pop("sampled_64blk_4warps_keep"), res.pop("sampled_16blk_1warp_keep")
    res.pop("all_blocks_all_warps_keep")
    base = float(np.median(times["plain"]))
    res["median_us"] = {k: float(np.median(v)) * 1e3 for k, v in times.items()}
    res["overhead_pct"] = {k: (float(np.median(v)) / base - 1) * 100 for k, v in times.items()}
    SUMMARY["cuda_gemm_2048"] = res


TRITON_CELL = '''
import triton.profiler.language as pl

@triton.jit
def matmul(a, b, c, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
           BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_m, num_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pm = first_m + (pid % group) % size_m
    pn = (pid % group) // size_m
    rm = pm * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a + rm[:, None] * K + rk[None, :]
    b_ptrs = b + rk[:, None] * N + rn[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    pl.enter_scope("mma_loop")
    for k in range(0, K, BLOCK_K):
        x = tl.load(a_ptrs, mask=(rm[:, None] < M) & (k + rk[None, :] < K), other=0.0)
        y = tl.load(b_ptrs, mask=(k + rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(x, y)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * N
    pl.exit_scope("mma_loop")
    pl.enter_scope("store")
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16), mask=mask)
    pl.exit_scope("store")
'''


def triton_spec(size: int):
    """TRITON_CELL, the bf16 GEMM with Proton scopes, at ``size``³: one config, unverified."""
    from jupyter_ktune.api import parse_cell

    def inputs(M=size, N=size, K=size):
        import ml_dtypes

        a = np.random.randn(M, K).astype(ml_dtypes.bfloat16)
        b = np.random.randn(K, N).astype(ml_dtypes.bfloat16)
        return dict(a=a, b=b, c=np.empty((M, N), dtype=ml_dtypes.bfloat16), M=M, N=N, K=K)

    line = ("matmul --backend triton --inputs inputs --out c --no-verify --config BLOCK_M=128 "
            "--config BLOCK_N=128 --config BLOCK_K=64 --config GROUP_M=8 --config num_warps=8 "
            "--config num_stages=3")
    cell = ("# ktune: BLOCK_M in [128]; BLOCK_N in [128]; BLOCK_K in [64]; GROUP_M in [8]\n"
            "# ktune: num_warps in [8]; num_stages in [3]\n"
            "# ktune: grid = cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)\n" + TRITON_CELL)
    return parse_cell(line, cell, {"inputs": inputs})


@part
def triton_part(out: Path, quick: bool) -> None:
    import torch
    import triton.profiler as proton
    import triton.profiler.language as pl

    from jupyter_ktune.backends import get_backend
    from jupyter_ktune.backends.triton.profile import MODE, parse_proton_trace
    from jupyter_ktune.measure.clocks import read_clocks

    spec = triton_spec(4096)
    config = spec.space.config({})
    bound = get_backend("triton").compile(spec, config).bind(spec.inputs())

    def event_times(n: int) -> list[float]:
        ts = []
        for _ in range(n):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            bound.launch()
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e))
        return ts

    def cupti_times(n: int) -> list[float]:
        """Kernel durations (ms) from CUPTI via torch.profiler: no host time inside."""
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                bound.launch()
            torch.cuda.synchronize()
        out = []
        for e in prof.events():
            if "matmul" in e.name and str(getattr(e, "device_type", "")).endswith("CUDA"):
                out.append((getattr(e, "device_time", None) or e.cuda_time) / 1e3)
        return out

    res = {}
    for _ in range(3):
        bound.launch()
    torch.cuda.synchronize()
    plain1 = event_times(30)
    try:
        res["cupti_plain_ms"] = cupti_times(20)
    except Exception:  # noqa: BLE001
        res["cupti_plain_error"] = traceback.format_exc()[-500:]
    folder = out / "proton_tmp"
    folder.mkdir(exist_ok=True)
    pl.enable_semantic("triton")
    mode = proton.mode.Default(**MODE, buffer_size=4096)
    proton.start(str(folder / "gemm"), data="trace", backend="instrumentation", mode=mode)
    t0 = time.perf_counter()
    bound.launch()
    torch.cuda.synchronize()
    res["first_instrumented_launch_s"] = time.perf_counter() - t0
    inst = event_times(10 if quick else 20)
    try:
        res["cupti_instrumented_ms"] = cupti_times(10)
    except Exception:  # noqa: BLE001
        res["cupti_instrumented_error"] = traceback.format_exc()[-500:]
    t0 = time.perf_counter()
    proton.finalize()
    res["finalize_s"] = time.perf_counter() - t0
    pl.disable_semantic("triton")
    plain2 = event_times(30)
    base = float(np.median(plain1 + plain2))
    res["median_us"] = {"plain": base * 1e3, "instrumented": float(np.median(inst)) * 1e3}
    res["overhead_pct_events"] = (float(np.median(inst)) / base - 1) * 100
    if res.get("cupti_plain_ms") and res.get("cupti_instrumented_ms"):
        cp, ci = np.median(res["cupti_plain_ms"]), np.median(res["cupti_instrumented_ms"])
        res["overhead_pct_cupti"] = float(ci / cp - 1) * 100
    files = sorted(folder.glob("*.chrome_trace"))
    res["trace_files"] = [f.name for f in files]
    if files:
        size_b = files[0].stat().st_size
        res["trace_bytes_total"] = size_b
        launches = 1 + len(inst) + len(res.get("cupti_instrumented_ms", []))
        res["trace_bytes_per_launch"] = size_b / launches
        clk = read_clocks()
        t0 = time.perf_counter()
        data = json.loads(files[0].read_text())
        bd = parse_proton_trace(data, float(clk.sm_mhz) if clk else 1980.0, "matmul")
        res["parse_s_all_launches"] = time.perf_counter() - t0
        res["events_all_launches"] = len(bd)
        res["scopes"] = bd.scope_table()
        # fixture: the first 40 complete events + any metadata events
        ev = data.get("traceEvents", [])
        sub = ([e for e in ev if e.get("ph") != "X"][:20]
               + [e for e in ev if e.get("ph") == "X"][:60])
        (out / "proton_gemm.chrome_trace").write_text(json.dumps(
            {k: v for k, v in data.items() if k != "traceEvents"} | {"traceEvents": sub}))
        res["raw_head"] = json.dumps(ev[:3])[:1500]
    shutil.rmtree(folder, ignore_errors=True)
    SUMMARY["triton_gemm_4096"] = res


@part
def mosaic_part(out: Path, quick: bool) -> None:
    import tempfile

    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import mosaic_gpu as plgpu

    from jupyter_ktune.backends.pallas.profile import newest_trace, parse_mosaic_trace
    from jupyter_ktune.measure.clocks import read_clocks

    def body(x_ref, o_ref):
        with jax.named_scope("load"):
            x = x_ref[...]
        with jax.named_scope("compute"):
            o = x * 2.0 + 1.0
        with jax.named_scope("store"):
            o_ref[...] = o

    res = {}
    x = jnp.ones((128,), jnp.float32)
    for label in ("plain", "profiled"):
        d = tempfile.mkdtemp(prefix="ktune-mosaic-")
        params = plgpu.CompilerParams(profile_space=16, profile_dir=d) if label == "profiled" \
            else plgpu.CompilerParams()
        f = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((128,), jnp.float32), grid=(132,),
                         grid_names=("g",), compiler_params=params)
        y = f(x)
        jax.block_until_ready(y)
        jax.effects_barrier()
        if label == "profiled":
            path = newest_trace(d)
            shutil.copy(path, out / "mosaic_trace.json")
            clk = read_clocks()
            bd = parse_mosaic_trace(path, float(clk.sm_mhz) if clk else 1980.0)
            res["trace_bytes"] = path.stat().st_size
            res["events"] = len(bd)
            res["scopes"] = bd.scope_table()
    SUMMARY["mosaic_small"] = res
    del pl


@part
def ncu_part(out: Path, quick: bool) -> None:
    import subprocess

    import cloudpickle

    from jupyter_ktune.measure.profile_ncu import (
        cell_file_filter,
        find_ncu,
        ncu_command,
        read_report,
    )

    spec = cuda_spec(256, bk=16)
    config = spec.space.config({"BM": 64, "BN": 64, "BK": 16})
    job = out / "job.pkl"
    job.write_bytes(cloudpickle.dumps((spec, dict(config))))
    rep = out / "gemm_small"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    cmd = ncu_command(find_ncu() or "ncu", str(rep), "gemm",
                      [sys.executable, "-m", "jupyter_ktune.runner.profile", str(job)])
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=90, env=env)
    res = {"ncu_s": time.perf_counter() - t0, "rc": p.returncode,
           "ncu_tail": (p.stdout + p.stderr)[-1500:], "cmd": " ".join(cmd)}
    job.unlink()
    path = Path(str(rep) + ".ncu-rep")
    if path.exists():
        res["report_bytes"] = path.stat().st_size
        try:
            bd = read_report(path, "gemm", cell_file_filter("cell"))
            res["lines"] = {str(k): v for k, v in bd.lines.items()}
            res["kernel_ns"] = bd.kernel_ns
        except Exception:  # noqa: BLE001
            res["read_error"] = traceback.format_exc()[-800:]
    SUMMARY["ncu_gemm_256"] = res


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    quick = "--quick" in sys.argv
    only = [a for a in sys.argv[2:] if not a.startswith("--")]
    for fn in (cuda_part, ncu_part, triton_part, mosaic_part):
        if only and not any(o in fn.__name__ for o in only):
            continue
        fn(out, quick)
    text = json.dumps(SUMMARY, indent=1, default=str)
    (out / "summary.json").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
