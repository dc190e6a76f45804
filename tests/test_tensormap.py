"""TMA descriptors on the host: argument packing, checks, the ctypes call, the launch hook.

No GPU and no driver: the driver function is a fake that records what ctypes hands it, and
CuPy is a fake module whose arrays have an address, a shape and strides. The enum values are
also compared with the CUDA toolkit's own cuda.h where one is installed.
"""

from __future__ import annotations

import ctypes
import re
import sys
import types
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from jupyter_ktune import tma
from jupyter_ktune.api import parse_cell
from jupyter_ktune.backends.cuda.launch import CudaVariant
from jupyter_ktune.backends.cuda.source import parse_signature
from jupyter_ktune.backends.cuda.tensormap import (
    DATA_TYPES,
    DESCRIPTOR_DTYPE,
    L2_PROMOTIONS,
    SWIZZLES,
    LibcudaEncoder,
    TmaArgs,
    descriptor,
    is_tensormap_param,
    tensormap_value,
    tma_args,
)
from jupyter_ktune.errors import CellError

BF16 = np.dtype(ml_dtypes.bfloat16)
ENV = {"BM": 128, "BN": 256, "SWIZZLE": 128, "K": 512}


def layout(shape: tuple[int, ...], dtype: np.dtype) -> tuple:
    a = np.empty(shape, dtype)
    return (a.shape, a.strides, a.dtype)


def test_bf16_operand_tile() -> None:
    """A (M, K) bf16 operand, 128B swizzle: dims and box reversed, strides in bytes."""
    got = tma_args(tma("A", box=("BM", "SWIZZLE // 2"), swizzle="SWIZZLE"),
                   layout((256, 512), BF16), ENV)
    assert got == TmaArgs(data_type=9, global_dim=(512, 256), global_strides=(1024,),
                          box_dim=(64, 128), element_strides=(1, 1), interleave=0, swizzle=3,
                          l2_promotion=3, oob_fill=0)


def test_three_dims_and_other_options() -> None:
    """Rank 3, float32, no swizzle, no L2 promotion, a literal box."""
    got = tma_args(tma("X", box=(2, 8, 4), l2_promotion=0), layout((3, 16, 8), np.float32), {})
    assert (got.global_dim, got.global_strides, got.box_dim) == ((8, 16, 3), (32, 512), (4, 8, 2))
    assert (got.data_type, got.swizzle, got.l2_promotion, got.rank) == (7, 0, 0, 3)


@pytest.mark.parametrize(("dtype", "code"), [(np.float16, 6), (np.float32, 7), (BF16, 9),
                                              (np.dtype(ml_dtypes.float8_e4m3fn), 0),
                                              (np.int8, 0), (np.int32, 3), (np.uint16, 1)])
def test_data_types(dtype: Any, code: int) -> None:
    """Each element type maps to its CUtensorMapDataType (8-bit floats move as uint8)."""
    assert tma_args(tma("A", box=(1, 16)), layout((4, 64), np.dtype(dtype)), {}).data_type == code


@pytest.mark.parametrize(("spec", "shape", "dtype", "message"), [
    (tma("A", box=("BM", 128), swizzle=128), (256, 512), BF16, "do not fit the 128B swizzle"),
    (tma("A", box=(512, 64), swizzle=128), (1024, 512), BF16, "outside 1..256"),
    (tma("A", box=(8, 8)), (64, 100), np.float16, "not a positive multiple of 16"),
    (tma("A", box=(8, 4)), (64, 64), np.float16, "not a multiple of 16"),
    (tma("A", box=(8,)), (64, 64), np.float16, "has 2 dimensions"),
    (tma("A", box=(8, 8), swizzle=48), (64, 64), np.float16, "is not 0, 32, 64 or 128"),
    (tma("A", box=("BM / 2", 8)), (64, 64), np.float16, "not an integer"),
])
def test_bad_maps_name_the_fix(spec: Any, shape: tuple, dtype: Any, message: str) -> None:
    """What the driver would refuse is refused first, with the reason and a fix."""
    with pytest.raises(CellError, match=re.escape(message)) as info:
        tma_args(spec, layout(shape, np.dtype(dtype)), ENV, line=7)
    assert info.value.line == 7 and info.value.fix


def test_tma_validates_its_arguments() -> None:
    """tma() takes a name, 1 to 5 box sizes and a known L2 promotion."""
    with pytest.raises(TypeError, match="name as a string"):
        tma(np.zeros(3), box=(1,))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="1 to 5 sizes"):
        tma("A", box=64)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="l2_promotion"):
        tma("A", box=(64,), l2_promotion=32)


class FakeDriver:
    """Stands for libcuda: records the ctypes arguments and writes a recognisable map."""

    def __init__(self, status: int = 0):
        self.status, self.calls = status, []

    def cuTensorMapEncodeTiled(self, out: Any, *args: Any) -> int:  # noqa: N802 - driver's name
        self.calls.append(args)
        for i in range(16):
            out[i] = 0x1111111111111111 * (i % 15 + 1)
        return self.status


def test_libcuda_encoder_passes_the_c_arguments() -> None:
    """The call carries the enums, rank, address and arrays in the driver's C order."""
    fake = FakeDriver()
    args = tma_args(tma("A", box=("BM", 64), swizzle=128), layout((256, 512), BF16), ENV)
    raw = LibcudaEncoder(fake).encode(0x7F0000001000, args)
    assert len(raw) == 128 and raw[:8] == (0x1111111111111111).to_bytes(8, "little")
    (dtype, rank, addr, dims, strides, box, elem, inter, swz, l2, oob), = fake.calls
    assert isinstance(dtype, ctypes.c_int) and dtype.value == 9
    assert rank.value == 2 and addr.value == 0x7F0000001000
    assert [list(dims), list(strides), list(box), list(elem)] == [[512, 256], [1024], [64, 128],
                                                                  [1, 1]]
    assert (inter.value, swz.value, l2.value, oob.value) == (0, 3, 3, 0)


def test_driver_failure_is_reported() -> None:
    """A CUresult other than success raises with the status and the arguments."""
    args = tma_args(tma("A", box=(8, 8)), layout((64, 64), np.float16), {})
    with pytest.raises(RuntimeError, match="CUresult 1"):
        LibcudaEncoder(FakeDriver(status=1)).encode(0, args)


def test_descriptor_is_one_128_byte_value() -> None:
    """The kernel argument is a size-1 array of one 128-byte item (CuPy passes it by value)."""
    arg = descriptor(tma("A", box=(8, 8)), layout((64, 64), np.float16), 4096, {},
                     LibcudaEncoder(FakeDriver()))
    assert arg.dtype == DESCRIPTOR_DTYPE and arg.shape == (1,) and arg.nbytes == 128
    with pytest.raises(CellError, match="16-byte aligned"):
        descriptor(tma("A", box=(8, 8)), layout((64, 64), np.float16), 4100, {},
                   LibcudaEncoder(FakeDriver()))


@pytest.mark.parametrize(("ctype", "takes"), [("__grid_constant__ kt::TensorMap", True),
                                              ("CUtensorMap", True), ("__grid_constant__ "
                                              "CUtensorMap", True), ("int", False),
                                              ("kt::TensorMapX", False)])
def test_tensormap_param_types(ctype: str, takes: bool) -> None:
    """kt::TensorMap and CUtensorMap (with __grid_constant__) take a descriptor."""
    assert is_tensormap_param(ctype) is takes


def _cuda_h() -> Path | None:
    for root in ("/usr/local/cuda/include", "/usr/include"):
        if (Path(root) / "cuda.h").is_file():
            return Path(root) / "cuda.h"
    return None


@pytest.mark.skipif(_cuda_h() is None, reason="no CUDA toolkit headers (cuda.h)")
def test_enum_values_match_cuda_h() -> None:
    """The data-type, swizzle and L2 enum values are the toolkit header's."""
    text = _cuda_h().read_text(errors="replace")  # type: ignore[union-attr]

    def enum(prefix: str) -> dict[str, int]:
        body = re.search(r"\{\s*" + prefix + r"[^}]*\}", text).group(0)  # type: ignore[union-attr]
        names = re.findall(prefix + r"(\w+)", body)
        return {n: i for i, n in enumerate(names)}  # all are 0, 1, 2 ... in order

    types_ = enum("CU_TENSOR_MAP_DATA_TYPE_")
    assert {k: types_[k.upper()] for k in DATA_TYPES} == DATA_TYPES
    swz = enum("CU_TENSOR_MAP_SWIZZLE_")
    assert {b: swz["NONE" if b == 0 else f"{b}B"] for b in SWIZZLES} == SWIZZLES
    l2 = enum("CU_TENSOR_MAP_L2_PROMOTION_")
    assert {b: l2["NONE" if b == 0 else f"L2_{b}B"] for b in L2_PROMOTIONS} == L2_PROMOTIONS


# ---------------------------------------------------------------------------
# The launch hook, with a fake CuPy
# ---------------------------------------------------------------------------

CELL = """// ktune: BM in [64, 128]; SWIZZLE in [64B, 128B]
// ktune: grid = SM_COUNT; block = 384
#include <ktune_hopper.cuh>
extern "C" __global__ void k(const __grid_constant__ kt::TensorMap a_map, const short* A,
                             float* C, int n) {}
"""


class FakeDeviceArray(np.ndarray):
    """What CudaBound uses of a CuPy array: host memory with CuPy's ``data.ptr``, ``set``
    and ``get`` (guarded buffers are views into one allocation, as on the device)."""

    @property
    def data(self):  # type: ignore[override]
        return types.SimpleNamespace(ptr=self.__array_interface__["data"][0])

    def set(self, host):
        self[...] = host

    def get(self):
        return np.array(self, copy=True).view(np.ndarray)


@pytest.fixture
def fake_cupy(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("cupy")
    module.asarray = lambda a: np.array(a).view(FakeDeviceArray)  # type: ignore[attr-defined]
    module.empty = lambda n, dtype: np.empty(n, dtype).view(FakeDeviceArray)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", module)


def _variant(limits: dict[str, int]) -> CudaVariant:
    spec = parse_cell("k --backend cuda --arch sm_90a --out C", CELL)
    fn = types.SimpleNamespace(max_threads_per_block=1024, num_regs=168, shared_size_bytes=0,
                               local_size_bytes=0)
    cxx = spec.space.cxx_env(spec.space.config({"BM": 128, "SWIZZLE": "128B"}))
    return CudaVariant(spec, parse_signature(spec), cxx, fn, "k", limits)


def test_bound_builds_the_map_of_the_device_array(fake_cupy: None,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The map parameter (declared before its array) gets the device address of A."""
    fake = FakeDriver()
    monkeypatch.setattr("jupyter_ktune.backends.cuda.launch.LibcudaEncoder",
                        lambda: LibcudaEncoder(fake))
    a = np.ones((256, 64), np.int16)
    bound = _variant({"SM_COUNT": 132}).bind(
        dict(a_map=tma("A", box=("BM", "SWIZZLE // 2"), swizzle="SWIZZLE"), A=a,
             C=np.ones(4, np.float32), n=4))
    assert bound.grid == (132, 1, 1)
    (_, _, addr, dims, _, box, *_), = fake.calls
    assert addr.value == bound.args[1].data.ptr
    assert (list(dims), list(box)) == ([64, 256], [64, 128])
    assert bound.args[0].dtype == DESCRIPTOR_DTYPE


def test_bound_says_what_a_map_parameter_needs(fake_cupy: None) -> None:
    """A plain value for a map parameter, or a map of no array, is one line with the fix."""
    inputs = dict(a_map=3, A=np.ones((256, 64), np.int16), C=np.ones(4, np.float32), n=4)
    with pytest.raises(CellError, match="is a TMA descriptor but the inputs give a int"):
        _variant({"SM_COUNT": 132}).bind(inputs)
    with pytest.raises(CellError, match="names no array parameter"):
        tensormap_value("a_map", tma("Z", box=(8, 8)), inputs, {"A": None}, {}, FakeDriver(), 3)
