"""The ``smem_tile`` statement and the panel's swizzle map of the cell's own tile (issue 35).

The map used to draw a 16-row, 128-byte bf16 tile read 16 bytes a thread whatever the cell said,
so the fp32 TILE x TILE transpose of examples/swizzle_banks.ipynb read "columns 8-way" where
ncu on the H200 measured 32.5 wavefronts per load. Here the map is the cell's tile, and its
conflict degrees are checked against every recorded ncu run of that notebook's kernel.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import numpy as np
import pytest

from jupyter_ktune.api import parse_cell
from jupyter_ktune.errors import CellError
from jupyter_ktune.ui.swizzle_map import SwizzlePanel

ROOT = Path(__file__).resolve().parents[1]
NCU_RUNS = sorted((ROOT / "bench" / "results" / "swizzle_bank_conflicts").glob("*/swizzle.log"))
HEAD = "// ktune: TILE in [32, 64]; SWIZZLE in [none, 32B, 64B, 128B]\n"


def transpose_spec():
    """The transpose cell of examples/swizzle_banks.ipynb, as the notebook has it."""
    nb = nbformat.read(ROOT / "examples" / "swizzle_banks.ipynb", as_version=4)
    cell = next(c.source for c in nb.cells if c.source.startswith("%%kernel transpose"))
    line, body = cell.split("\n", 1)
    inputs = lambda n=64: dict(inp=np.zeros((n, n), np.float32), out=None, n=n)  # noqa: E731
    return parse_cell(line.removeprefix("%%kernel").split(" --config")[0], body,
                      {"inputs": inputs, "reference": lambda inp, out, n: inp.T})


def ncu_rows():
    """Every ncu-profiled config of the recorded H200 runs: (TILE, SWIZZLE, wavefronts/load)."""
    rows = []
    for log in NCU_RUNS:
        for text in log.read_text().splitlines():
            if text.startswith("{") and '"ncu"' in text:
                row = json.loads(text)
                m = row["ncu"]
                wavefronts = (m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"]
                              / m["smsp__sass_inst_executed_op_shared_ld.sum"])
                rows.append((row["TILE"], row["SWIZZLE"], wavefronts))
    return rows


def test_the_recorded_ncu_runs_cover_every_config_of_the_notebook():
    assert {(t, s) for t, s, _ in ncu_rows()} == {(t, s) for t in (32, 64)
                                                  for s in ("none", "32B", "64B", "128B")}


@pytest.mark.parametrize(("tile", "swizzle", "wavefronts"), ncu_rows())
def test_the_map_of_the_notebooks_tile_matches_ncu_on_the_h200(tile, swizzle, wavefronts):
    panel = SwizzlePanel(transpose_spec().smem_tile)
    panel.show({"TILE": tile, "SWIZZLE": swizzle})
    # ncu's wavefronts per shared load are the n-way conflict plus a few percent of extras
    assert abs(panel.counts["column"] - wavefronts) < 0.5, (panel.counts, wavefronts)
    assert panel.counts["row"] == 1  # the tile is written by rows: conflict-free
    assert f"column read {panel.counts['column']}-way" in panel.fig.title.text
    assert f"{tile}×{tile} float32 · 4 B a thread" in panel.fig.title.text
    assert len(panel.source.data["r"]) == tile * tile  # the whole tile is drawn


def test_unswizzled_fp32_columns_are_32_way_not_the_generic_8_way():
    panel = SwizzlePanel(transpose_spec().smem_tile)
    panel.show({"TILE": 32, "SWIZZLE": "none"})
    assert panel.counts == {"row": 1, "column": 32}
    generic = SwizzlePanel(None)  # a cell without the statement: said to be generic
    generic.show({"SWIZZLE": "none"})
    assert generic.counts["column"] == 8 and "generic" in generic.fig.title.text


@pytest.mark.parametrize(("statement", "shape", "vector_bytes"), [
    ("smem_tile = (BM, BK, bfloat16, vector=8)", (128, 64), 16),
    ("smem_tile = (BM, 2 * BK, tl.float16)", (128, 128), 2),
    ("smem_tile = (BM, BK, T, vector=4)", (128, 64), 16),          # T = float below
    ("smem_tile = (BK, BM, 'float8_e4m3fn', swizzle=MODE)", (64, 128), 1),
])
def test_the_statement_reads_sizes_types_and_vectors(statement, shape, vector_bytes):
    body = (f"// ktune: BM in [128]; BK in [64]; MODE in [64B]; T = float\n// ktune: {statement}\n"
            "__global__ void k() {}\n")
    tile = parse_cell("k --backend cuda", body).smem_tile.shape({"BM": 128, "BK": 64,
                                                                  "MODE": "64B"})
    assert (tile.rows, tile.cols, tile.vector_bytes) == (*shape, vector_bytes)
    assert tile.swizzle.value == (64 if "MODE" in statement else 0)


@pytest.mark.parametrize(("statement", "words"), [
    ("smem_tile = (TILE, TILE)", "takes ROWS, COLS, DTYPE"),
    ("smem_tile = (TILE, TILE, float32, vec=4)", "unknown vec"),
    ("smem_tile = (TILE, TILE, floaty)", "unknown element type 'floaty'"),
    ("smem_tile = (TILE, n, float32)", "reads 'n', which is not a tunable"),
    ("smem_tile = (TILE TILE)", "cannot read smem_tile"),
    ("smem_tile = (TILE, TILE, float32); smem_tile = (1, 1, float32)", "declared twice"),
])
def test_a_bad_statement_is_one_line_on_its_cell_line(statement, words):
    with pytest.raises(CellError, match=rf"^\[ktune\] cell line 3: .*{words}") as err:
        parse_cell("t --backend cuda", HEAD + f"// ktune: {statement}\n__global__ void t() {{}}\n")
    assert "\n" not in str(err.value) and err.value.fix  # one line, with the fix


def test_a_tile_that_does_not_fit_says_why_in_the_map_title():
    spec = parse_cell("t --backend cuda", HEAD + "// ktune: smem_tile = (TILE, 6, float32, "
                      "vector=4)\n__global__ void t() {}\n")
    panel = SwizzlePanel(spec.smem_tile)
    panel.show({"TILE": 32, "SWIZZLE": "none"})  # 16-byte reads of a 24-byte row
    assert panel.fig.title.text.startswith("[ktune] cell line 3: smem_tile: a thread's read")
    assert panel.source.data["r"] == [] and panel.counts == {}


def test_a_large_tile_is_drawn_in_part_and_counted_whole():
    spec = parse_cell("t --backend cuda", HEAD.replace("[32, 64]", "[256]")
                      + "// ktune: smem_tile = (TILE, TILE, bfloat16, vector=8)\n"
                      "__global__ void t() {}\n")
    panel = SwizzlePanel(spec.smem_tile)
    panel.show({"TILE": 256, "SWIZZLE": "128B"})
    assert len(panel.source.data["r"]) == 64 * 128
    assert "first 64 of 256 rows" in panel.fig.xaxis.axis_label
