"""Run an example notebook headless, top to bottom, the way the example tests need it.

Also a script, so a fresh virtualenv's python can run the notebooks against what it installed
(tests/test_fresh_install.py): ``python example_notebooks.py FOLDER NAME...`` prints one JSON
object, each notebook's seconds, error and output text.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

EXAMPLES = Path(__file__).parent.parent / "examples"


def run_example(name: str, folder: Path = EXAMPLES) -> str:
    """Execute ``folder/<name>`` in a fresh python3 kernel and return all of its outputs as
    one text (streams and every rich representation). An error output anywhere fails the test
    with the error itself."""
    nb = nbformat.read(folder / name, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(folder)}}).execute(env=dict(os.environ))
    outputs = [o for c in nb.cells for o in c.get("outputs", [])]
    errors = [o for o in outputs if o.get("output_type") == "error"]
    if errors:
        raise AssertionError(f"{name} raised: {errors}")
    return "\n".join(str(v) for o in outputs
                     for v in [o.get("text", ""), *o.get("data", {}).values()])


def main(folder: str, *names: str) -> None:
    """Run each notebook, one after the other; print {name: {seconds, error, text}} as JSON."""
    report = {}
    for name in names:
        start, error, text = time.perf_counter(), None, ""
        try:
            text = run_example(name, Path(folder))
        except Exception as exc:  # noqa: BLE001 - every notebook runs; the caller judges
            error = f"{type(exc).__name__}: {exc}"
        report[name] = {"seconds": round(time.perf_counter() - start, 1), "error": error,
                        "text": text}
    print(json.dumps(report))


if __name__ == "__main__":
    main(*sys.argv[1:])
