"""examples/attention.ipynb runs headless under the Triton interpreter and its kernels are right;
bench/attention_vs_sdpa.py parses its cells on a CPU (``--check``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from example_notebooks import run_example

ROOT = Path(__file__).parent.parent


def test_attention_notebook_runs_and_is_correct():
    text = run_example("attention.ipynb")
    assert "ktune-result" in text
    assert "attention correct: True" in text, text[-3000:]
    assert "persistent attention correct: True" in text
    assert "fp8 attention correct: True" in text
    assert "attn_fwd: ok | correct" in text


def test_attention_bench_parses_its_cells():
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "attention_vs_sdpa.py"), "--check"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cutlass_attn_fwd" in proc.stdout
