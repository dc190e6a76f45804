"""``__constant__`` memory filled from the inputs (issue 18; Kernel Tuner's ``cmem_args``).

A kernel reading a ``__constant__`` filter used to get zeros and fail verification with no hint.
Now the inputs give the symbol's value by its name and it is copied into the module; a symbol
the kernel reads and the inputs do not name is an error on its declaration line, also on a
machine without a GPU; one the kernel never reads needs no value.
The copy itself is checked against a stand-in for CuPy's module (no GPU here).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from cuda_tools import needs_nvcc

from jupyter_ktune.api import parse_cell
from jupyter_ktune.backends.cuda.constants import fill
from jupyter_ktune.backends.cuda.source import cell_constants
from jupyter_ktune.errors import CellError
from jupyter_ktune.results import Status
from jupyter_ktune.runner.execute import run_variant

CONV = """\
// ktune: BLOCK in [64, 128]; grid = cdiv(n, BLOCK); block = BLOCK
// __constant__ float commented_out[4];
__constant__ float filter[3];
__constant__ int offsets[2] = {-1, 1};

__global__ void conv(float* y, const float* x, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i > 0 && i + 1 < n)
    y[i] = filter[0] * x[i + offsets[0]] + filter[1] * x[i] + filter[2] * x[i + offsets[1]];
}
"""


def with_filter():
    x = np.random.rand(256).astype(np.float32)
    return dict(y=np.empty_like(x), x=x, n=256, filter=np.array([0.25, 0.5, 0.25], np.float32))


def without_filter():
    d = with_filter()
    del d["filter"]
    return d


def _spec(inputs):
    return parse_cell("conv --backend cuda --inputs inputs", CONV, {"inputs": inputs})


def test_constant_declarations_are_read_with_their_lines_and_initialisers():
    got = [(s.name, s.line, s.initialised) for s in cell_constants(_spec(with_filter))]
    assert got == [("filter", 4, False), ("offsets", 5, True)]


def test_a_constant_symbol_the_inputs_do_not_name_is_an_error_on_its_line(tmp_path,
                                                                           monkeypatch):
    monkeypatch.setenv("KTUNE_CACHE_DIR", str(tmp_path))
    spec = _spec(without_filter)
    result = run_variant(spec, spec.space.config())
    assert result.status is Status.COMPILE_ERROR, result.reason
    assert "cell line 4: __constant__ filter has no value" in result.reason
    assert "Return filter=np.array(...)" in result.reason


class FakeGlobal:
    """What CuPy's ``RawModule.get_global`` returns: the symbol's address wrapped in memory of
    size 0 (CuPy 14 on the H200: the size check must come from the declaration)."""

    def __init__(self, size):
        self.mem = SimpleNamespace(size=0)
        self.bytes = b""

    def copy_from_host(self, address, nbytes):
        import ctypes

        self.bytes = ctypes.string_at(address, nbytes)


def test_the_input_is_copied_into_the_symbol_and_an_oversized_one_is_refused():
    spec = _spec(with_filter)
    symbols = cell_constants(spec)
    module = SimpleNamespace(globals={"filter": FakeGlobal(12)})
    module.get_global = module.globals.__getitem__
    args = with_filter()
    fill(module, spec, symbols, args)
    assert module.globals["filter"].bytes == args["filter"].tobytes()
    args["filter"] = np.zeros(4, np.float32)
    with pytest.raises(CellError) as e:
        fill(module, spec, symbols, args)
    assert e.value.line == 4 and "has 16 bytes, but __constant__ filter holds 12" in e.value.message
    with pytest.raises(CellError) as e:
        fill(module, spec, symbols, without_filter())
    assert e.value.line == 4


@needs_nvcc
def test_a_constant_symbol_the_kernel_never_reads_needs_no_value(tmp_path, monkeypatch):
    """An unused declaration (a table left from an earlier version) is no error: the static
    report is made on a machine without a GPU, and fill() skips it on one (issue 36)."""
    monkeypatch.setenv("KTUNE_CACHE_DIR", str(tmp_path))
    unused = CONV.replace("__constant__ int offsets", "__constant__ float unused_taps[8];\n"
                          "__constant__ int offsets")
    spec = parse_cell("conv --backend cuda --inputs inputs", unused, {"inputs": with_filter})
    assert [(s.name, s.read) for s in cell_constants(spec)] == [
        ("filter", True), ("unused_taps", False), ("offsets", True)]
    result = run_variant(spec, spec.space.config())
    assert "has no value" not in result.reason, result.reason
    assert result.status in (Status.CANNOT_RUN, Status.OK), result.reason
    if result.status is Status.CANNOT_RUN:  # no GPU here: the static report was made
        assert result.static is not None and result.static.cubin[:4] == b"\x7fELF"
    module = SimpleNamespace(get_global={"filter": FakeGlobal(12)}.__getitem__)
    fill(module, spec, cell_constants(spec), with_filter())  # no unused_taps needed
