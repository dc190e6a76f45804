"""examples/gemm_wgmma.ipynb runs headless here (sm_90a static report), and the bench's --check
compiles its whole bench space for sm_90a with HGMMA and UTMALDG and no spills."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from example_notebooks import run_example
from test_static import needs_nvcc

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
