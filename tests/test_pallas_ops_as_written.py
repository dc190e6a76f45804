"""A Pallas op as its authors write it runs in a cell (issue 18, P2).

The op is a ``jax.jit(static_argnames=...)`` function over the arrays whose keyword arguments
are the tunables, built on ``functools.partial`` kernels, with no ``interpret=`` argument and no
factory or ``LOWERINGS`` for ktune. On a CPU it must run in interpret mode anyway.
"""

from __future__ import annotations

import numpy as np

from jupyter_ktune.api import parse_cell
from jupyter_ktune.results import Status

OP = """# ktune: block in [64, 128]; scale in [2, 3]
import functools

import jax
from jax.experimental import pallas as pl


def _kernel(x_ref, o_ref, *, scale):
    o_ref[...] = x_ref[...] * scale


@functools.partial(jax.jit, static_argnames=["block", "scale"])
def scaled(x, *, block=256, scale=1):
    spec = pl.BlockSpec((block,), lambda i: (i,))
    return pl.pallas_call(functools.partial(_kernel, scale=scale), grid=(x.size // block,),
                          in_specs=[spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
"""


def op_inputs():
    return dict(x=np.random.rand(512).astype(np.float32))


LINE = "scaled --backend pallas --inputs inputs --reference reference --out y --budget-ms 5"


def test_a_jitted_op_with_tunable_keywords_and_no_interpret_argument_runs_on_a_cpu(worker):
    spec = parse_cell(LINE, OP, {"inputs": op_inputs, "reference": lambda x, **_: x * 3})
    r = worker.run(spec, spec.space.config(block=128, scale=3))
    assert r.status is Status.OK, r.reason
    assert r.verification.passed and r.launch["lowering"] == "interpret"
    wrong = worker.run(spec, spec.space.config(block=64, scale=2))  # scale reached the kernel
    assert wrong.status is Status.WRONG, wrong.reason


def test_interpret_mode_lends_a_cpu_device_the_sm_count_of_the_gpu_it_stands_for():
    import jax

    from jupyter_ktune.backends.pallas.launch import INTERPRET_SM_COUNT, interpret_everywhere

    device = jax.devices()[0]
    assert not hasattr(device, "core_count")
    with interpret_everywhere(True):
        assert device.core_count == INTERPRET_SM_COUNT  # tokamax shapes grids by it
    assert not hasattr(device, "core_count")
    with interpret_everywhere(False):
        assert not hasattr(device, "core_count")


def test_an_exception_without_a_message_names_the_code_that_raised_it(tmp_path):
    from pathlib import Path

    from jupyter_ktune.backends.pallas.cell import cell_failure

    def lookup():
        raise AttributeError()

    try:
        lookup()
    except AttributeError as exc:
        failure = cell_failure(exc, tmp_path / "cell.py")
    text = failure.diagnostics[0].message
    assert text.startswith("AttributeError: raised in ") and "raise AttributeError()" in text
    assert Path(__file__).name in text
