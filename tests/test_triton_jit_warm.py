"""The sweep's compile pool fills Triton's cache under the key the worker's launch looks up.

On the H200 a config's first launch spent 0.9-1.0 s compiling again although the pool had just
compiled it (bench/results/verify_phase_probe/2026-12-01-0934): the pool's ahead-of-time key was
not the JIT's. Here, on a CPU, one process runs the pool's task (``precompile``) and a second
builds the worker's launch arguments (``TritonBound``: guarded tensors, constexprs, options,
heuristics) and asks the JIT for the kernel as a launch would; the second must find the first's
cache entry and write nothing new. The same check with the old ahead-of-time compile (no launch
arguments) writes a new entry: that is what the test guards against.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import cloudpickle
import numpy as np
import pytest

from jupyter_ktune.api import parse_cell

pytest.importorskip("triton")
pytest.importorskip("torch")

HERE = Path(__file__).resolve().parent


def mm_inputs(M=64, N=48, K=32):
    import ml_dtypes

    a = np.random.randn(M, K).astype(ml_dtypes.bfloat16)
    b = np.random.randn(K, N).astype(ml_dtypes.bfloat16)
    return dict(a=a, b=b, c=np.empty((M, N), dtype=ml_dtypes.bfloat16), M=M, N=N, K=K,
                scale=1.0)


def mm_reference(a, b, c, M, N, K, scale):
    return a.astype(np.float32) @ b.astype(np.float32)


# heuristics, a float scalar, ints of which one is not 16-divisible, a bf16 pointer set
MATMUL = """# ktune: BLOCK_M in [32, 64]; BLOCK_N in [16, 32]; num_warps in [4]; num_stages in [2, 3]
# ktune: grid = cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)
@triton.heuristics({"EVEN_K": lambda args: args["K"] % 32 == 0})
@triton.jit
def matmul(a, b, c, M, N, K, scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
           EVEN_K: tl.constexpr, BLOCK_K: tl.constexpr = 32):
    pid = tl.program_id(0)
    nb = tl.cdiv(N, BLOCK_N)
    rm = (pid // nb) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = (pid % nb) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :],
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], (acc * scale).to(tl.bfloat16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))
"""  # noqa: E501 - the cell's directive line, as a user writes it
LINE = "matmul --backend triton --inputs inputs --reference reference --out c"

LAUNCH_LOOKUP = textwrap.dedent("""
    import os, sys, cloudpickle
    from pathlib import Path
    spec, config = cloudpickle.loads(sys.stdin.buffer.read())
    from jupyter_ktune.backends.triton.cell import check_cell
    from jupyter_ktune.backends.triton.describe import module_source
    from jupyter_ktune.backends.triton.jit_warm import compiling_for
    from jupyter_ktune.backends.triton.launch import TritonVariant
    from jupyter_ktune.backends.triton.module import load_module
    module = load_module(module_source(spec), spec.name, spec.body_line)
    variant = TritonVariant(spec, check_cell(spec), getattr(module, spec.name), config, "cpu")
    bound = variant.bind(spec.inputs())        # the worker's arguments, as it launches them
    cache = Path(os.environ["TRITON_CACHE_DIR"])
    before = {p for p in cache.rglob("*") if p.is_file()}
    with compiling_for(spec.options.arch):     # the launch's lookup, short of the launch
        variant.kernel.run(grid=bound.grid, warmup=True, **bound.kwargs)
    print(len({p for p in cache.rglob("*") if p.is_file()} - before))
""")


def _env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRITON_INTERPRET", "KTUNE_FORCE_INTERPRET", "KTUNE_COMPILE_ONLY")}
    env["TRITON_CACHE_DIR"] = str(cache)
    env["TRITON_DEFAULT_FP_FUSION"] = "1"  # as every ktune process sets it (module.choose_mode)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), *filter(None, [env.get("PYTHONPATH")])])
    return env


def _child(code: str, blob: bytes, cache: Path) -> str:
    proc = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True,
                          env=_env(cache), timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return proc.stdout.decode().strip().splitlines()[-1]


POOL_TASK = ("import sys, cloudpickle; from jupyter_ktune.tuning.runners import precompile; "
             "out, _s = cloudpickle.loads(precompile(sys.stdin.buffer.read())); "
             "from jupyter_ktune.measure.static import SASS_SKIPPED; "
             "print(type(out).__name__, getattr(out, 'kernels', {}) and 'static', "
             "'no-sass' if out.sass_error == SASS_SKIPPED else 'sass')")


@pytest.mark.parametrize("config", [{"BLOCK_M": 64, "BLOCK_N": 16, "num_warps": 4,
                                     "num_stages": 3}])
def test_the_pools_compile_is_the_entry_the_launch_finds(tmp_path, config):
    spec = parse_cell(LINE, MATMUL, {"inputs": mm_inputs, "reference": mm_reference})
    blob = cloudpickle.dumps((spec, spec.space.config(config)))
    cache = tmp_path / "triton-cache"
    # the pool task's report: registers and smem, the SASS mix left for a run of the config
    assert _child(POOL_TASK, blob, cache) == "StaticReport static no-sass"
    assert any(cache.rglob("*.cubin")), "the pool's compile wrote no cubin"
    new = _child(LAUNCH_LOOKUP, blob, cache)
    assert new == "0", f"the launch compiled again ({new} new cache files): the pool's key " \
                       "is not the JIT's"


def test_a_cold_cache_is_a_miss_so_the_check_can_fail(tmp_path):
    """Without the pool's compile the same lookup writes the entry itself."""
    spec = parse_cell(LINE, MATMUL, {"inputs": mm_inputs, "reference": mm_reference})
    blob = cloudpickle.dumps((spec, spec.space.config({"BLOCK_M": 32, "BLOCK_N": 32,
                                                       "num_warps": 4, "num_stages": 2})))
    assert int(_child(LAUNCH_LOOKUP, blob, tmp_path / "cold")) > 0


def test_a_tensor_descriptor_kernel_is_found_too(tmp_path):
    """Host TensorDescriptors with the config's block shape (tests/test_triton_config_arguments)."""
    import test_triton_config_arguments as td

    spec = parse_cell(td.LINE, td.DIRECTIVES + td.KERNEL, td.NS)
    blob = cloudpickle.dumps((spec, spec.space.config({"BM": 32, "BN": 64})))
    cache = tmp_path / "triton-cache"
    assert _child(POOL_TASK, blob, cache) == "StaticReport static no-sass"
    assert _child(LAUNCH_LOOKUP, blob, cache) == "0"



SOURCE_AHEAD = textwrap.dedent("""
    import os, sys, cloudpickle
    from pathlib import Path
    os.environ["KTUNE_COMPILE_ONLY"] = "1"
    spec, config = cloudpickle.loads(sys.stdin.buffer.read())
    from jupyter_ktune.backends import get_backend
    from jupyter_ktune.backends.triton.jit_warm import warm_compile
    from jupyter_ktune.backends.triton.launcher_ahead import jit_source
    _key, request = get_backend("triton")._aot_request(spec, config)
    cache = Path(os.environ["TRITON_CACHE_DIR"])
    src = jit_source(request._kernel(), request.launch, request.arch)
    wrote = sum(1 for p in cache.rglob("*") if p.is_file())
    compiled = warm_compile(request._kernel(), request.launch, request.arch).src
    same = (dict(src.signature) == dict(compiled.signature)
            and dict(src.constants) == dict(compiled.constants))
    print(type(src).__name__, wrote, same)
""")


def test_the_launchers_source_is_known_before_the_compile(tmp_path):
    """Triton 3.6 builds a launcher from the JIT's source object (signature, constants): the
    pool builds it from the binder's source, caught before the compile, beside the compiles
    (backends.triton.launcher_ahead). It must be the compile's own and cost no compile."""
    spec = parse_cell(LINE, MATMUL, {"inputs": mm_inputs, "reference": mm_reference})
    blob = cloudpickle.dumps((spec, spec.space.config({"BLOCK_M": 64, "BLOCK_N": 32,
                                                       "num_warps": 4, "num_stages": 2})))
    assert _child("import triton\n" + SOURCE_AHEAD, blob, tmp_path / "c") == "ASTSource 0 True"
