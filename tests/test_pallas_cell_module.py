"""A Pallas cell runs as a module of its own (issue 18, P1): classes defined in it work.

``load_cell`` used to run the cell before it was in ``sys.modules`` and under this package's
``from __future__ import annotations``: a ``@dataclasses.dataclass`` in the cell failed with
``'NoneType' object has no attribute '__dict__'`` and annotations were strings. No JAX needed.
"""

from __future__ import annotations

import sys

import pytest

from jupyter_ktune.api import parse_cell
from jupyter_ktune.backends.pallas.cell import cell_module_name, load_cell
from jupyter_ktune.errors import CompileFailure

DATACLASS_CELL = '''\
import dataclasses

@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Config:
    block_m: int
    num_warps: int = 4

def op(block_m):
    return Config(block_m=block_m)

def typed(x: int): ...
HINT = typed.__annotations__["x"]
'''


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KTUNE_CACHE_DIR", str(tmp_path))


@pytest.mark.parametrize("future", ["", "from __future__ import annotations\n"])
def test_a_cell_with_a_slotted_dataclass_loads_with_or_without_future_annotations(future):
    spec = parse_cell(f"op --backend pallas --param X=1{len(future)}", future + DATACLASS_CELL)
    module = load_cell(spec, "interpret")
    try:
        assert module.op(block_m=8).block_m == 8
        # the cell's own future flags decide: a real type without the import, a string with it
        assert module.HINT == ("int" if future else int)
    finally:
        sys.modules.pop(cell_module_name(spec, "interpret"), None)


def test_a_failing_cell_leaves_no_half_made_module_behind():
    spec = parse_cell("op --backend pallas", "import dataclasses\nraise ValueError('boom')\n")
    with pytest.raises(CompileFailure) as info:
        load_cell(spec, "interpret")
    assert info.value.diagnostics[0].line == 3
    assert cell_module_name(spec, "interpret") not in sys.modules
