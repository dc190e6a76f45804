"""Triton kernels whose decorators are applied by assignment (issue 36), a style of several
published packages: ``kernel = triton.jit(kernel_fn)``, and ``triton.heuristics(...)(fn)`` /
``triton.autotune(...)(fn)`` the same way. The cell is found, the autotune list becomes the
space, the heuristics' constexprs need no tunable, and the kernel runs (Triton's interpreter).
"""

from __future__ import annotations

import numpy as np
import pytest

from jupyter_ktune.api import parse_cell, run_kernel
from jupyter_ktune.backends.triton.cell import check_cell
from jupyter_ktune.errors import CellError
from jupyter_ktune.results import Status

N = 100


def inputs():
    x = np.random.rand(N).astype(np.float32)
    return dict(x=x, y=np.zeros_like(x), n=N)


def reference(x, **_):
    return x * 2


NS = {"inputs": inputs, "reference": reference}
LINE = "scale --backend triton --inputs inputs --reference reference --out y --budget-ms 2"
BODY = """
def _scale_kernel(x, y, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + o, tl.load(x + o, mask=o < n) * 2, mask=o < n)

"""
JIT = "# ktune: BLOCK in [32, 64]; grid = (cdiv(n, BLOCK),)\n" + BODY + \
    "scale = triton.jit(_scale_kernel)\n"
AUTOTUNE = "# ktune: grid = lambda META: (triton.cdiv(n, META['BLOCK']),)\n" + BODY + """
scale = triton.autotune(
    configs=[triton.Config({'BLOCK': 32}, num_warps=2), triton.Config({'BLOCK': 128})],
    key=['n'])(triton.jit(_scale_kernel))
"""
HEURISTICS = "# ktune: grid = (1,)\n" + BODY + """
scale = triton.heuristics({'BLOCK': lambda args: triton.next_power_of_2(args['n'])})(
    triton.jit(_scale_kernel, do_not_specialize=['n']))
"""


@pytest.mark.parametrize("src", [JIT, AUTOTUNE, HEURISTICS], ids=["jit", "autotune",
                                                                  "heuristics"])
def test_a_kernel_jitted_by_assignment_is_found_and_runs(src, worker):
    spec = parse_cell(LINE, src, NS)
    sig = check_cell(spec)
    assert sig.line == 4 and sig.constexprs == ("BLOCK",)
    if src is AUTOTUNE:  # the list applied by assignment is the space
        assert spec.space.param("BLOCK").values == (32, 128)
    if src is HEURISTICS:
        assert sig.heuristics == frozenset({"BLOCK"})
    r = run_kernel(spec, worker=worker)
    assert r.status is Status.OK, r.reason


def test_naming_the_function_under_the_assignment_names_the_kernels_name():
    spec = parse_cell(LINE.replace("scale", "_scale_kernel", 1), JIT, NS)
    with pytest.raises(CellError) as e:
        check_cell(spec)
    assert e.value.line == 4 and "jitted by assignment, as 'scale'" in e.value.message
    assert e.value.fix == "Name that on the magic line: %%kernel scale"
