"""Does the compile pool's warm compile produce the key the worker's launch looks up? (issue 21)

For each kernel (the bf16 matmul of bench/sweep_vs_autotune.py, and corpus entries by id), in
one process on the GPU: (1) the pool's compile (``warm_compile`` under the compile-only driver,
launch arguments as placeholders), then (2) the worker's launch (``TritonBound`` on real CUDA
tensors). Triton's ``_do_compile`` is wrapped to record what each side asked it to compile, so
a miss shows the field that differs; the cache folder's new files after (2) say whether the
on-disk entry was found.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=["matmul", "liger-dyt"])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--cpu", action="store_true", help="no GPU: the launch's lookup only")
    a = ap.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="ktune-jitkey-"))
    os.environ["TRITON_CACHE_DIR"] = str(cache)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    import corpus_vs_autotune as cva
    from triton.runtime.jit import JITFunction

    from jupyter_ktune.backends.triton import backend as tb
    from jupyter_ktune.backends.triton.cell import check_cell
    from jupyter_ktune.backends.triton.describe import module_source
    from jupyter_ktune.backends.triton.jit_warm import warm_compile
    from jupyter_ktune.backends.triton.launch import TritonVariant
    from jupyter_ktune.backends.triton.module import load_module

    calls: list[dict] = []
    original = JITFunction._do_compile

    def recording(self, key, signature, device, constexprs, options, attrs, warmup):
        calls.append({"key": str(key)[:400], "signature": str(signature),
                      "constexprs": str(constexprs), "attrs": str(attrs),
                      "options": str(options)[:2000], "warmup": warmup})
        return original(self, key, signature, device, constexprs, options, attrs, warmup)

    JITFunction._do_compile = recording
    rows = []
    for name, mode in [(n, m) for n in a.names for m in ("pool", "worker")]:
        spec, _k = cva.build(name, 1024)
        config = list(spec.space.configs())[0 if mode == "pool" else 1]
        import time

        t0 = time.perf_counter()
        module = load_module(module_source(spec), spec.name, spec.body_line)
        t_import = time.perf_counter() - t0
        kernel = getattr(module, spec.name)
        sig = check_cell(spec)
        host = dict(spec.inputs())
        launch = tb._launch_placeholders(spec, sig, kernel, config, host)
        calls.clear()
        if mode == "pool":  # the pool's processes compile only; the worker through its driver
            os.environ["KTUNE_COMPILE_ONLY"] = "1"
        error = None
        t_static = None
        try:
            t0 = time.perf_counter()
            ck = warm_compile(kernel, launch, "sm_90")
            t_compile = time.perf_counter() - t0
            import triton

            from jupyter_ktune.backends.triton import static as ts

            t0 = time.perf_counter()
            ts.static_report(ts.AotKernel(ck.metadata.name, int(ck.metadata.shared),
                                          int(ck.metadata.num_warps),
                                          {k: ck.asm[k] for k in ("ptx", "cubin")},
                                          triton.__version__), "sm_90", 128)
            t_static = time.perf_counter() - t0
        except Exception as exc:  # noqa: BLE001 - the finding
            error = f"warm: {type(exc).__name__}: {exc}"[:500]
        os.environ.pop("KTUNE_COMPILE_ONLY", None)
        pool_calls = list(calls)
        before = {p for p in cache.rglob("*") if p.is_file()}
        calls.clear()
        bound = TritonVariant(spec, sig, kernel, config, "cpu" if a.cpu else "cuda").bind(host)
        if a.cpu:
            from jupyter_ktune.backends.triton.jit_warm import compiling_for

            with compiling_for("sm_90"):
                bound.variant.kernel.run(grid=bound.grid, warmup=True, **bound.kwargs)
        else:
            import torch

            bound.launch()
            torch.cuda.synchronize()
        new = [str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file()
               and p not in before]
        launch_calls = list(calls)
        diff = {}
        if pool_calls and launch_calls:
            diff = {k: (pool_calls[0][k], launch_calls[0][k]) for k in pool_calls[0]
                    if k not in ("warmup",) and pool_calls[0][k] != launch_calls[0][k]}
        row = {"seconds": {"module import": round(t_import, 3),
                           "warm compile": round(t_compile, 3) if t_static else None,
                           "static report (cuobjdump)": round(t_static, 3) if t_static else None},
               "kernel": name, "mode": mode, "config": dict(config), "warm_error": error,
               "launch_args": {k: repr(v)[:80] for k, v in (launch or {}).items()},
               "pool _do_compile calls": len(pool_calls),
               "launch _do_compile calls": len(launch_calls), "new cache files": new[:12],
               "differs": diff, "pool_call": pool_calls[:1], "launch_call": launch_calls[:1]}
        rows.append(row)
        print(json.dumps(row, indent=1, default=str)[:6000], flush=True)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "jit_key_probe.json").write_text(json.dumps(rows, indent=1, default=str))
    print(f"\n{'kernel':14} {'mode':7} {'import/compile/static s':24} {'warm error':12} "
          f"{'launch compiles':>15} {'new files':>9}  differs in")
    for r in rows:
        t = "/".join(str(v) for v in r["seconds"].values())
        print(f"{r['kernel']:14} {r['mode']:7} {t:24} {str(bool(r['warm_error'])):12} "
              f"{r['launch _do_compile calls']:>15} {len(r['new cache files']):>9}  "
              f"{', '.join(r['differs']) or '-'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
