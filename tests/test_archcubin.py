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
from cuda_tools import needs_nvcc

from jupyter_ktune.api import parse_cell
from jupyter_ktune.backends.base import DeviceInfo
from jupyter_ktune.backends.cuda.archcubin import is_arch_specific
from jupyter_ktune.backends.cuda.backend import CudaBackend

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


# -- a sweep's pool report, loaded instead of an NVRTC recompile (issue 21) --------------------
CONSTANT = """// ktune: BM in [64, 128]
// ktune: grid = 1; block = 128
__constant__ float w[4];
template <int BM>
__global__ void scale(float* x, int n) { if (threadIdx.x < n) x[threadIdx.x] *= BM * w[0]; }
"""


def pool_report(spec: Any, config: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The static report as a sweep's compile-pool process builds it (no SASS, cubin kept)."""
    from jupyter_ktune.measure.static import SWEEP_STATIC_ENV

    monkeypatch.setenv(SWEEP_STATIC_ENV, "1")
    report = CudaBackend().static_report(spec, config)
    monkeypatch.delenv(SWEEP_STATIC_ENV)
    return report


@pytest.fixture
def h200(backend: CudaBackend) -> CudaBackend:
    backend.__dict__["_device"] = DeviceInfo(True, "fake H200", compute_capability="9.0",
                                             limits={"SM_COUNT": 132})
    return backend


@needs_nvcc
def test_a_pool_report_is_loaded_not_recompiled(h200: CudaBackend,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """On a device of the report's architecture the worker loads the pool's cubin: the entry
    of this config's instantiation, with the cell's __constant__ symbols (CuPy here only takes
    a path: an NVRTC compile would fail)."""
    from jupyter_ktune.runner.execute import _prebuilt

    spec = parse_cell("scale --backend cuda", CONSTANT)
    config = spec.space.config({"BM": 64})
    report = pool_report(spec, config, monkeypatch)
    assert report.arch == "sm_90" and report.cubin[:4] == b"\x7fELF"
    done: Any = __import__("concurrent.futures").futures.Future()
    done.set_result((report, None))
    variant = _prebuilt(h200, spec, config, done)
    (cubin, name), = FakeRawModule.loaded
    assert cubin == report.cubin and name == "_Z5scaleILi64EEvPfi"
    assert variant.expr == "scale<64>" and [c.name for c in variant.constants] == ["w"]


@needs_nvcc
def test_a_report_that_cannot_be_the_build_is_not_loaded(h200: CudaBackend,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Another architecture, no cubin, a report still being built or one that failed: None, and
    the worker compiles (NVRTC) as before."""
    import concurrent.futures as cf
    import dataclasses

    from jupyter_ktune.runner.execute import _prebuilt

    spec = parse_cell("scale --backend cuda", CONSTANT)
    config = spec.space.config({"BM": 64})
    report = pool_report(spec, config, monkeypatch)

    def future(result: Any = None) -> cf.Future:
        f: cf.Future = cf.Future()
        if result is not None:
            f.set_result(result)
        return f

    assert _prebuilt(h200, spec, config, future()) is None  # still building: not waited for
    assert _prebuilt(h200, spec, config, future((None, RuntimeError("nvcc")))) is None
    assert h200.load_prebuilt(spec, config, dataclasses.replace(report, cubin=b"")) is None
    assert h200.load_prebuilt(spec, config, dataclasses.replace(report, kernels={})) is None
    h200.__dict__["_device"] = DeviceInfo(True, "fake A100", compute_capability="8.0")
    assert h200.load_prebuilt(spec, config, report) is None
    assert FakeRawModule.loaded == []


def test_demangled_names_match_without_casts_and_suffixes() -> None:
    """cu++filt may write ``(int)256`` and ``4u``; the kernel's expression says ``256, 4``."""
    from jupyter_ktune.backends.cuda.archcubin import kernel_symbol

    spec = parse_cell("scale --backend cuda", TEMPLATE)
    kernels = {"_Z5scaleILi256ELj4EEvPKf": types.SimpleNamespace(
        demangled="void ns::scale<(int)256, 4u>(float const*)"),
        "_Z5scaleILi128ELj4EEvPKf": types.SimpleNamespace(
        demangled="void ns::scale<(int)128, 4u>(float const*)")}
    assert kernel_symbol(kernels, spec, "scale<256, 4>") == "_Z5scaleILi256ELj4EEvPKf"
    with pytest.raises(Exception, match="cannot find the kernel scale<64, 4>"):
        kernel_symbol(kernels, spec, "scale<64, 4>")
