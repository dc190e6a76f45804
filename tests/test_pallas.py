"""Pallas backend on a CPU: interpret mode through the worker, cell-line errors, device detection.

JAX is imported only in the worker (``test_worker`` checks that the notebook process never does),
so everything that needs JAX here runs through the worker.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest
from example_notebooks import run_example

from jupyter_ktune.api import parse_cell
from jupyter_ktune.backends.pallas.backend import PallasBackend
from jupyter_ktune.backends.pallas.cell import DEFAULT_LOWERINGS, choose_lowering, detect_target
from jupyter_ktune.errors import CannotRun
from jupyter_ktune.results import Status


def add_inputs():
    x = np.random.rand(1024).astype(np.float32)
    return dict(x=x, y=np.random.rand(1024).astype(np.float32), z=np.empty_like(x), n=1024)


def add_reference(x, y, z, n):
    return x + y


ADD_OP = """# ktune: BLOCK in pow2(128, 512)
import jax
from jax.experimental import pallas as pl


def add(BLOCK):
    def body(x_ref, y_ref, z_ref):
        z_ref[...] = x_ref[...] OP y_ref[...]

    def run(x, y):
        spec = pl.BlockSpec((BLOCK,), lambda i: (i,))
        return pl.pallas_call(body, grid=(x.size // BLOCK,), in_specs=[spec, spec],
                              out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                              interpret=INTERPRET)(x, y)
    return run
"""
ADD = ADD_OP.replace("OP", "+")
ADD_LINE = "add --backend pallas --inputs inputs --reference reference --out z --budget-ms 5"
ADD_NS = {"inputs": add_inputs, "reference": add_reference}


def add_spec(src=ADD, line=ADD_LINE):
    return parse_cell(line, src, ADD_NS)


def mm_inputs():
    return dict(a=np.random.rand(64, 32).astype(np.float32),
                b=np.random.rand(32, 48).astype(np.float32))


def mm_reference(a, b):
    return a @ b


MATMUL = """# ktune: BM in [16, 32]; BN in [16]; BK in [8, 16]
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def mm(BM, BN, BK):
    def body(a_ref, b_ref, c_ref):
        def step(k, acc):
            a = a_ref[:, pl.ds(k * BK, BK)]
            b = b_ref[pl.ds(k * BK, BK), :]
            return acc + jnp.dot(a, b, preferred_element_type=jnp.float32)
        c_ref[...] = jax.lax.fori_loop(0, a_ref.shape[1] // BK, step,
                                       jnp.zeros((BM, BN), jnp.float32))

    def run(a, b):
        (M, K), N = a.shape, b.shape[1]
        return pl.pallas_call(
            body, grid=(M // BM, N // BN),
            in_specs=[pl.BlockSpec((BM, K), lambda i, j: (i, 0)),
                      pl.BlockSpec((K, BN), lambda i, j: (0, j))],
            out_specs=pl.BlockSpec((BM, BN), lambda i, j: (i, j)),
            out_shape=jax.ShapeDtypeStruct((M, N), a.dtype), interpret=INTERPRET)(a, b)
    return run
"""
MM_NS = {"inputs": mm_inputs, "reference": mm_reference}
MM_LINE = "mm --backend pallas --inputs inputs --reference reference --out c --budget-ms 5"


def test_vector_add_runs_verified_and_timed_as_interpret_host_time(worker):
    s = add_spec()
    r = worker.run(s, s.space.config(BLOCK=256))
    assert r.status is Status.OK, r.reason
    assert r.verification.passed and r.verification.max_abs_err == 0
    assert r.launch["lowering"] == "interpret"
    method = r.measurement.timing.method
    assert method.startswith("Pallas interpret mode, host time (not GPU time)")
    assert "no cache flush" in method and "L2" not in method
    assert r.measurement.timing.n >= 10 and r.static is None  # no fake static numbers on a CPU


def test_inputs_are_read_back_and_checked_without_a_note(worker):
    """Issue 15 item 6: the Pallas binding reads its inputs back (fresh copies, never the host
    arrays), so the check runs and says nothing; a NaN there is "never written, or NaN"."""
    s = add_spec()
    r = worker.run(s, s.space.config(BLOCK=256))
    assert r.status is Status.OK, r.reason
    assert r.verification.notes == () and r.verification.changed_inputs == ()


def test_small_matmul_is_correct_for_every_config(worker):
    s = parse_cell(MM_LINE, MATMUL, MM_NS)
    for config in s.space.configs():
        r = worker.run(s, config)
        assert r.status is Status.OK, (config, r.reason)
        assert r.verification.checks[0].size == 64 * 48


def test_wrong_result_and_unwritten_blocks_are_caught(worker):
    s = add_spec(ADD_OP.replace("OP", "-"))
    r = worker.run(s, s.space.default())
    assert r.status is Status.WRONG
    half = ADD.replace("z_ref[...] = x_ref[...] + y_ref[...]",
                       "@pl.when(pl.program_id(0) == 0)\n        def _():\n"
                       "            z_ref[...] = x_ref[...] + y_ref[...]")
    s = add_spec(half)
    r = worker.run(s, s.space.config(BLOCK=512))
    assert r.status is Status.WRONG
    assert r.verification.checks[0].unwritten == 512  # interpret mode fills outputs with NaN


def test_tracing_error_is_a_compile_error_on_its_cell_line(worker):
    # cell line 1 is the %%kernel line, so the body's line 8 is cell line 9
    s = add_spec(ADD.replace("y_ref[...]", "y_ref[:3]"))
    r = worker.run(s, s.space.default())
    assert r.status is Status.COMPILE_ERROR, r.reason
    assert [d.line for d in r.diagnostics] == [9]
    assert "cell line 9" in r.reason


def test_errors_in_the_factory_and_syntax_errors_name_their_lines(worker):
    s = add_spec(ADD.replace("    def body", "    undefined_name\n    def body"))
    r = worker.run(s, s.space.default())
    assert r.status is Status.COMPILE_ERROR
    assert r.diagnostics[0].line == 8 and "NameError" in r.diagnostics[0].message
    s = add_spec(ADD.replace("def add(BLOCK):", "def add(BLOCK)"))
    r = worker.run(s, s.space.default())
    assert r.status is Status.COMPILE_ERROR
    assert r.diagnostics[0].line == 7


def test_output_count_must_match_out(worker):
    ns = dict(ADD_NS, reference=lambda x, y, z, n: (x + y, x - y))
    s = parse_cell(ADD_LINE.replace("--out z", "--out z,w"), ADD, ns)
    r = worker.run(s, s.space.default())
    assert r.status is Status.RUNTIME_ERROR
    assert "returned 1 array(s) but --out names 2" in r.reason


def test_mosaic_gpu_cell_cannot_run_on_a_cpu_and_never_runs(worker):
    src = 'LOWERINGS = ["mosaic_gpu"]\nimport os\nos.abort()\ndef add(BLOCK): pass\n'
    s = add_spec("# ktune: BLOCK in [128]\n" + src)
    pid = worker.pid
    r = worker.run(s, s.space.default())
    assert r.status is Status.CANNOT_RUN
    assert "needs an NVIDIA Hopper GPU (Mosaic GPU" in r.reason
    assert "interpret mode" in r.reason and worker.pid == pid


MOSAIC_GPU = """# ktune: BLOCK in [128]
import functools
import jax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu


def double(BLOCK):
    def call(x):
        @functools.partial(plgpu.kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                           num_threads=2, thread_name="wg")
        def kernel(x_ref, o_ref):
            def body(smem):
                smem[...] = x_ref[...] * 2
                o_ref[...] = smem[...]
            pl.run_scoped(body, plgpu.SMEM(x.shape, x.dtype), collective_axes="wg")
        return kernel(x)
    return call
"""


def test_a_mosaic_gpu_kernel_without_lowerings_gets_the_import_line_and_the_fix(worker):
    """Without LOWERINGS a plgpu kernel ran in interpret mode and died inside JAX ("run_scoped
    interpret rule does not support collective axes") with no line; now the line that imports
    plgpu says what to add, and with it the cell is "cannot run here" on a CPU (issue 36)."""
    ns = {"inputs": lambda: dict(x=np.ones(256, np.float32)),
          "reference": lambda x, **_: {"o": 2 * x}}
    line = "double --backend pallas --inputs inputs --reference reference --out o"
    spec = parse_cell(line, MOSAIC_GPU, ns)
    r = worker.run(spec, spec.space.default())
    assert r.status is Status.COMPILE_ERROR
    assert r.reason.startswith("[ktune] cell line 6: this cell writes a Mosaic GPU kernel"), \
        r.reason
    assert "collective axes" in r.reason and "LOWERINGS = ['mosaic_gpu']" in r.reason
    fixed = parse_cell(line, MOSAIC_GPU.replace("import functools\n", "import functools\n"
                                                "LOWERINGS = ['mosaic_gpu']\n"), ns)
    r = worker.run(fixed, fixed.space.default())
    assert r.status is Status.CANNOT_RUN and "needs an NVIDIA Hopper GPU" in r.reason


def gpu(cc="9.0", kind="NVIDIA H200", cores=132):
    return SimpleNamespace(platform="gpu", device_kind=kind, compute_capability=cc,
                           core_count=cores)


def test_detect_target_from_device_lists():
    h200 = detect_target([gpu()])
    assert h200.platform == "gpu" and h200.offers == ("triton", "mosaic_gpu", "interpret")
    assert h200.compute_capability == "9.0" and h200.sm_count == 132
    a100 = detect_target([gpu("8.0", "NVIDIA A100", 108)])
    assert a100.offers == ("triton", "interpret")
    tpu = detect_target([SimpleNamespace(platform="tpu", device_kind="TPU v5 lite")])
    assert tpu.platform == "tpu" and tpu.offers == ("tpu",)
    cpu = detect_target([SimpleNamespace(platform="cpu", device_kind="cpu")])
    assert cpu.platform == "cpu" and cpu.offers == ("interpret",)


def test_lowering_choice_follows_the_cell_then_the_device():
    h200, a100 = detect_target([gpu()]), detect_target([gpu("8.0", "NVIDIA A100")])
    cpu = detect_target([SimpleNamespace(platform="cpu", device_kind="cpu")])
    assert choose_lowering(DEFAULT_LOWERINGS, h200) == "triton"
    assert choose_lowering(DEFAULT_LOWERINGS, cpu) == "interpret"
    assert choose_lowering(["mosaic_gpu", "triton"], h200) == "mosaic_gpu"
    assert choose_lowering(["mosaic_gpu", "triton"], a100) == "triton"
    with pytest.raises(CannotRun, match=r"Hopper GPU .*NVIDIA A100 \(compute capability 8.0\)"):
        choose_lowering(["mosaic_gpu"], a100)
    with pytest.raises(CannotRun, match="needs a TPU"):
        choose_lowering(["tpu"], cpu)
    # a TPU kernel is checked on a GPU machine in interpret mode, never under Triton
    assert choose_lowering(["tpu", "interpret"], h200) == "interpret"
    assert choose_lowering(DEFAULT_LOWERINGS, a100) == "triton"


def test_a_mosaic_tpu_kernel_without_lowerings_fails_under_triton_with_its_import_line():
    """On the H200 a published Mosaic TPU matmul (PrefetchScalarGridSpec, a VMEM scratch) ran
    under Pallas' Triton lowering and died in JAX with "assert rule is not None"
    (bench/results/corpus_h200): the failure now names the pltpu import and the LOWERINGS line."""
    import ast

    from jupyter_ktune.backends.pallas.cell import native_lowering, without_lowerings, written_for
    from jupyter_ktune.errors import CompileFailure

    src = ("import jax\nfrom jax.experimental import pallas as pl\n"
           "from jax.experimental.pallas import tpu as pltpu\ndef matmul(bm): pass\n")
    found = written_for(ast.parse(src))
    assert found is not None and found[0] == 3 and native_lowering(found) == "tpu"
    said = without_lowerings(CompileFailure("pallas", "AssertionError: assert rule is not None"),
                             found, "triton")
    d = said.diagnostics[0]
    assert d.line == 3 and "Mosaic TPU kernel (it imports pltpu)" in d.message
    assert "assert rule is not None" in d.message
    assert "LOWERINGS = ['tpu', 'interpret']" in d.message
    assert written_for(ast.parse("LOWERINGS = ['tpu']\n" + src)) is None
    gpu_cell = "from jax.experimental.pallas import mosaic_gpu as plgpu\n"
    assert native_lowering(written_for(ast.parse(gpu_cell))) == "mosaic_gpu"


def _backend_on(devices):
    """In the worker: a fresh backend that sees ``devices`` (jax.devices monkeypatched)."""
    import jax

    real = jax.devices
    jax.devices = (lambda *a, **k: devices) if devices is not None else real
    try:
        b = PallasBackend()
        info = b.device()
        timer = b.timer() if b.target.platform != "gpu" else None
        return b.target, info, getattr(timer, "name", None)
    finally:
        jax.devices = real


def test_backend_detection_with_a_monkeypatched_device_list(worker):
    target, info, _ = worker.call(_backend_on, [gpu()])
    assert target.offers == ("triton", "mosaic_gpu", "interpret")
    assert info.available and info.name == "NVIDIA H200" and info.compute_capability == "9.0"
    assert info.limits == {"SM_COUNT": 132}
    target, info, timer = worker.call(
        _backend_on, [SimpleNamespace(platform="tpu", device_kind="TPU v5 lite")])
    assert target.offers == ("tpu",) and "host time" in timer and "not device time" in timer
    target, info, timer = worker.call(_backend_on, None)
    assert target.platform == "cpu" and timer == "Pallas interpret mode, host time (not GPU time)"


def test_invalid_lowerings_literal_is_a_cell_error_on_its_line():
    s = add_spec("# ktune: BLOCK in [128]\nLOWERINGS = ['cuda']\ndef add(BLOCK): pass\n")
    with pytest.raises(Exception, match=r"cell line 3: unknown lowering 'cuda'"):
        PallasBackend().check(s)
    with pytest.raises(Exception, match="defines no function 'add'"):
        PallasBackend().check(add_spec("# ktune: BLOCK in [128]\nx = 1\n"))


def test_example_notebook_runs_on_this_machine():
    text = run_example("matmul_pallas.ipynb")
    lines = [ln for ln in text.splitlines() if re.match(r"[a-z][a-z ]* \| ", ln)]  # the prints
    matmul, mgpu = lines[0], lines[-1]
    assert matmul.startswith("ok | "), matmul
    if "| interpret |" in matmul:  # CPU: host time, and the Mosaic GPU cell says what it needs
        assert "Pallas interpret mode, host time (not GPU time)" in matmul
        assert mgpu.startswith("cannot run here | ")
        assert "needs an NVIDIA Hopper GPU (Mosaic GPU" in mgpu
    else:
        assert "CUPTI kernel records" in matmul


def test_an_interpret_mode_variant_on_a_gpu_is_timed_by_the_host_clock_and_says_so():
    """A TPU cell checked on the H200 in interpret mode failed in CUPTI's measure with a bare
    AssertionError (bench/results/corpus_h200): no kernel of its own to record."""
    from jupyter_ktune.backends.pallas.timing import CuptiTimer
    from jupyter_ktune.measure.timing import TimingPlan

    timer = object.__new__(CuptiTimer)  # its __init__ needs CUPTI; time() must not
    timer.name = "Pallas on NVIDIA H200"
    calls = []
    bound = SimpleNamespace(variant=SimpleNamespace(lowering="interpret"),
                            launch_and_wait=lambda: calls.append(1))
    t = timer.time(bound, TimingPlan(budget_ms=5, min_runs=3, max_runs=20))
    assert calls and t.n >= 3
    assert "interpret mode on NVIDIA H200, host time (not GPU time)" in t.method
