"""The compile pool's cache key against the worker's launch, across processes (issue 21).

bench/jit_key_probe.py compares them in one process; on the H200 the bf16 matmul still
recompiled at its first launch in a sweep while corpus kernels did not. Here the pool's task
(``runners.precompile``) runs in a child and the launch (``TritonBound`` on CUDA tensors) here,
each with Triton's ``get_cache_key`` wrapped to record its parts, and prints the parts that
differ.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

RECORD = '''
import json, sys
import triton.compiler.compiler as cc
RECORDS = []
_orig = cc.get_cache_key
def _rec(src, backend, options, env_vars):
    sig = [v for k, v in sorted(src.signature.items())]
    consts = {str(k): (v.cache_key if hasattr(v, "cache_key") else str(v))
              for k, v in sorted(src.constants.items())}
    RECORDS.append({"fn.cache_key": src.fn.cache_key, "attrs": str(src.attrs),
                    "signature": str(sig), "constants": json.dumps(consts),
                    "backend": backend.hash(), "options": options.hash(),
                    "options_text": str(options)[:3000], "env": str(sorted(env_vars.items())),
                    "fn.src_hash": __import__("hashlib").sha256(src.fn.src.encode()).hexdigest(),
                    "fn.module": getattr(src.fn, "module", None)})
    return _orig(src, backend, options, env_vars)
cc.get_cache_key = _rec
'''

CHILD = RECORD + '''
import cloudpickle
from jupyter_ktune.tune.runners import precompile
out, phases = cloudpickle.loads(precompile(sys.stdin.buffer.read()))
print("RECORDS" + json.dumps({"records": RECORDS, "out": type(out).__name__,
                              "phases": phases}))
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=["matmul", "fla-sigmoid"])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests"), str(ROOT / "bench"),
                                                *filter(None, [os.environ.get("PYTHONPATH")])])
    exec(RECORD, globals())  # noqa: S102 - the same recorder in this process
    import cloudpickle
    import corpus_vs_autotune as cva
    import torch

    from jupyter_ktune.backends.triton.cell import check_cell
    from jupyter_ktune.backends.triton.describe import module_source
    from jupyter_ktune.backends.triton.launch import TritonVariant
    from jupyter_ktune.backends.triton.module import load_module

    rows = []
    for name in a.names:
        cache = Path(tempfile.mkdtemp(prefix="ktune-keyproc-"))
        os.environ["TRITON_CACHE_DIR"] = str(cache)
        spec, _k = cva.build(name, a.size)
        config = list(spec.space.configs())[0]
        proc = subprocess.run([sys.executable, "-c", CHILD],
                              input=cloudpickle.dumps((spec, config)), capture_output=True,
                              timeout=300, check=False)
        line = next((ln for ln in proc.stdout.decode().splitlines()
                     if ln.startswith("RECORDS")), None)
        if line is None:
            rows.append({"kernel": name, "child error": proc.stderr.decode()[-2000:]})
            print(rows[-1])
            continue
        child = json.loads(line[len("RECORDS"):])
        RECORDS.clear()
        module = load_module(module_source(spec), spec.name, spec.body_line)
        gpu = torch.cuda.is_available()
        bound = TritonVariant(spec, check_cell(spec), getattr(module, spec.name), config,
                              "cuda" if gpu else "cpu").bind(spec.inputs())
        before = {p for p in cache.rglob("*") if p.is_file()}
        if gpu:
            bound.launch()
            torch.cuda.synchronize()
        else:  # no GPU here: the launch's lookup, short of the launch
            from jupyter_ktune.backends.triton.jit_warm import compiling_for

            with compiling_for(spec.options.arch):
                bound.variant.kernel.run(grid=bound.grid, warmup=True, **bound.kwargs)
        new = [p.name for p in cache.rglob("*") if p.is_file() and p not in before]
        ours = list(RECORDS)
        diff = {}
        if child["records"] and ours:
            c, o = child["records"][0], ours[0]
            diff = {k: {"pool": c[k], "launch": o[k]} for k in c if c[k] != o[k]}
        rows.append({"kernel": name, "pool result": child["out"], "pool phases": child["phases"],
                     "pool get_cache_key calls": len(child["records"]),
                     "launch get_cache_key calls": len(ours), "new files at launch": new,
                     "differs": diff})
        print(json.dumps(rows[-1], indent=1)[:5000], flush=True)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "jit_key_processes.json").write_text(json.dumps(rows, indent=1))
    print(f"\n{'kernel':14} {'new files at launch':>19}  differs in")
    for r in rows:
        print(f"{r['kernel']:14} {len(r.get('new files at launch', [])):>19}  "
              f"{', '.join(r.get('differs', {})) or r.get('child error', '-')[:80]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
