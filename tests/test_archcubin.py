"""``--arch sm_90a`` cells: nvcc builds the cubin that runs, CuPy (faked here) loads it.

The compile is real (nvcc for sm_90a, as the static report runs it); only ``cupy.RawModule``
is a fake that records the cubin it was given and the symbol asked for.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from jupyter_ktune.backends.cuda.archcubin import is_arch_specific
from jupyter_ktune.backends.cuda.backend import CudaBackend
from jupyter_ktune.backends.base import DeviceInfo
from jupyter_ktune.spec import parse_cell
from test_static import needs_nvcc

TEMPLATE = """// ktune: BM in [64, 128]
// ktune: grid = 1; block = 128
template <int BM>
__global__ void scale(float* x) { x[threadIdx.x] *= BM; }
"""
EXTERN_C = """// ktune: BM in [64, 128]
// ktune: grid = 1; block = 128
extern "C" __global__ void scale(float* x) { x[threadIdx.x] *= BM; }
"""


class FakeRawModule:
    """Records what the backend loads."""

    loaded: list[tuple[bytes, str]] = []

    def __init__(self, path: str):
        self.cubin = Path(path).read_bytes()  # as the driver does: the file may go after loading

    def get_function(self, name: str) -> Any:
        FakeRawModule.loaded.append((self.cubin, name))
        return types.SimpleNamespace(num_regs=8)


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> CudaBackend:
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(RawModule=FakeRawModule))
    monkeypatch.setenv("KTUNE_CACHE_DIR", str(tmp_path))
    FakeRawModule.loaded = []
    b = CudaBackend()
    b.__dict__["_device"] = DeviceInfo(True, "fake H200", limits={"SM_COUNT": 132})
    return b


@pytest.mark.parametrize(("arch", "specific"), [("sm_90a", True), ("sm_100f", True),
                                                ("sm_90", False), ("sm_80", False)])
def test_arch_specific_targets(arch: str, specific: bool) -> None:
    """Only the a/f targets leave CuPy's NVRTC path."""
    assert is_arch_specific(arch) is specific


@needs_nvcc
@pytest.mark.parametrize(("source", "symbol"), [(TEMPLATE, "_Z5scaleILi128EEvPf"),
                                                (EXTERN_C, "scale")])
def test_sm90a_variant_loads_nvcc_cubin(backend: CudaBackend, source: str, symbol: str) -> None:
    """The variant's function is the cubin's entry for this config, template or extern C."""
    spec = parse_cell("scale --backend cuda --arch sm_90a", source)
    variant = backend.compile(spec, spec.space.config({"BM": 128}))
    (cubin, name), = FakeRawModule.loaded
    assert name == symbol
    assert cubin[:4] == b"\x7fELF"
    assert variant.module is not None and variant.limits == {"SM_COUNT": 132}
