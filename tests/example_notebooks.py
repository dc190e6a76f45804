"""Run an example notebook headless, top to bottom, the way the example tests need it."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
from nbclient import NotebookClient

EXAMPLES = Path(__file__).parent.parent / "examples"


def run_example(name: str) -> str:
    """Execute ``examples/<name>`` in a fresh python3 kernel and return all of its outputs as
    one text (streams and every rich representation). An error output anywhere fails the test
    with the error itself."""
    nb = nbformat.read(EXAMPLES / name, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(EXAMPLES)}}).execute(env=dict(os.environ))
    outputs = [o for c in nb.cells for o in c.get("outputs", [])]
    errors = [o for o in outputs if o.get("output_type") == "error"]
    if errors:
        raise AssertionError(f"{name} raised: {errors}")
    return "\n".join(str(v) for o in outputs for v in [o.get("text", ""), *o.get("data", {}).values()])
