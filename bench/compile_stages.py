"""Seconds per Triton compile stage (ttir, ttgir, llir, ptx, cubin = ptxas) of one config of
fla's activation kernels, read from the installed package, compiled for sm_90a with a cold
cache; no GPU needed (issue 21: what one config's 11-20 s compile is made of).

    python3 bench/compile_stages.py sigmoid 8192 1     # kernel, B, num_warps
"""
import os
import sys
import tempfile
import time

os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp()
import fla.modules.activations.ops as ops
import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import CUDABackend
from triton.compiler import ASTSource

name = sys.argv[1] if len(sys.argv) > 1 else "sigmoid"
B = int(sys.argv[2]) if len(sys.argv) > 2 else 8192
nw = int(sys.argv[3]) if len(sys.argv) > 3 else 1
fn = getattr(ops, f"{name}_fwd_kernel").fn
times = {}
orig = CUDABackend.add_stages
def add_stages(self, stages, options, *a, **k):
    orig(self, stages, options, *a, **k)
    for key, f in list(stages.items()):
        def wrap(src, md, f=f, key=key):
            t = time.perf_counter()
            r = f(src, md)
            times[key] = time.perf_counter() - t
            return r
        stages[key] = wrap
CUDABackend.add_stages = add_stages
if name == "sigmoid":
    sig = {"x": "*fp32", "y": "*fp32", "stride_x_row": "i32", "stride_y_row": "i32", "T": "i32",
           "D": "constexpr", "B": "constexpr"}
else:
    sig = {"x": "*fp32", "y": "*fp32", "z": "*fp32", "stride_x_row": "i32", "stride_y_row": "i32",
           "stride_z_row": "i32", "T": "i32", "D": "constexpr", "B": "constexpr"}
src = ASTSource(fn, sig, {"D": 150, "B": B})
t = time.perf_counter()
k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": nw})
print(name, B, nw, "total %.2f" % (time.perf_counter() - t),
      {k: round(v, 3) for k, v in times.items()},
      "regs", k.n_regs if hasattr(k, "n_regs") else None)
