"""Read a ``%%kernel`` cell out of an example notebook, for the bench scripts that time it.

Read as plain JSON, so a GPU machine without nbformat can run them, and shared so the benches
time exactly the cell the notebook shows.
"""

from __future__ import annotations

import json
from pathlib import Path


def kernel_cell(notebook: Path, name: str) -> tuple[str, str]:
    """(magic line without ``%%kernel``, body) of the notebook's ``%%kernel name`` cell."""
    cells = json.loads(notebook.read_text())["cells"]
    sources = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
               for c in cells]
    src = next(s for s in sources if s.startswith(f"%%kernel {name} "))
    line, body = src.split("\n", 1)
    return line.removeprefix("%%kernel").strip(), body
