"""Triton kernels as their authors write them (issue 18), run under the interpreter on a CPU.

Constexprs from ``inputs()``, ``@triton.autotune``/``@triton.heuristics`` above ``@triton.jit``
(the list is the space, hooks run), ``lambda META`` grids with ``triton.cdiv``, module-level
``get_current_target()``, jit helpers of earlier cells, float scalars and libdevice names under
the interpreter, a reference that takes the config, in-place outputs and ``--from``.
"""

from __future__ import annotations

import importlib.util
import re
import types

import numpy as np
import pytest

from jupyter_ktune.api import parse_cell, run_kernel
from jupyter_ktune.errors import CellError
from jupyter_ktune.results import Status

N = 100


def scale_inputs():
    x = np.random.rand(N).astype(np.float32) + 0.5
    return dict(x=x, y=np.empty_like(x), n=N, FACTOR=3, eps=0.25)


def scale_reference(x, **_):
    return x * 3


NS = {"inputs": scale_inputs, "reference": scale_reference}
LINE = "scale --backend triton --inputs inputs --reference reference --out y --budget-ms 2"

GIVEN = """# ktune: BLOCK in [32, 64]; grid = (cdiv(n, BLOCK),)
@triton.jit
def scale(x, y, n, FACTOR: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + o, tl.load(x + o, mask=o < n) * FACTOR, mask=o < n)
"""


def test_a_constexpr_given_by_the_inputs_needs_no_tunable(worker):
    r = run_kernel(parse_cell(LINE, GIVEN, NS), worker=worker)
    assert r.status is Status.OK, r.reason
    assert r.launch["constexprs"]["FACTOR"] == 3


def test_a_constexpr_nothing_gives_names_the_inputs_fix(worker):
    ns = {**NS, "inputs": lambda: {k: v for k, v in scale_inputs().items() if k != "FACTOR"}}
    r = run_kernel(parse_cell(LINE, GIVEN, ns), worker=worker)
    assert r.status is Status.RUNTIME_ERROR
    assert "cell line 4: constexpr parameter FACTOR of scale has no value" in r.reason
    assert "Return FACTOR from the inputs function" in r.reason


AUTOTUNE = """# ktune: grid = lambda META: (triton.cdiv(n, META['BLOCK']),)
@triton.autotune(configs=[triton.Config({'BLOCK': 32}, num_warps=2),
                          triton.Config({'BLOCK': 64}, num_warps=4),
                          triton.Config({'BLOCK': 128}, num_warps=4)],
                 key=['n'], reset_to_zero=['y'])
@triton.jit
def scale(x, y, n, FACTOR: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(y + o, tl.load(x + o, mask=o < n) * FACTOR, mask=o < n)
"""


def test_the_autotune_list_is_the_space_and_a_directive_narrows_it():
    spec = parse_cell(LINE, AUTOTUNE, NS)
    assert spec.space.names == ("BLOCK", "num_warps", "num_stages")
    assert spec.space.param("BLOCK").values == (32, 64, 128)
    valid = [dict(c) for c in spec.space.configs()]
    assert len(valid) == 3  # the listed combinations only, not the 3 x 2 product
    assert {"BLOCK": 32, "num_warps": 2, "num_stages": 3} in valid
    narrowed = parse_cell(LINE, "# ktune: BLOCK in [64, 256]\n" + AUTOTUNE, NS)
    assert narrowed.space.param("BLOCK").values == (64, 256)  # the directive wins


def test_an_autotuned_kernel_launches_its_config_with_reset_to_zero(worker):
    """The atomic_add accumulates into y: without reset_to_zero the poisoned y stays NaN."""
    spec = parse_cell(LINE, AUTOTUNE, NS)
    for block, warps in ((32, 2), (128, 4)):
        r = run_kernel(spec, {"BLOCK": block, "num_warps": warps}, worker=worker)
        assert r.status is Status.OK, r.reason
        assert r.launch["grid"] == (-(-N // block),)


def test_the_export_writes_the_cells_decorator_back():
    from jupyter_ktune.tuning.export import _cell_decorators

    decorators = _cell_decorators(parse_cell(LINE, AUTOTUNE, NS), "scale")
    assert decorators[0] == ("@triton.autotune(configs=configs, key=['n'], "
                             "reset_to_zero=['y'])")
    assert decorators[1] == "@triton.jit"


HEURISTICS = """# ktune: grid = (1,)
TARGET = triton.runtime.driver.active.get_current_target()
assert TARGET.backend == "cuda" and TARGET.arch == 90, TARGET

@triton.heuristics({'BLOCK': lambda args: triton.next_power_of_2(args['n'])})
@triton.jit
def scale(x, y, n, eps, FACTOR: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    v = tl.load(x + o, mask=o < n)
    e = eps.to(tl.float32)  # a float argument, wrapped under the interpreter too
    tl.store(y + o, tanh(v * FACTOR + e - e) * 0 + v * FACTOR, mask=o < n)
"""
LIBDEVICE = "from triton.language.extra.libdevice import tanh\n"


def test_heuristics_target_float_scalars_and_libdevice_under_the_interpreter(worker):
    r = run_kernel(parse_cell(LINE, LIBDEVICE + HEURISTICS, NS), worker=worker)
    assert r.status is Status.OK, r.reason
    assert r.launch["constexprs"]["BLOCK"] == 128


def test_a_reference_that_takes_the_config_gets_it_per_config(worker):
    def ref(x, FACTOR, config, **_):
        return x * FACTOR * config["BLOCK"]

    src = GIVEN.replace("* FACTOR, mask", "* FACTOR * BLOCK, mask")
    spec = parse_cell(LINE, src, {**NS, "reference": ref})
    for block in (32, 64):  # the same input set, two expected outputs
        r = run_kernel(spec, {"BLOCK": block}, worker=worker)
        assert r.status is Status.OK, r.reason


INPLACE = """# ktune: BLOCK in [64]; grid = (cdiv(n, BLOCK),)
@triton.jit
def scale(x, y, n, FACTOR: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + o, tl.load(x + o, mask=o < n) * FACTOR, mask=o < n)
"""


def test_an_output_that_is_also_read_is_not_poisoned(worker):
    line = LINE.replace("--out y", "--out x")
    r = run_kernel(parse_cell(line, INPLACE, NS), worker=worker)
    assert r.status is Status.OK, r.reason


def test_jit_helpers_of_earlier_cells_travel_with_the_cell(tmp_path, worker):
    path = tmp_path / "earlier_cell.py"
    path.write_text("@triton.jit\ndef triple(v):\n    return v * 3\n")
    module = types.ModuleType("earlier_cell")
    module.triton = types.SimpleNamespace(jit=lambda f: types.SimpleNamespace(fn=f))
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)  # noqa: S102
    src = GIVEN.replace("tl.load(x + o, mask=o < n) * FACTOR", "triple(tl.load(x + o, mask=o < n))")
    spec = parse_cell(LINE, src, {**NS, "triple": module.triple})
    assert "def triple(v)" in spec.helpers and "def triple" not in spec.source
    r = run_kernel(spec, worker=worker)
    assert r.status is Status.OK, r.reason


def test_grid_expressions_read_triton_helpers_and_python_fixes_use_hash():
    spec = parse_cell(LINE, GIVEN.replace("(cdiv(n, BLOCK),)",
                                          "(triton.cdiv(n, BLOCK), triton.next_power_of_2(n))"), NS)
    assert spec.grid({"n": 100, "BLOCK": 32}) == (4, 128)
    bad = parse_cell(LINE, GIVEN.replace("(cdiv(n, BLOCK),)", "(cdiv(m, BLOCK),)"), NS)
    with pytest.raises(CellError) as e:
        bad.grid({"n": 100, "BLOCK": 32})
    assert "# ktune: m in [...]" in e.value.fix and "//" not in e.value.fix


def test_a_compile_error_that_is_not_a_compilation_error_has_a_summary():
    from jupyter_ktune.backends.triton.static import failure

    f = failure(TypeError("module, class, method ... got JITFunction"), {})
    assert str(f) == "[ktune] TypeError: module, class, method ... got JITFunction"


def test_from_package_takes_what_the_kernel_needs_only():
    from jupyter_ktune.from_package import segments

    text = ("import os\nimport triton\nimport triton.language as tl\n\nSCALE = 2\n\n"
            "def unrelated():\n    return os.getcwd()\n\n"
            "@triton.jit\ndef helper(v):\n    return v * SCALE\n\n"
            "@triton.jit\ndef kernel(x):\n    tl.store(x, helper(tl.load(x)))\n")
    out = segments(text, "kernel")
    assert "def kernel" in out and "def helper" in out and "SCALE = 2" in out
    assert "import triton.language as tl" in out
    assert "unrelated" not in out and "import os" not in out


@pytest.mark.skipif(importlib.util.find_spec("liger_kernel") is None, reason="liger-kernel")
def test_from_reads_an_installed_kernel_and_runs_it(worker):
    def inputs():
        x = np.random.randn(4, 200).astype(np.float32)
        return dict(Y_ptr=np.empty_like(x), Y_row_stride=200, X_ptr=x, X_row_stride=200,
                    n_cols=200, BLOCK_SIZE=256)

    def reference(X_ptr, **_):
        e = np.exp(X_ptr - X_ptr.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    line = ("--from liger_kernel.ops.softmax:_softmax_single_block_forward_kernel "
            "--backend triton --inputs inputs --reference reference --out Y_ptr --budget-ms 2")
    spec = parse_cell(line, "# ktune: grid = (4,)\n", {"inputs": inputs, "reference": reference})
    assert spec.name == "_softmax_single_block_forward_kernel"
    assert re.fullmatch(r"liger_kernel\.ops\.softmax:\w+ \(liger.kernel \d+\.\d+\S*\)", spec.origin)
    assert "def _softmax_single_block_forward_kernel(" in spec.source
    r = run_kernel(spec, worker=worker)
    assert r.status is Status.OK, r.reason
