"""A backend's facts reach the generic code through the protocol (``BackendBase``), never
through its name (issue 37).

``ktune_fake_cxx_backend`` is registered here in one line and edited nowhere else; each test
reads one fact the way the generic code does and checks the fake's value arrived, against the
plain fake backend, which keeps every default.
"""

from __future__ import annotations

import os
import sys

import pytest

from jupyter_ktune.api import parse_cell
from jupyter_ktune.backends import get_backend
from jupyter_ktune.backends.base import DeviceInfo
from jupyter_ktune.capabilities import capabilities
from jupyter_ktune.errors import CellError
from jupyter_ktune.space import Config

CELL = "def k(x, y):\n    y[:] = x\n"


@pytest.fixture(autouse=True)
def fakecxx(monkeypatch):
    """The one registry line."""
    monkeypatch.setenv("KTUNE_BACKEND_MODULES", os.environ.get("KTUNE_BACKEND_MODULES", "")
                       + ",fakecxx=ktune_fake_cxx_backend")


def test_the_cell_is_read_with_the_backends_comment_and_directives() -> None:
    spec = parse_cell("k --backend fakecxx", "// ktune: B in [1, 2]\n// ktune: include inc\n"
                      + CELL)
    assert spec.space.names == ("B",) and spec.includes[0][0] == "inc"
    line = " --param B=1,2 --require 'B > 0'"
    for name, comment in (("fakecxx", "//"), ("fake", "#")):  # magic-line statements
        assert parse_cell("k --backend " + name + line, CELL).space.constraints[0].comment \
            == comment
    with pytest.raises(CellError, match="CUDA C\\+\\+ directive") as info:
        parse_cell("k --backend fake", "# ktune: B in [1, 2]\n# ktune: include inc\n" + CELL)
    assert "fakecxx" in info.value.fix and "--backend fake " not in info.value.fix + " "


def test_from_reads_python_cells_only() -> None:
    with pytest.raises(CellError, match="cells are C\\+\\+") as info:
        parse_cell("k --backend fakecxx --from json:loads", "")
    assert "--backend fake" in info.value.fix and "fakecxx" not in info.value.fix


def test_compiler_controls_are_the_backends_own() -> None:
    parse_cell("k --backend fakecxx", "// ktune: maxnreg in [128]\n" + CELL)
    parse_cell("k --backend fake", "# ktune: maxnreg in [128]\n" + CELL)  # None: not checked
    with pytest.raises(CellError, match="name_prefix is a compiler control of CUDA C\\+\\+ and "
                                        "Triton; this cell is --backend fakecxx"):
        parse_cell("k --backend fakecxx", "// ktune: name_prefix in ['']\n" + CELL)
    with pytest.raises(CellError, match="of CUDA C\\+\\+ and Fake C\\+\\+ and Triton;"):
        parse_cell("k --backend pallas", "# ktune: maxnreg in [128]\n" + CELL)


def test_the_compile_pool_and_its_order_follow_the_facts() -> None:
    from jupyter_ktune.tuning.compile_order import compile_first
    from jupyter_ktune.tuning.pool import warm_up
    from jupyter_ktune.tuning.runners import compile_pool_size, precompiled

    assert precompiled("fakecxx") and precompiled("fake") is None
    assert compile_pool_size("fakecxx", None, 1) >= 1 and compile_pool_size("fake", None, 1) == 0
    configs = [Config({"B": b, "num_warps": 4}) for b in (128, 8192, 256, 4096)]
    assert compile_first("fakecxx", configs)[0]["B"] == 8192
    assert compile_first("fake", configs) is None
    sys.modules.pop("colorsys", None)
    warm_up("fakecxx")
    assert "colorsys" in sys.modules


def test_ktune_device_and_verification_ask_the_backend() -> None:
    from jupyter_ktune.runner.execute import _poisoned

    hopper = DeviceInfo(True, "GPU", compute_capability="8.0")
    row = capabilities("fakecxx", hopper)
    assert (row.static, row.profile) == ("yes (fake)", False)
    assert "a note from the fake" in row.notes
    plain = capabilities("fake", hopper)
    assert (plain.static, plain.profile) == ("none", True)
    spec = parse_cell("k --backend fakecxx", CELL)
    assert not _poisoned(spec, object()) and _poisoned(
        parse_cell("k --backend fake", CELL), object())
    assert get_backend("fakecxx").poisons_outputs is False
