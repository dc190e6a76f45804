"""examples/gemm_wgmma.ipynb runs headless here (sm_90a static report), and the bench's --check
compiles its whole bench space for sm_90a with HGMMA and UTMALDG and no spills."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cuda_tools import needs_nvcc
from example_notebooks import run_example

ROOT = Path(__file__).parent.parent


@needs_nvcc
def test_wgmma_notebook_shows_hgmma_and_tma() -> None:
    """The kernel cell compiles for sm_90a into wgmma + TMA SASS without spills."""
    text = run_example("gemm_wgmma.ipynb")
    assert "wgmma True | tma True" in text, text[-2000:]
    assert "| spills 0 | HGMMA ['HGMMA.64x256x16.F32.BF16']" in text
    if "cannot run here" not in text:  # on a GPU the cell really ran and was checked
        assert "gemm_wgmma: ok" in text


@needs_nvcc
def test_bench_check_compiles_the_bench_space() -> None:
    """``--check`` passes on every config of the bench space."""
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "gemm_wgmma_vs_cublas.py"),
                           "--check"], capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "9 of 9 configs ok (sm_90a, nvcc)" in proc.stdout


@needs_nvcc
def test_the_scope_trace_of_the_wgmma_gemm_is_an_nvcc_sm_90a_build(monkeypatch) -> None:
    """Issue 20 item 3: the Cycle breakdown's build of the sm_90a cell goes through nvcc with the
    trace macros (NVRTC through CuPy cannot target sm_90a). The traced build keeps its HGMMA and
    TMA loads, adds exactly the trace's shared records, and the plain build has none of it."""
    import re

    # the bench module puts the checkout first on sys.path and PYTHONPATH when imported: on
    # copies of both, so a worker started by a later test still imports the installed package
    monkeypatch.setattr(sys, "path", [str(ROOT / "bench"), *sys.path])
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    import gemm_wgmma_vs_cublas as bench

    from jupyter_ktune.backends import get_backend
    from jupyter_ktune.backends.cuda.profile import ScopeSampling, scope_names, uses_scopes

    spec = bench.spec_for(1024)
    assert uses_scopes(spec.source)
    assert set(scope_names(spec.source).values()) == {"load", "mma", "store"}
    config = spec.space.config(bench._BASE)
    sampling = ScopeSampling.for_launch(64, 12, 64, 4, 64)
    backend = get_backend("cuda")
    plain = backend.static_report(spec, config).kernel("gemm_wgmma")
    traced = backend.nvcc_report(spec, config, extra_defines=sampling.defines())
    k = traced.kernel("gemm_wgmma")
    assert k.sass.uses_wgmma and k.sass.uses_tma
    assert any(re.fullmatch(r"HGMMA\.64x256x16\.F32\.BF16", m) for m in k.sass.mnemonics)
    records = sampling.warps * 2 * sampling.events * 4
    assert k.smem_static - plain.smem_static == records, (k.smem_static, plain.smem_static)
    assert plain.spill_stores == 0 and k.registers <= 232 + 8
    assert plain.smem_static == 0


def test_the_profile_build_of_an_sm_90a_cell_takes_the_nvcc_path(monkeypatch) -> None:
    """instrumented_variant hands an arch-specific cell to the nvcc build with the sampling
    macros instead of NVRTC (which would build plain sm_90 and fail on wgmma)."""
    import types

    from jupyter_ktune.api import parse_cell
    from jupyter_ktune.backends.cuda import profile

    seen = {}

    def nvcc_build(backend, spec, config, extra_defines=None):
        seen.update(backend=backend, defines=dict(extra_defines))
        return types.SimpleNamespace(module="the cubin's module")

    monkeypatch.setattr(profile, "compile_with_nvcc", nvcc_build)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace())  # NVRTC never asked
    spec = parse_cell("k --backend cuda --arch sm_90a",
                      '// ktune: B in [1]\nextern "C" __global__ void k(float* y) {}\n')
    sampling = profile.ScopeSampling.for_launch(8, 4, 64, 4, 64)
    variant, module = profile.instrumented_variant(spec, spec.space.default(), sampling, {},
                                                   backend="the backend")
    assert module == "the cubin's module" and seen["backend"] == "the backend"
    assert seen["defines"]["KT_PROFILE"] == "1"
    assert seen["defines"] == sampling.defines()
