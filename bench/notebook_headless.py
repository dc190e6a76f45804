"""Execute a notebook headless (nbclient) and print its text outputs: the magic end to end.

    PYTHONPATH=. python3 bench/notebook_headless.py examples/quickstart.ipynb --out DIR
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("notebook", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    nb = nbformat.read(args.notebook, as_version=4)
    t0 = time.perf_counter()
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(args.notebook.parent)}}).execute()
    print(f"executed {args.notebook} in {time.perf_counter() - t0:.1f} s")
    args.out.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, args.out / args.notebook.name)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            text = out.get("text") or out.get("data", {}).get("text/plain", "")
            html = out.get("data", {}).get("text/html", "")
            if html:
                text += "\n" + re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
            if text.strip():
                print(f"[{out['output_type']}] {text.strip()[:1500]}")


if __name__ == "__main__":
    main()
