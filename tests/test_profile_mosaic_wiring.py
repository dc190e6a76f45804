"""Pallas cycle breakdowns: the Mosaic GPU profiler wiring of ``profile_variant`` (issue 5).

The trace parser itself is tested in test_breakdown.py against a recorded H200 trace. Here:
the merging of ``profile_space``/``profile_dir`` into a cell's compiler params and the temporary
wrap of ``plgpu.kernel``/``pl.pallas_call`` (with fake modules, so this process never imports
JAX), the same merge against the installed JAX in the worker, and the one-line reasons a
profile request gets on a machine without Mosaic GPU.
"""

from __future__ import annotations

import dataclasses
import enum
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from jupyter_ktune.api import parse_cell
from jupyter_ktune.backends.pallas.cell import Target
from jupyter_ktune.backends.pallas.profile import (
    PROFILE_SPACE,
    profile_params,
    profiling_params,
    unprofilable_reason,
)
from jupyter_ktune.errors import CannotRun, KtuneError
from jupyter_ktune.ui.breakdown import request_breakdown


class TraceScope(enum.Enum):
    WARPGROUP = 0
    WARP = 1


@dataclasses.dataclass(frozen=True)
class MgpuParams:  # the shape of jax 0.10's plgpu.CompilerParams
    approx_math: bool = False
    max_concurrent_steps: int = 1
    profile_space: int = 0
    profile_dir: str = ""
    profile_trace_scope: TraceScope = TraceScope.WARPGROUP

    def __post_init__(self):
        if bool(self.profile_space) ^ bool(self.profile_dir):
            raise ValueError("Either both profile_space and profile_dir must be set, or neither.")


@dataclasses.dataclass(frozen=True)
class MgpuParams011(MgpuParams):  # jax 0.11 adds the bounds check
    profile_bounds_check: bool = False


@dataclasses.dataclass(frozen=True)
class TritonParams:
    num_warps: int = 4


def fake_modules(params_cls=MgpuParams):
    """Fake ``plgpu`` and ``pl`` whose entry points record what they were called with."""
    seen: list[tuple[str, object, dict]] = []

    def kernel(body=None, *, compiler_params=None, **kw):
        seen.append(("kernel", compiler_params, kw))
        return ("kernel", body)

    def pallas_call(body, *, compiler_params=None, **kw):
        seen.append(("pallas_call", compiler_params, kw))
        return ("pallas_call", body)

    plgpu = SimpleNamespace(CompilerParams=params_cls, TraceScope=TraceScope, kernel=kernel)
    pl = SimpleNamespace(pallas_call=pallas_call)
    return plgpu, pl, seen


# -- merging into the cell's compiler params -------------------------------------------------


def test_no_params_become_profiling_params():
    plgpu, _, _ = fake_modules()
    p = profile_params(None, plgpu, "/tmp/d")
    assert p == MgpuParams(profile_space=PROFILE_SPACE, profile_dir="/tmp/d")


def test_cell_params_are_kept_and_its_profile_space_wins():
    plgpu, _, _ = fake_modules()
    mine = MgpuParams(approx_math=True, max_concurrent_steps=3)
    p = profile_params(mine, plgpu, "/tmp/d", profile_space=64)
    assert (p.approx_math, p.max_concurrent_steps, p.profile_space, p.profile_dir) == \
        (True, 3, 64, "/tmp/d")
    own = MgpuParams(profile_space=512, profile_dir="/cell/dir")
    p = profile_params(own, plgpu, "/tmp/fresh")
    assert (p.profile_space, p.profile_dir) == (512, "/tmp/fresh")  # our fresh dir, their size
    assert mine.profile_space == 0  # replaced, not mutated


def test_bounds_check_is_switched_on_only_where_jax_has_it():
    plgpu, _, _ = fake_modules(MgpuParams011)
    assert profile_params(None, plgpu, "/d").profile_bounds_check is True
    plgpu, _, _ = fake_modules(MgpuParams)
    assert not hasattr(profile_params(None, plgpu, "/d"), "profile_bounds_check")


def test_other_backends_params_pass_through_untouched():
    plgpu, _, _ = fake_modules()
    tp = TritonParams(num_warps=8)
    assert profile_params(tp, plgpu, "/d") is tp


# -- the temporary wrap ----------------------------------------------------------------------


def test_plgpu_kernel_is_wrapped_then_restored():
    plgpu, pl, seen = fake_modules()
    real_kernel, real_call = plgpu.kernel, pl.pallas_call
    with profiling_params("/tmp/prof", plgpu, pl) as calls:
        assert plgpu.kernel is not real_kernel
        out = plgpu.kernel("body", compiler_params=MgpuParams(approx_math=True), grid=(4,),
                           num_threads=2)
    assert out == ("kernel", "body")
    assert plgpu.kernel is real_kernel and pl.pallas_call is real_call
    _, params, kw = seen[0]
    assert params == MgpuParams(approx_math=True, profile_space=PROFILE_SPACE,
                                profile_dir="/tmp/prof")
    assert kw == {"grid": (4,), "num_threads": 2}
    assert [(c.api, c.units_per_block, c.unit_kind) for c in calls] == \
        [("plgpu.kernel", 2, "warpgroup")]


def test_warp_trace_scope_counts_four_warps_per_warpgroup():
    plgpu, pl, _ = fake_modules()
    with profiling_params("/p", plgpu, pl) as calls:
        plgpu.kernel("b", compiler_params=MgpuParams(profile_trace_scope=TraceScope.WARP))
        plgpu.kernel("b")
    assert [(c.units_per_block, c.unit_kind) for c in calls] == [(4, "warp"), (1, "warpgroup")]


def test_pallas_call_is_profiled_only_when_it_lowers_to_mosaic_gpu():
    plgpu, pl, seen = fake_modules()
    flag_on = SimpleNamespace(jax_pallas_use_mosaic_gpu=True)
    with profiling_params("/p", plgpu, pl, jax_config=SimpleNamespace()) as calls:
        pl.pallas_call("b", compiler_params=TritonParams())
        pl.pallas_call("b")  # no params and no Mosaic default: Triton, left alone
        pl.pallas_call("b", compiler_params=MgpuParams())
    assert [p for _, p, _ in seen] == [TritonParams(), None,
                                       MgpuParams(profile_space=PROFILE_SPACE, profile_dir="/p")]
    assert [c.api for c in calls] == ["pl.pallas_call"]
    seen.clear()
    with profiling_params("/p", plgpu, pl, jax_config=flag_on) as calls:
        pl.pallas_call("b")  # JAX's flag makes a bare pallas_call a Mosaic GPU kernel
    assert seen[0][1] == MgpuParams(profile_space=PROFILE_SPACE, profile_dir="/p")
    assert len(calls) == 1


def test_other_threads_keep_building_plain_kernels():
    plgpu, pl, seen = fake_modules()
    with profiling_params("/p", plgpu, pl) as calls:
        t = threading.Thread(target=lambda: plgpu.kernel("static", compiler_params=None))
        t.start()
        t.join()
    assert seen == [("kernel", None, {})] and calls == []


def test_wrap_is_undone_when_the_cell_raises():
    plgpu, pl, _ = fake_modules()
    real = plgpu.kernel
    with pytest.raises(RuntimeError, match="cell failed"):
        with profiling_params("/p", plgpu, pl):
            raise RuntimeError("cell failed")
    assert plgpu.kernel is real


# -- the reasons ---------------------------------------------------------------------------


def test_reasons_per_lowering():
    assert unprofilable_reason("mosaic_gpu", ["mosaic_gpu"], "NVIDIA H200") is None
    cpu = unprofilable_reason("interpret", ["triton", "tpu", "interpret"], "CPU")
    assert "needs an NVIDIA Hopper GPU" in cpu and "interpret mode" in cpu
    tri = unprofilable_reason("triton", ["triton"], "NVIDIA A100")
    assert "Triton lowering has no scope profiler" in tri and "plgpu.kernel" in tri
    assert "ncu" in tri
    both = unprofilable_reason("triton", ["mosaic_gpu", "triton"], "NVIDIA A100")
    assert "LOWERINGS = ['mosaic_gpu']" not in both  # the cell already asks for it
    assert "Mosaic GPU" in unprofilable_reason("tpu", ["tpu"], "TPU v5")
    for text in (cpu, tri, both):
        assert "\n" not in text and text.startswith("[ktune]")


# -- through the worker ----------------------------------------------------------------------


ADD = """# ktune: BLOCK in [128]
import jax
from jax.experimental import pallas as pl


def add(BLOCK):
    def body(x_ref, y_ref, z_ref):
        with jax.named_scope("add"):
            z_ref[...] = x_ref[...] + y_ref[...]

    def run(x, y):
        spec = pl.BlockSpec((BLOCK,), lambda i: (i,))
        return pl.pallas_call(body, grid=(x.size // BLOCK,), in_specs=[spec, spec],
                              out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                              interpret=INTERPRET)(x, y)
    return run
"""


def add_inputs():
    x = np.random.rand(256).astype(np.float32)
    return dict(x=x, y=np.random.rand(256).astype(np.float32), z=np.empty_like(x))


def add_spec(src=ADD):
    return parse_cell("add --backend pallas --inputs inputs --out z --no-verify", src,
                      {"inputs": add_inputs})


def test_cpu_profile_request_is_a_one_line_reason(worker):
    spec = add_spec()
    with pytest.raises(KtuneError) as err:
        request_breakdown(worker, spec, spec.space.default(), timeout=120)
    text = str(err.value)
    assert "Mosaic GPU profiler needs an NVIDIA Hopper GPU" in text
    assert "interpret mode" in text and "Traceback" not in text and "\n" not in text


def test_mosaic_only_cell_is_refused_on_a_cpu_without_running(worker):
    src = 'LOWERINGS = ["mosaic_gpu"]\nimport os\nos.abort()\ndef add(BLOCK): pass\n'
    spec = add_spec("# ktune: BLOCK in [128]\n" + src)
    pid = worker.pid
    with pytest.raises(KtuneError, match=r"needs an NVIDIA Hopper GPU \(Mosaic GPU"):
        request_breakdown(worker, spec, spec.space.default(), timeout=120)
    assert worker.pid == pid  # the cell's os.abort() never ran


def _profile_on_pre_hopper_gpu(spec):
    """In the worker: profile_variant while the Pallas backend sees an A100 (Triton only)."""
    from jupyter_ktune.backends.pallas.backend import BACKEND
    from jupyter_ktune.runner.profile import profile_variant

    saved = BACKEND.__dict__.pop("target", None)
    BACKEND.__dict__["target"] = Target("gpu", "NVIDIA A100", ("triton",), "8.0", 108)
    try:
        profile_variant(spec, spec.space.default())
    except CannotRun as exc:
        return str(exc)
    finally:
        BACKEND.__dict__.pop("target", None)
        if saved is not None:
            BACKEND.__dict__["target"] = saved
    return "no CannotRun"


def test_triton_lowering_is_refused_with_the_reason(worker):
    text = worker.call(_profile_on_pre_hopper_gpu, add_spec(), timeout=120)
    assert text.startswith("[ktune] no cycle breakdown for this Pallas cell")
    assert "Triton lowering has no scope profiler" in text and "NVIDIA A100" in text


def _merge_with_installed_jax(folder):
    """In the worker: the merge and the wrapped signatures against the JAX installed here."""
    import inspect

    import jax
    from jax.experimental import pallas as pl

    try:
        from jax.experimental.pallas import mosaic_gpu as plgpu
    except ImportError as exc:  # e.g. a CPU-only JAX without absl-py: Mosaic GPU is not here
        return f"unavailable: {type(exc).__name__}: {exc}"
    mine = plgpu.CompilerParams(approx_math=True, max_concurrent_steps=2)
    p = profile_params(mine, plgpu, folder)
    kernel_args = inspect.signature(plgpu.kernel).parameters
    call_args = inspect.signature(pl.pallas_call).parameters
    real = plgpu.kernel
    with profiling_params(folder, plgpu, pl, jax.config) as calls:
        wrapped = plgpu.kernel is not real
        f = plgpu.kernel(lambda x_ref, o_ref: None,
                         out_type=jax.ShapeDtypeStruct((128,), jax.numpy.float32),
                         grid=(2,), grid_names=("g",), compiler_params=mine)
    return dict(type_ok=type(p) is plgpu.CompilerParams, approx=p.approx_math,
                steps=p.max_concurrent_steps, space=p.profile_space, dir=p.profile_dir,
                kernel_kw="compiler_params" in kernel_args and "num_threads" in kernel_args,
                call_kw="compiler_params" in call_args, warp=hasattr(plgpu.TraceScope, "WARP"),
                wrapped=wrapped, restored=plgpu.kernel is real, built=callable(f),
                calls=len(calls))


def test_merge_against_the_installed_jax(worker, tmp_path):
    r = worker.call(_merge_with_installed_jax, str(tmp_path), timeout=120)
    if isinstance(r, str):
        pytest.skip(f"Pallas Mosaic GPU cannot be imported here ({r})")
    assert r == dict(type_ok=True, approx=True, steps=2, space=PROFILE_SPACE, dir=str(tmp_path),
                     kernel_kw=True, call_kw=True, warp=True, wrapped=True, restored=True,
                     built=True, calls=1)
