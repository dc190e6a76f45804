"""examples/attention.ipynb runs headless under the Triton interpreter and its kernels are right;
bench/attention_vs_sdpa.py parses its cells on a CPU (``--check``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).parent.parent
EXAMPLES = ROOT / "examples"


def _text(nb) -> str:
    return "\n".join(str(v) for c in nb.cells for o in c.get("outputs", [])
                     for v in [o.get("text", ""), *o.get("data", {}).values()])


def test_attention_notebook_runs_and_is_correct():
    nb = nbformat.read(EXAMPLES / "attention.ipynb", as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(EXAMPLES)}}).execute(env=dict(os.environ))
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    text = _text(nb)
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
