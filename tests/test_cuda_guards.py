"""The CUDA binding's guards and input read-back (issue 15 items 5 and 6) without a GPU.

``CudaBound`` is driven through the worker's own verification step with a stand-in for CuPy:
host arrays that answer ``set``/``get``/``fill``/``view`` as CuPy's device arrays do, and a
"kernel" that is a Python function writing through them. The real CuPy path is the same code;
bench/fault_injection.py runs it on a GPU.
"""

from __future__ import annotations

import types

import ml_dtypes
import numpy as np
import pytest

from jupyter_ktune.api import parse_cell
from jupyter_ktune.backends.cuda.launch import CudaVariant, GuardedArray
from jupyter_ktune.backends.cuda.source import parse_signature
from jupyter_ktune.measure.integrity import GUARD_BYTE
from jupyter_ktune.runner.execute import _poisoned, _verify


class DeviceArray(np.ndarray):
    """A host array with CuPy's transfer methods."""

    def set(self, host):
        assert self.flags.c_contiguous and host.shape == self.shape and host.dtype == self.dtype
        self[...] = host

    def get(self):
        return np.array(self, copy=True).view(np.ndarray)


def fake_cupy():
    def empty(n, dtype):
        if np.dtype(dtype).name == "bfloat16":
            raise ValueError("Unsupported dtype bfloat16")  # as CuPy does
        return np.empty(n, dtype).view(DeviceArray)

    return types.SimpleNamespace(empty=empty)


class FakeFunction:
    """A loaded kernel: launching calls ``body(*args)`` on the bound device arrays."""

    max_threads_per_block, num_regs, shared_size_bytes, local_size_bytes = 1024, 16, 0, 0

    def __init__(self, body):
        self.body = body

    def __call__(self, grid, block, args, shared_mem=0):
        self.body(*args)


CELL = """// ktune: BLOCK in [128]; grid = cdiv(n, BLOCK); block = BLOCK
extern "C" __global__ void scale(const float* x, float* y, int n) {}
"""
N = 1000


def bind(monkeypatch, body):
    monkeypatch.setitem(__import__("sys").modules, "cupy", fake_cupy())
    spec = parse_cell("scale --backend cuda --out y", CELL)
    cxx = spec.space.cxx_env(spec.space.default())
    variant = CudaVariant(spec, parse_signature(spec), cxx, FakeFunction(body), "scale", {})
    host = dict(x=np.random.rand(N).astype(np.float32) + 0.5, y=np.empty(N, np.float32), n=N)
    return spec, variant.bind(host), host


def verify(monkeypatch, body):
    spec, bound, host = bind(monkeypatch, body)
    return _verify(spec, bound, {"y": 2 * host["x"]}, inputs=host)


def correct(x, y, n):
    y[...] = 2 * x


def past_end(x, y, n):
    correct(x, y, n)
    np.lib.stride_tricks.as_strided(y, (n + 24,))[n:] = 7.0


def before_start(x, y, n):
    correct(x, y, n)
    whole = y
    while whole.base is not None and isinstance(whole.base, np.ndarray):
        whole = whole.base
    at = (y.ctypes.data - whole.ctypes.data) // y.itemsize
    whole[at - 600:at - 592] = 3.0


def in_place(x, y, n):
    correct(x, y, n)
    x[:10] = 0.0


def test_a_correct_kernel_passes_and_the_inputs_are_copies(monkeypatch):
    spec, bound, host = bind(monkeypatch, correct)
    assert _poisoned(spec, bound)  # the CUDA backend fills the outputs with NaN first
    assert not np.shares_memory(bound.read_inputs(["x"])["x"], host["x"])
    v = _verify(spec, bound, {"y": 2 * host["x"]}, inputs=host)
    assert v.passed and not v.guard_breaches and not v.changed_inputs and not v.notes, v


def checks_through_torch(monkeypatch):
    """As in a worker whose torch CUDA warm-up has finished: the guard and input checks go
    through torch over the arrays' memory (DLPack; here CPU memory)."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr("jupyter_ktune.backends.cuda.launch.warmed_torch", lambda: torch)


@pytest.mark.parametrize("through_torch", [False, True], ids=["host", "torch"])
@pytest.mark.parametrize(("body", "words"), [
    (past_end, "wrote 24 elements past the end of `y` (up to 24 past it)"),
    (before_start, "wrote 8 elements before the start of `y` (up to 600 before it)"),
    (in_place, "the kernel changed input `x` (10 of 1000 elements)"),
])
def test_faults_are_named(monkeypatch, body, words, through_torch):
    if through_torch:
        checks_through_torch(monkeypatch)
    v = verify(monkeypatch, body)
    assert not v.passed and v.checks[0].passed
    assert v.summary().startswith(words), v.summary()


def test_bfloat16_travels_as_raw_bits_inside_the_guards():
    host = np.random.rand(10).astype(ml_dtypes.bfloat16)
    g = GuardedArray(fake_cupy(), host)
    assert g.whole.dtype == np.uint16 and g.read().dtype == host.dtype
    assert np.array_equal(g.read().view(np.uint16), host.view(np.uint16))
    assert (g.whole[: g.before].view(np.uint8) == GUARD_BYTE).all()
    assert (g.whole[g.before + 10:].view(np.uint8) == GUARD_BYTE).all()
    assert g.breach("x") is None


def test_sixteen_byte_elements_get_a_bytewise_guard():
    g = GuardedArray(fake_cupy(), np.ones(4, np.complex128))
    assert (g.whole[: g.before].view(np.uint8) == GUARD_BYTE).all()
    assert (g.whole[g.before + 4:].view(np.uint8) == GUARD_BYTE).all()
    g.whole[g.before + 4 + 1] = 0
    assert g.breach("z").after == 1


def test_bindings_of_one_input_set_upload_each_array_once(monkeypatch):
    """Two bindings in one input set: the host arrays go to the device once (one ``set`` each);
    the second binding copies from those pristine copies on the device. Outside a set every
    binding uploads (issue 21: 1.8 s of a 24-config sweep of 2^26 floats was re-uploading)."""
    from jupyter_ktune.backends.uploads import Uploads, for_input_set

    checks_through_torch(monkeypatch)
    sets = []
    monkeypatch.setattr(DeviceArray, "set", lambda self, h: (sets.append(h.size),
                                                               self.__setitem__(..., h)))
    monkeypatch.setitem(__import__("sys").modules, "cupy", fake_cupy())
    spec = parse_cell("scale --backend cuda --out y", CELL)
    cxx = spec.space.cxx_env(spec.space.default())
    variant = CudaVariant(spec, parse_signature(spec), cxx, FakeFunction(in_place), "scale", {})
    host = dict(x=np.random.rand(N).astype(np.float32) + 0.5, y=np.empty(N, np.float32), n=N)
    with for_input_set(Uploads()):
        first = variant.bind(host)
        assert sets == [N, N]
        second = variant.bind(host)
    assert sets == [N, N]
    first.launch()  # changes x[:10] in its own copy only
    assert first.count_changed_inputs(["x"]) == {"x": (10, N)}
    assert second.count_changed_inputs(["x"]) == {"x": (0, N)}
    variant.bind(host)
    assert sets == [N, N, N, N]


def test_inputs_are_checked_without_reading_them_back(monkeypatch):
    """The changed-input check asks the binding to compare on the device; the host read-back is
    only for bindings that cannot (torch not warmed yet: the host tests above)."""
    checks_through_torch(monkeypatch)
    spec, bound, host = bind(monkeypatch, in_place)
    monkeypatch.setattr(type(bound), "read_inputs", lambda self, names: pytest.fail("read back"))
    v = _verify(spec, bound, {"y": 2 * host["x"]}, inputs=host)
    assert v.summary().startswith("the kernel changed input `x` (10 of 1000 elements)")
