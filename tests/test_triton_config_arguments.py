"""Host-side Triton tensor descriptors whose block shape is the config's tile (issue 18).

The inputs function returns ``TensorDescriptor`` objects as a TMA kernel's caller builds them;
per config the block shape comes from the cell's ``a_desc.block_shape = [...]`` directive, or
from the kernel's own autotune pre-hook, as published kernels set it. Under the interpreter on
a CPU, every config must verify; a block shape that does not match the kernel's tile must fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from jupyter_ktune.api import parse_cell, run_kernel
from jupyter_ktune.results import Status

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


def test_arrays_given_for_descriptors_get_the_fix_on_the_line_that_uses_them(worker):
    """Arrays where the kernel takes descriptors failed under the interpreter with "'tensor'
    object has no attribute 'load'" (issue 36): now one line names the fix."""
    def arrays():
        x = np.random.rand(64, 64).astype(np.float32)
        return dict(x_desc=x, y_desc=np.empty_like(x), M=64, N=64)

    spec = parse_cell(LINE, DIRECTIVES + KERNEL, {"inputs": arrays, "reference": reference})
    r = run_kernel(spec, {"BM": 16, "BN": 16}, worker=worker)
    assert r.status is not Status.OK and "has no attribute" not in r.reason, r.reason
    assert ("cell line 8: kernel parameter 'x_desc' is a tensor descriptor (x_desc.load/store "
            "on this line) but the inputs give it a ndarray") in r.reason, r.reason
    assert "x_desc=TensorDescriptor.from_tensor(array, [1, 1])" in r.reason


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


def _flag_gems_host_tma() -> str:
    """FlagGems' host-TMA GEMM, read from the installed package (its text, without FlagGems'
    own @libentry/@libtuner decorators, which need a GPU to import)."""
    import importlib.util
    from pathlib import Path

    found = importlib.util.find_spec("flag_gems")
    if found is None:
        pytest.skip("flag-gems is not installed (tests/corpus/requirements.txt)")
    path = Path(found.submodule_search_locations[0]) / "runtime/backend/_nvidia/hopper/ops/mm.py"
    text = path.read_text()
    start = text.index("@triton.jit\ndef mm_kernel_general_host_tma(")
    return text[start:text.index("\ndef ", start + 40)].rstrip() + "\n"


def tma_inputs(M=128, N=96, K=64):
    from triton.tools.tensor_descriptor import TensorDescriptor

    a, b = torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)
    c = torch.empty(M, N, dtype=torch.float16)
    d = lambda t: TensorDescriptor(t, t.shape, t.stride(), [1, 1])  # noqa: E731 - as FlagGems
    return dict(a_desc=d(a), b_desc=d(b), c_desc=d(c), M=M, N=N, K=K,
                stride_am=a.stride(0), stride_ak=a.stride(1), stride_bk=b.stride(0),
                stride_bn=b.stride(1), stride_cm=c.stride(0), stride_cn=c.stride(1),
                GROUP_M=8, A_ROW_MAJOR=True, B_ROW_MAJOR=True, dtype="float16")


def test_a_published_host_tma_gemm_compiles_with_each_configs_blocks(worker):
    """The interpreter cannot run this kernel (``(k * BLOCK_K).to(tl.int32)`` on a Python int,
    a Triton interpreter gap); its sm_90 compile can, and the tiles show in shared memory."""
    cell = ("# ktune: BLOCK_M in [32, 64]; BLOCK_N in [64]; BLOCK_K in [32]\n"
            "# ktune: a_desc.block_shape = [BLOCK_M, BLOCK_K]; "
            "b_desc.block_shape = [BLOCK_K, BLOCK_N]; c_desc.block_shape = [BLOCK_M, BLOCK_N]\n"
            "# ktune: grid = (cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N),)\n" + _flag_gems_host_tma())
    spec = parse_cell("mm_kernel_general_host_tma --backend triton --inputs inputs "
                      "--out c_desc --static-only", cell, {"inputs": tma_inputs})
    smem = {}
    for bm in (32, 64):
        r = run_kernel(spec, {"BLOCK_M": bm, "BLOCK_N": 64, "BLOCK_K": 32}, worker=worker)
        assert r.static is not None and not r.diagnostics, r.reason
        smem[bm] = next(iter(r.static.kernels.values())).smem_static
    assert smem[64] > smem[32] > 0, smem


def test_config_on_the_line_names_a_tunable_of_the_kernels_own_autotune_list():
    """``--config BLOCK_N=2048`` on liger's ``_dyt_fwd_kernel`` (read from the installed
    package), whose space is its own ``@triton.autotune`` list: the start config is that one.
    It was checked before the list became the space, and refused with "Parameters: (none)"."""
    pytest.importorskip("liger_kernel")
    from corpus.entries import BY_ID

    from jupyter_ktune.api import parse_cell
    from jupyter_ktune.errors import CellError

    entry = BY_ID["liger-dyt"]
    line, body, _changed = entry.cell()
    ns = {"inputs": entry.inputs, "reference": entry.reference}
    spec = parse_cell(line + " --config BLOCK_N=2048", body, ns)
    assert "BLOCK_N" in spec.space.names and spec.initial == {"BLOCK_N": "2048"}
    assert spec.space.config(spec.initial)["BLOCK_N"] == 2048
    with pytest.raises(CellError, match="cell line 1") as err:
        parse_cell(line + " --config BLOCK_N=3", body, ns)
    assert "BLOCK_N" in str(err.value) and "(none)" not in str(err.value)
