"""Host-side Triton tensor descriptors whose block shape is the config's tile (issue 18).

The inputs function returns ``TensorDescriptor`` objects as a TMA kernel's caller builds them;
per config the block shape comes from the cell's ``a_desc.block_shape = [...]`` directive, or
from the kernel's own autotune pre-hook, as published kernels set it. Under the interpreter on
a CPU, every config must verify; a block shape that does not match the kernel's tile must fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from jupyter_ktune.api import run_kernel
from jupyter_ktune.results import Status
from jupyter_ktune.spec import parse_cell

pytest.importorskip("triton")
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("triton_interpreter")


def inputs(M=64, N=64):
    from triton.tools.tensor_descriptor import TensorDescriptor

    x = torch.randn(M, N)
    y = torch.empty(M, N)
    return dict(x_desc=TensorDescriptor.from_tensor(x, [1, 1]),
                y_desc=TensorDescriptor.from_tensor(y, [1, 1]), M=M, N=N)


def reference(x_desc, y_desc, M, N):
    return 2 * x_desc.base.numpy()


DIRECTIVES = """# ktune: BM in [16, 32]; BN in [16, 64]
# ktune: x_desc.block_shape = [BM, BN]; y_desc.block_shape = [BM, BN]
# ktune: grid = (cdiv(M, BM), cdiv(N, BN))
"""
KERNEL = """@triton.jit
def scale2d(x_desc, y_desc, M, N, BM: tl.constexpr, BN: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    tile = x_desc.load([pm * BM, pn * BN])
    y_desc.store([pm * BM, pn * BN], tile * 2)
"""
HOOKED = """def set_blocks(nargs):
    nargs["x_desc"].block_shape = [nargs["BM"], nargs["BN"]]
    nargs["y_desc"].block_shape = [nargs["BM"], nargs["BN"]]


# ktune: grid = (cdiv(M, BM), cdiv(N, BN))
@triton.autotune(configs=[triton.Config({"BM": bm, "BN": bn}, pre_hook=set_blocks)
                          for bm in (16, 32) for bn in (16, 64)], key=["M", "N"])
""" + KERNEL
LINE = "scale2d --backend triton --inputs inputs --reference reference --out y_desc --budget-ms 1"
NS = {"inputs": inputs, "reference": reference}


@pytest.mark.parametrize("config", [{"BM": 16, "BN": 64}, {"BM": 32, "BN": 16}])
def test_the_directive_gives_each_config_its_block(worker, config):
    r = run_kernel(parse_cell(LINE, DIRECTIVES + KERNEL, NS), config, worker=worker)
    assert r.status is Status.OK, r.reason


def test_the_kernels_own_pre_hook_sets_the_block(worker):
    spec = parse_cell(LINE, HOOKED, NS)
    assert spec.space.size == 4  # the decorator's list is the space
    r = run_kernel(spec, {"BM": 32, "BN": 64}, worker=worker)
    assert r.status is Status.OK, r.reason


def test_a_block_that_is_not_the_tile_fails_verification(worker):
    wrong = DIRECTIVES.replace("y_desc.block_shape = [BM, BN]", "y_desc.block_shape = [BM, 16]")
    r = run_kernel(parse_cell(LINE, wrong + KERNEL, NS), {"BM": 16, "BN": 64}, worker=worker)
    assert r.status is Status.COMPILE_ERROR and "shape" in r.reason, r.reason


def sums_inputs(M=1000):
    x = np.random.rand(M).astype(np.float32)
    return dict(x=x, partial=np.empty(1, np.float32), M=M)  # resized per config by directive


def sums_reference(x, M, config, **_):
    b = config["BLOCK"]
    return np.array([x[s:s + b].astype(np.float64).sum() for s in range(0, M, b)], np.float32)


PARTIAL_SUMS = """# ktune: BLOCK in [64, 256]
# ktune: grid = (cdiv(M, BLOCK),); partial.shape = (cdiv(M, BLOCK),)
@triton.jit
def block_sums(x, partial, M, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(partial + pid, tl.sum(tl.load(x + offs, mask=offs < M, other=0.0)))
"""
SUMS_LINE = ("block_sums --backend triton --inputs inputs --reference reference --out partial "
             "--budget-ms 1")


@pytest.mark.parametrize("block", [64, 256])
def test_an_output_sized_by_the_config_is_allocated_per_config(worker, block):
    spec = parse_cell(SUMS_LINE, PARTIAL_SUMS, {"inputs": sums_inputs, "reference": sums_reference})
    r = run_kernel(spec, {"BLOCK": block}, worker=worker)
    assert r.status is Status.OK, r.reason


def test_without_the_directive_the_buffer_is_too_small_and_says_so(worker):
    body = PARTIAL_SUMS.replace("; partial.shape = (cdiv(M, BLOCK),)", "")
    r = run_kernel(parse_cell(SUMS_LINE, body, {"inputs": sums_inputs,
                                                "reference": sums_reference}),
                   {"BLOCK": 64}, worker=worker)
    assert r.status is Status.WRONG and "past the end of `partial`" in r.reason, r.reason
