"""bench/results stays small, and what the READMEs point at in it exists (issue 37).

bench/results keeps only the runs that a README, a doc or an example notebook quotes (at most
two per benchmark); every other run is in the history. These checks read files only.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
MAX_BYTES = 5 * 1024 * 1024
MAX_FILES = 120
MAX_RUNS = 2  # dated run folders per benchmark

#: markdown link targets, and bench/results/... paths written out in prose or code spans; a
#: path after ``REV:`` (``git show 0553cc2:bench/results/...``) names the history, not the tree
LINK = re.compile(r"\]\(([^)\s]+)\)")
BARE = re.compile(r"(?<![:\w/.-])bench/results/[A-Za-z0-9_./-]+")
RUN = re.compile(r"\d{4}-\d{2}-\d{2}")


def documents() -> list[Path]:
    """The READMEs, the docs and the example notebooks: where results are quoted."""
    return sorted([ROOT / "README.md", ROOT / "bench" / "README.md",
                   *(ROOT / "docs").glob("*.md"), *RESULTS.glob("*/README.md"),
                   *(ROOT / "examples").glob("*.ipynb")])


def result_files() -> list[Path]:
    return [p for p in RESULTS.rglob("*") if p.is_file()]


def quoted_paths(doc: Path) -> list[tuple[str, Path]]:
    """(as written, resolved) for every path into bench/results that ``doc`` links or names."""
    text = doc.read_text(encoding="utf-8")
    out = []
    for target in LINK.findall(text):
        target = target.split("#")[0]
        if "://" in target or not target:
            continue
        path = (doc.parent / target).resolve()
        if RESULTS == path or RESULTS in path.parents:
            out.append((target, path))
    for written in BARE.findall(text):
        written = written.rstrip(".")
        out.append((written, ROOT / written))
    return out


def test_results_are_small():
    files = result_files()
    size = sum(p.stat().st_size for p in files)
    assert len(files) <= MAX_FILES, (
        f"bench/results holds {len(files)} files (at most {MAX_FILES}): keep only the runs a "
        "README quotes, the rest are in the history")
    assert size <= MAX_BYTES, (
        f"bench/results holds {size / 1e6:.1f} MB (at most {MAX_BYTES / 1e6:.1f} MB): drop large "
        "artefacts (SQLite stores, .ncu-rep files, executed notebooks) that no README quotes")


def test_at_most_two_runs_per_benchmark():
    over = {bench.name: runs for bench in RESULTS.iterdir() if bench.is_dir()
            if len(runs := sorted(p.name for p in bench.iterdir()
                                  if p.is_dir() and RUN.match(p.name))) > MAX_RUNS}
    assert not over, f"more than {MAX_RUNS} runs kept for: {over}"


def test_quoted_results_exist():
    missing = [f"{doc.relative_to(ROOT)}: {written}"
               for doc in documents() for written, path in quoted_paths(doc)
               if not path.exists()]
    assert not missing, "links into bench/results that do not exist:\n" + "\n".join(missing)


def test_every_run_is_quoted():
    """A kept run is one a document quotes: by a path into it, or (in its benchmark's own
    README) by its folder name."""
    quoted: set[Path] = set()
    for doc in documents():
        for _, path in quoted_paths(doc):
            quoted.update([path, *path.parents])
        if doc.parent.parent == RESULTS:
            text = doc.read_text(encoding="utf-8")
            quoted.update(run for run in doc.parent.iterdir() if run.is_dir() and run.name in text)
    runs = [run for bench in RESULTS.iterdir() if bench.is_dir()
            for run in bench.iterdir() if run.is_dir()]
    unquoted = sorted(str(run.relative_to(RESULTS)) for run in runs if run.resolve() not in quoted)
    assert not unquoted, "runs no README, doc or notebook quotes:\n" + "\n".join(unquoted)


def test_every_benchmark_has_its_row():
    """bench/run.py's registry and the table of bench/README.md name the same scripts, and each
    script the table names is in bench/."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    run = sys.modules.setdefault("bench_run", importlib.util.module_from_spec(spec))
    spec.loader.exec_module(run)
    readme = (ROOT / "bench" / "README.md").read_text(encoding="utf-8")
    table = readme.split("\n## ")[0]  # the benchmarks; removed probes come in a later section
    rows = [line.split(" | ")[1] for line in table.splitlines() if line.startswith("| ")
            and " | " in line and not line.startswith(("| question", "| ---"))]
    named = {path for cell in rows for path in re.findall(r"`([\w./]+\.py)", cell)}
    for name, bench in run.REGISTRY.items():
        assert bench.script in named, f"{name} ({bench.script}) has no row in bench/README.md"
    missing = [n for n in named if not (ROOT / "bench" / n).is_file()]
    assert not missing, f"bench/README.md names scripts bench/ does not have: {missing}"
