"""Triton bf16 GEMM configs of ``examples/gemm.ipynb`` against cuBLAS (``torch.matmul``) on the H200.

Run from the repository root on the GPU machine: ``python bench/gemm_vs_cublas.py [SIZE]``
(default 8192). ``--check`` only parses the notebook's Triton cells (works on CPU) and exits 0;
``--tma-more`` measures only the TMA cell, around its best config.

For every config of the three Triton cells (tiled, persistent, persistent with TMA) it runs the
variant through the device worker with ``run_kernel`` (verified on fresh inputs, timed by the
extension's protocol),
and, in the same worker, times the same compiled kernel and ``torch.matmul`` with
``triton.testing.do_bench(return_mode="median")``. The "% of cuBLAS" column compares do_bench
with do_bench (one protocol for both sides); the extension's own median is printed next to it.
Target from issue 8: the best Triton config at >= 95% of cuBLAS. Writes gemm_vs_cublas.json.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import cloudpickle
import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing (the worker too)
sys.path.insert(0, str(ROOT / "bench"))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
NB = ROOT / "examples" / "gemm.ipynb"
import sweep_vs_autotune  # noqa: E402
ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
SIZE = int(ARGS[0]) if ARGS else 8192
TILED = [dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3),
         dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=4),
         dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=4),
         dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=16, num_warps=8, num_stages=4)]
PERSISTENT = [dict(c, NUM_SMS=132) for c in TILED[:3]]
# the persistent TMA cell: the same tiles, and the 128x256 ones again with the epilogue stored
# in two half-width TMA tiles
# (128x256x64 with 4 stages and a whole C tile is over the shared memory: the cell's require
# line rules it out; it failed at launch in runs 3 and 5, before that line existed)
TMA = ([dict(c, NUM_SMS=132, EPILOGUE_SUBTILE=0, WARP_SPECIALIZE=0) for c in TILED[:3]]
       + [dict(TILED[i], NUM_SMS=132, EPILOGUE_SUBTILE=1, WARP_SPECIALIZE=0) for i in (0, 3)])
CONFIGS = {"matmul": TILED, "matmul_persistent": PERSISTENT, "matmul_tma": TMA}
# --tma-more: the TMA cell only, around its best config of run 3 (128x256x64, GROUP_M 8, 8 warps,
# 3 stages, EPILOGUE_SUBTILE 1): compiler warp specialization, BLOCK_K 128, GROUP_M 16, 4 stages
_BEST_TMA = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3,
                 NUM_SMS=132, EPILOGUE_SUBTILE=1, WARP_SPECIALIZE=0)
TMA_MORE = [_BEST_TMA, dict(_BEST_TMA, WARP_SPECIALIZE=1), dict(_BEST_TMA, num_stages=4),
            dict(_BEST_TMA, BLOCK_K=128, num_stages=2), dict(_BEST_TMA, GROUP_M=16),
            dict(_BEST_TMA, BLOCK_N=128, BLOCK_K=128, EPILOGUE_SUBTILE=0),
            dict(_BEST_TMA, BLOCK_N=128, EPILOGUE_SUBTILE=0, num_warps=4, num_stages=4,
                 WARP_SPECIALIZE=1),
            dict(_BEST_TMA, WARP_SPECIALIZE=1, num_stages=4)]
if "--tma-more" in sys.argv:
    CONFIGS = {"matmul_tma": TMA_MORE}


# the same fresh bf16 inputs and float32 reference (torch on the GPU) as the sweep benchmark;
# pickled by value, so the device worker needs no bench/ on its path
cloudpickle.register_pickle_by_value(sweep_vs_autotune)
inputs, reference = sweep_vs_autotune.make_io(SIZE)


def cells() -> dict[str, tuple[str, str]]:
    """name -> (magic line arguments, body) of the notebook's Triton %%kernel cells."""
    nb = nbformat.read(NB, as_version=4)
    out = {}
    for c in nb.cells:
        if c.cell_type == "code" and c.source.startswith("%%kernel") and "--backend triton" in c.source:
            line, body = c.source.split("\n", 1)
            args = line.removeprefix("%%kernel").split(" --config")[0]
            out[args.split()[0]] = (args, body)
    return out


def do_bench_triton(source: str, name: str, config: dict, size: int) -> float:
    """In the worker: the cell's kernel timed with do_bench (median ms)."""
    import torch
    import triton

    from jupyter_ktune.backends.triton.module import ensure_allocator, load_module

    ensure_allocator()  # the TMA cell builds tensor descriptors on the device
    kernel = getattr(load_module(source, name), name)
    a = torch.randn(size, size, device="cuda").to(torch.bfloat16)
    b = torch.randn(size, size, device="cuda").to(torch.bfloat16)
    c = torch.empty(size, size, device="cuda", dtype=torch.bfloat16)
    if "NUM_SMS" in config:
        grid = (min(config["NUM_SMS"], triton.cdiv(size, config["BLOCK_M"])
                    * triton.cdiv(size, config["BLOCK_N"])),)
    else:
        grid = (triton.cdiv(size, config["BLOCK_M"]) * triton.cdiv(size, config["BLOCK_N"]),)
    return float(triton.testing.do_bench(
        lambda: kernel[grid](a, b, c, size, size, size, **config), return_mode="median"))


def do_bench_cublas(size: int) -> dict:
    """In the worker: torch.matmul (cuBLAS) timed with do_bench, and checked once."""
    import torch
    import triton

    a = torch.randn(size, size, device="cuda").to(torch.bfloat16)
    b = torch.randn(size, size, device="cuda").to(torch.bfloat16)
    ms = float(triton.testing.do_bench(lambda: torch.matmul(a, b), return_mode="median"))
    return dict(ms=ms, device=torch.cuda.get_device_name(), torch=torch.__version__,
                triton=triton.__version__)


def tflops(ms: float) -> float:
    return 2 * SIZE ** 3 / (ms * 1e-3) / 1e12


def main() -> None:
    from jupyter_ktune.spec import parse_cell

    specs = {name: parse_cell(args + " --budget-ms 300", body,
                              {"inputs": inputs, "reference": reference})
             for name, (args, body) in cells().items() if name in CONFIGS}
    assert set(specs) == set(CONFIGS), sorted(specs)
    if "--check" in sys.argv:
        for name, spec in specs.items():
            for cfg in CONFIGS[name]:
                bad = spec.space.violations(cfg, {"SMEM_PER_BLOCK": 232448})  # sm_90
                assert not bad, (name, cfg, bad)
        print("ok:", ", ".join(sorted(specs)), "parsed;",
              sum(len(v) for v in CONFIGS.values()), "configs valid")
        return

    from jupyter_ktune.api import run_kernel
    from jupyter_ktune.runner.client import DeviceWorker

    rows = []
    with DeviceWorker() as w:
        cublas = w.call(do_bench_cublas, SIZE, timeout=600)
        print(f"measured torch.matmul: do_bench {cublas['ms']:.3f} ms", flush=True)
        for name, configs in CONFIGS.items():
            body = cells()[name][1]
            for cfg in configs:
                r = run_kernel(specs[name], cfg, worker=w)
                ext = r.measurement.timing.median_ms if r.measurement else float("nan")
                bench = (w.call(do_bench_triton, body, name, cfg, SIZE, timeout=600)
                         if r.status.value == "ok" else float("nan"))
                rows.append(dict(kernel=name, config=cfg, status=r.status.value,
                                 reason=r.reason[:200], ext_ms=ext, do_bench_ms=bench,
                                 tflops=tflops(bench), pct_cublas=100 * cublas["ms"] / bench))
                print(f"measured {name} {cfg}: {r.status.value}, ext {ext:.3f} ms, do_bench "
                      f"{bench:.3f} ms ({rows[-1]['pct_cublas']:.1f} % of cuBLAS)", flush=True)
        # cuBLAS again after the Triton configs: its time moved by 10 % between H200s (1.38 to
        # 1.54 ms), so the ratio uses the faster of the two, never the slower
        after = w.call(do_bench_cublas, SIZE, timeout=600)
        print(f"measured torch.matmul again: do_bench {after['ms']:.3f} ms", flush=True)
        cublas["samples_ms"] = [cublas["ms"], after["ms"]]
        cublas["ms"] = min(cublas["samples_ms"])
        for row in rows:
            row["pct_cublas"] = 100 * cublas["ms"] / row["do_bench_ms"]
    print(f"{SIZE}^3 bf16 on {cublas['device']} (torch {cublas['torch']}, triton {cublas['triton']})")
    print(f"{'kernel':18} {'config':64} {'status':8} {'ext ms':>8} {'bench ms':>8} {'TFLOP/s':>8} {'% cuBLAS':>8}")
    print(f"{'torch.matmul':18} {'cuBLAS, faster of ' + str(cublas['samples_ms']):64} {'ok':8} {'':>8} {cublas['ms']:8.3f} "
          f"{tflops(cublas['ms']):8.1f} {100.0:8.1f}")
    for row in rows:
        cfg = " ".join(f"{k}={v}" for k, v in row["config"].items())
        print(f"{row['kernel']:18} {cfg:64} {row['status']:8} {row['ext_ms']:8.3f} "
              f"{row['do_bench_ms']:8.3f} {row['tflops']:8.1f} {row['pct_cublas']:8.1f}")
    best = max((r for r in rows if r["pct_cublas"] == r["pct_cublas"]),
               key=lambda r: r["pct_cublas"], default=None)
    if best:
        print(f"best: {best['kernel']} {best['config']} at {best['pct_cublas']:.1f}% of cuBLAS "
              f"(target >= 95%: {'met' if best['pct_cublas'] >= 95 else 'NOT met'})")
    out = Path(os.environ.get("OUT", "."))
    name = "gemm_vs_cublas_tma_more.json" if "--tma-more" in sys.argv else "gemm_vs_cublas.json"
    (out / name).write_text(
        json.dumps(dict(size=SIZE, cublas=cublas, rows=rows), indent=1, default=str))


if __name__ == "__main__":
    main()
