"""examples/attention_wgmma.ipynb runs headless here (sm_90a static report), and the bench's
--check compiles its bench space for sm_90a: both GEMMs' HGMMA shapes, TMA, no spills."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cuda_tools import needs_nvcc
from example_notebooks import run_example

ROOT = Path(__file__).parent.parent


@needs_nvcc
def test_attention_notebook_shows_hgmma_and_tma() -> None:
    """The kernel cell compiles for sm_90a into wgmma + TMA SASS without spills."""
    text = run_example("attention_wgmma.ipynb")
    assert "wgmma True | tma True" in text, text[-2000:]
    assert "| spills 0 | HGMMA ['HGMMA.64x128x16.F32']" in text
    if "cannot run here" not in text:  # on a GPU the cell really ran and was verified
        assert "attn_fwd: ok" in text
    # the fp8 cell: the same kernel with FP8 in [1] builds the 8-bit wgmma, TMA, no spills
    assert "QGMMA ['QGMMA.64x128x32.F32.E4M3.E4M3'] | tma True | spills 0" in text, text[-2000:]
    assert "'CONSUMERS': 2, 'EXP_POLY': 0, 'FP8': 1" in text  # the fp8 build is what ran


@needs_nvcc
def test_bench_check_compiles_the_attention_bench_space() -> None:
    """``--check`` passes on every config of the bench space, both head dims, fp16 and fp8."""
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "attention_wgmma_vs_cudnn.py"),
                           "--check"], capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "16 of 16 configs ok (sm_90a, nvcc)" in proc.stdout
    assert "HGMMA.64x192x16.F32" in proc.stdout and "HGMMA.64x176x16.F32" in proc.stdout
    assert "QGMMA.64x128x32.F32.E4M3.E4M3" in proc.stdout  # the FP8 cell: 8-bit wgmma, k32
