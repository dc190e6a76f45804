"""Several CUDA kernels of one cell as a pipeline (issue 18): a two-stage reduction.

The directive is parsed into stages with their geometry; nvcc compiles every stage for the
static report (no GPU needed); binding shares each device array between the stages, and the
pipeline launches its stages in order as one launch (checked with stand-ins for the CuPy
bindings, as this machine has no GPU; ``bench/pipeline_reduction.py`` runs it on an H200).
"""

from __future__ import annotations

import numpy as np
import pytest
from cuda_tools import needs_nvcc

from jupyter_ktune.api import parse_cell
from jupyter_ktune.backends.cuda.backend import CudaBackend
from jupyter_ktune.backends.cuda.pipeline import (
    PipelineBound,
    PipelineVariant,
    kernels,
    parse_pipeline,
)
from jupyter_ktune.errors import CellError

REDUCTION = """\
// ktune: BLOCK in [128, 256]
// ktune: pipeline = [partials(grid=cdiv(n, BLOCK), block=BLOCK), total(grid=1, block=BLOCK)]
template <int BLOCK>
__global__ void partials(const float* x, float* partial, int n) {
  __shared__ float s[BLOCK];
  int i = blockIdx.x * BLOCK + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : 0.f;
  __syncthreads();
  for (int k = BLOCK / 2; k > 0; k /= 2) {
    if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

__global__ void total(const float* partial, float* out, int n) {
  if (threadIdx.x == 0) {
    float acc = 0.f;
    for (int b = 0; b < (n + BLOCK - 1) / BLOCK; ++b) acc += partial[b];
    out[0] = acc;
  }
}
"""


def inputs():
    x = np.random.rand(1000).astype(np.float32)
    return dict(x=x, partial=np.empty(8, np.float32), out=np.empty(1, np.float32), n=1000)


def _spec(body=REDUCTION):
    return parse_cell("partials --backend cuda --inputs inputs --out out", body,
                      {"inputs": inputs})


def test_the_pipeline_directive_gives_stages_with_their_geometry_and_outputs():
    spec = _spec()
    stages = parse_pipeline(spec)
    assert [(s.name, s.grid.text, s.block.text) for s in stages] == [
        ("partials", "cdiv(n, BLOCK)", "BLOCK"), ("total", "1", "BLOCK")]
    (first, sig1), (second, sig2) = kernels(spec)
    assert sig1.template_params == ("BLOCK",) and sig2.template_params == ()
    assert first.outputs == () and second.outputs == ("out",)  # out is total's parameter
    assert second.grid({"n": 1000, "BLOCK": 256}) == 1


@pytest.mark.parametrize("text, words", [
    ("pipeline = [partials(grid=1)]", "needs grid= and block="),
    ("pipeline = [partials(grid=1, block=2, blocks=3)]", "unknown argument 'blocks'"),
    ("pipeline = [partials]", "is not KERNEL(grid=..., block=...)"),
    ("pipeline = [missing(grid=1, block=32)]", "no __global__ kernel named 'missing'"),
])
def test_a_bad_pipeline_is_an_error_on_its_line(text, words):
    body = REDUCTION.replace(REDUCTION.splitlines()[1], f"// ktune: {text}")
    with pytest.raises(CellError) as e:
        CudaBackend().check(_spec(body))
    assert words in e.value.message
    assert e.value.line in (3, 1)  # the directive's line; a missing kernel names line 1


@needs_nvcc
def test_nvcc_compiles_every_stage_for_the_static_report(tmp_path, monkeypatch):
    monkeypatch.setenv("KTUNE_CACHE_DIR", str(tmp_path))
    spec = _spec()
    report = CudaBackend().static_report(spec, spec.space.config(BLOCK=256))
    names = sorted(k.demangled for k in report.kernels.values())
    assert names == ["total(float const*, float*, int)",
                     "void partials<256>(float const*, float*, int)"]
    assert report.threads_per_block == 256


class FakeStage:
    """A stage's CuPy binding: records launches, takes the arrays an earlier stage uploaded."""

    log: list[str] = []

    def __init__(self, name, params, outputs, shared):
        self.name, self.outputs = name, {o: ("dev", np.float32) for o in outputs}
        self.device_args = {p: shared.get(p, f"{name}:{p}") for p in params}
        self.variant = type("V", (), {"expr": name})()

    def launch(self):
        FakeStage.log.append(self.name)

    def poison_outputs(self):
        FakeStage.log.append(f"poison {self.name}")

    def read_outputs(self):
        return {o: np.full(1, 7.0) for o in self.outputs}

    def launch_info(self):
        return {"grid": (1, 1, 1), "block": (32, 1, 1), "kernel": self.name}


class FakeVariant:
    def __init__(self, name, params, outputs):
        self.name, self.params, self.outputs, self.expr = name, params, outputs, name
        self.fn = None

    def bind(self, host_args, shared):
        return FakeStage(self.name, self.params, self.outputs, shared)


def test_stages_share_device_arrays_and_launch_in_order_as_one_launch():
    spec = _spec()
    variant = PipelineVariant(spec, [FakeVariant("partials", ("x", "partial"), ()),
                                     FakeVariant("total", ("partial", "out"), ("out",))])
    bound = variant.bind(inputs())
    first, second = bound.stages
    assert second.device_args["partial"] == "partials:partial"  # written by 1, read by 2
    assert second.device_args["out"] == "total:out"
    FakeStage.log = []
    bound.poison_outputs()
    bound.launch()
    assert FakeStage.log == ["poison partials", "poison total", "partials", "total"]
    assert list(bound.read_outputs()) == ["out"]
    info = bound.launch_info()
    assert info["kernel"] == "partials -> total"
    assert [s["kernel"] for s in info["stages"]] == ["partials", "total"]


def test_an_output_that_no_stage_takes_is_an_error_on_the_pipeline_line():
    spec = parse_cell("partials --backend cuda --out nowhere", REDUCTION)
    with pytest.raises(CellError) as e:
        PipelineBound([FakeStage("partials", ("x",), (), {})], spec)
    assert e.value.line == 3 and "'nowhere'" in e.value.message
