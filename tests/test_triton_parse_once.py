"""The worker checks a Triton cell several times per config; the source is parsed once."""

from __future__ import annotations

import dataclasses

import pytest

from jupyter_ktune.api import parse_cell
from jupyter_ktune.backends.triton.cell import parse_kernel
from jupyter_ktune.errors import CellError

BODY = """# ktune: BLOCK in [64, 128]; grid = (1,)
import triton
import triton.language as tl

@triton.jit
def add(x, y, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs))
"""


def test_a_cell_is_parsed_once_and_an_edit_or_an_error_is_not_served_from_the_cache():
    spec = parse_cell("add --backend triton", BODY, {})
    first = parse_kernel(spec)
    assert parse_kernel(spec) is first and first.constexprs == ("BLOCK",)
    edited = dataclasses.replace(spec, source=spec.source.replace("BLOCK: tl.constexpr",
                                                                   "BLOCK: tl.constexpr, Z"))
    assert parse_kernel(edited) is not first and "Z" in parse_kernel(edited).params
    broken = dataclasses.replace(spec, source=spec.source.replace("def add(", "def add(("))
    for _ in range(2):
        with pytest.raises(CellError, match="syntax error"):
            parse_kernel(broken)
