"""One build per CUDA C++ cell (issue 36): the run loads the static report's own nvcc cubin,
and NVRTC (the run's compiler only where nvcc is absent) compiles what nvcc compiles.

Published kernels use ``M_PI`` and ``INFINITY`` (from the host's <math.h>, which nvcc's build
includes and NVRTC has not), ``<cmath>``, ``<cuda/std/...>``, cooperative groups: each idiom
below is compiled both ways, nvcc through the backend's static report and NVRTC through the
``nvidia-cuda-nvrtc`` wheel with the very options the backend gives it. No GPU needed.
"""

from __future__ import annotations

import sys
import threading
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from cuda_tools import needs_nvcc
from nvrtc_wheel import load_nvrtc, nvrtc_compile
from test_archcubin import FakeRawModule, backend, h200  # noqa: F401 - fixtures

from jupyter_ktune.api import parse_cell
from jupyter_ktune.backends.base import DeviceInfo
from jupyter_ktune.backends.cuda import archcubin
from jupyter_ktune.backends.cuda.backend import CudaBackend
from jupyter_ktune.backends.cuda.nvrtc import nvrtc_options
from jupyter_ktune.backends.cuda.source import macro_defines, parse_signature, static_source
from jupyter_ktune.backends.cuda.templates import type_arguments

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from one_build import HEAD, IDIOMS  # noqa: E402 - the cells the GPU bench runs too


@needs_nvcc
@pytest.mark.parametrize("idiom", list(IDIOMS))
def test_published_idioms_compile_with_nvcc_and_with_nvrtc(idiom: str, monkeypatch,
                                                           tmp_path: Path) -> None:
    """Both compilers take the cell: nvcc (the static report, and the run where nvcc is) and
    NVRTC with the backend's own options (the run where nvcc is not)."""
    monkeypatch.setenv("KTUNE_CACHE_DIR", str(tmp_path))
    spec = parse_cell("k --backend cuda", HEAD + IDIOMS[idiom])
    config = spec.space.config(BLOCK=128)
    report = CudaBackend().static_report(spec, config)  # raises CompileFailure with nvcc's log
    assert report.cubin[:4] == b"\x7fELF"
    nvrtc = load_nvrtc()
    if nvrtc is None:
        pytest.skip("libnvrtc not found: pip install nvidia-cuda-nvrtc")
    sig = parse_signature(spec)
    cxx = spec.space.cxx_env(config)
    types_ = type_arguments(spec, sig)
    ok, log = nvrtc_compile(nvrtc, static_source(spec, sig, cxx, types_),
                            ["--gpu-architecture=sm_90", *nvrtc_options(spec, sig, cxx)])
    assert ok, log


# -- the run loads nvcc's build, the one its static report describes ----------------------------
@pytest.fixture
def gpu_backend(h200: CudaBackend) -> CudaBackend:  # noqa: F811 - the imported fixture
    """A backend with a (fake) H200 whose CuPy only loads cubin files (test_archcubin)."""
    h200.__dict__["_timer_slot"] = types.SimpleNamespace(get=lambda build: None)  # no timer
    return h200


@needs_nvcc
def test_the_run_loads_the_static_reports_cubin_built_once(gpu_backend: CudaBackend,
                                                           monkeypatch) -> None:
    """A cell with M_PI runs from nvcc's cubin, and the report and the run share one nvcc."""
    from jupyter_ktune.backends.cuda import static

    calls = []
    real = static.compile_static
    monkeypatch.setattr(static, "compile_static",
                        lambda *a, **k: calls.append(a) or real(*a, **k))
    spec = parse_cell("k --backend cuda", HEAD + IDIOMS["math constants (M_PI, M_SQRT2, M_LN2)"])
    config = spec.space.config(BLOCK=256)
    variant = gpu_backend.compile(spec, config)
    report = gpu_backend.static_report(spec, config)
    (cubin, name), = FakeRawModule.loaded
    assert cubin == report.cubin and name == "_Z1kPfPKfi" and variant.expr == "k"
    assert len(calls) == 1


@needs_nvcc
def test_the_run_loads_the_cubin_while_the_report_thread_reads_its_sass(
        gpu_backend: CudaBackend, monkeypatch) -> None:
    """The run waits for nvcc, not for the disassembler (issue 33): while the report thread
    reads the SASS of the one build, the run loads its cubin; the report gets the mix after."""
    from jupyter_ktune.measure import sass

    reading, release = threading.Event(), threading.Event()
    real = sass.disassemble

    def held(path):
        reading.set()
        assert release.wait(10), "the run never came back while the SASS was read"
        return real(path)

    monkeypatch.setattr(sass, "disassemble", held)
    spec = parse_cell("k --backend cuda", HEAD + IDIOMS["math constants (M_PI, M_SQRT2, M_LN2)"])
    config = spec.space.config(BLOCK=128)
    with ThreadPoolExecutor(1) as pool:
        report = pool.submit(gpu_backend.static_report, spec, config)
        assert reading.wait(120), "nvcc never finished"
        variant = gpu_backend.compile(spec, config)
        loaded_before_the_sass = not report.done()
        release.set()
        done = report.result()
    assert loaded_before_the_sass and variant.expr == "k"
    (cubin, name), = FakeRawModule.loaded
    assert cubin == done.cubin and done.kernels[name].sass is not None
    assert not done.sass_error and "disassembler" in done.versions


PIPELINE = """// ktune: BLOCK in [128, 256]
// ktune: pipeline = [partials(grid=cdiv(n, BLOCK), block=BLOCK), total(grid=1, block=BLOCK)]
template <int BLOCK>
__global__ void partials(const float* x, float* partial, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) partial[blockIdx.x] = x[i] * (float)M_PI;
}
__global__ void total(const float* partial, float* out, int n) { out[0] = partial[0] + BLOCK; }
"""


@needs_nvcc
def test_a_pipeline_runs_every_stage_from_the_one_cubin(gpu_backend: CudaBackend) -> None:
    spec = parse_cell("partials --backend cuda", PIPELINE)
    variant = gpu_backend.compile(spec, spec.space.config(BLOCK=128))
    report = gpu_backend.static_report(spec, spec.space.config(BLOCK=128))
    assert [n for _, n in FakeRawModule.loaded] == ["_Z8partialsILi128EEvPKfPfi",
                                                    "_Z5totalPKfPfi"]
    assert {c for c, _ in FakeRawModule.loaded} == {report.cubin}
    assert variant.expr == "partials<128> -> total"


def test_without_nvcc_the_run_is_nvrtcs_build_with_the_prelude(monkeypatch) -> None:
    """No nvcc on the GPU machine: NVRTC builds, and is given nvcc's macros and headers."""
    seen: dict[str, Any] = {}

    class Nvrtc:
        def __init__(self, code: str, options: tuple[str, ...], name_expressions: list[str]):
            seen.update(code=code, options=options)

        def get_function(self, name: str) -> Any:
            return types.SimpleNamespace(num_regs=8)

    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(RawModule=Nvrtc))
    monkeypatch.setattr(archcubin, "find_tool", lambda name: (_ for _ in ()).throw(
        archcubin.ToolNotFound("no nvcc")))
    b = CudaBackend()
    b.__dict__["_device"] = DeviceInfo(True, "fake H200", compute_capability="9.0")
    spec = parse_cell("k --backend cuda", HEAD + IDIOMS["INFINITY and NAN"])
    b.compile(spec, spec.space.config(BLOCK=128))
    assert "--pre-include=ktune_nvrtc.h" in seen["options"]
    assert any(o.endswith("include/nvrtc") for o in seen["options"])
    assert macro_defines(spec, parse_signature(spec), {"BLOCK": 128}) == {"BLOCK": "128",
                                                                         "KTUNE": "1"}
