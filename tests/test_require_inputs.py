"""``require`` lines that read the inputs' values (issue 18): a block that must cover a row.

The inputs function returns the problem's sizes beside its arrays; a constraint names them
(``n``) or an array's shape (``x.shape[0]``) as it names a device limit. The inputs function is
called only when a constraint names something that is neither a tunable nor a limit.
"""

from __future__ import annotations

import numpy as np
import pytest

from jupyter_ktune.api import parse_cell, run_kernel
from jupyter_ktune.backends.base import DeviceInfo, limits_for

CALLS = {"n": 0}


def inputs(n=1000):
    CALLS["n"] += 1
    x = np.random.rand(n).astype(np.float32)
    return dict(x=x, out=np.empty_like(x), n=n)


def reference(x, out, n):
    return x * 2


KERNEL = """# ktune: BLOCK in pow2(64, 2048); num_warps in [2, 4]
# ktune: {require}
# ktune: grid = cdiv(n, BLOCK)
@triton.jit
def dbl(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) * 2, mask=m)
"""
LINE = "dbl --backend triton --inputs inputs --reference reference --out out"
NOWHERE = DeviceInfo(False, "none")


def spec_with(require: str, fn=inputs):
    return parse_cell(LINE, KERNEL.format(require=require), {"inputs": fn, "reference": reference})


@pytest.mark.parametrize("require, n, smallest", [
    ("require BLOCK * 4 >= n", 1000, 256),
    ("require BLOCK * 4 >= n", 5000, 2048),
    ("require BLOCK >= x.shape[0] // 8 and x.ndim == 1", 1000, 128),
    ("require BLOCK * x.itemsize >= 2048", 1000, 512),
])
def test_the_constraint_sees_the_inputs_values(require, n, smallest):
    spec = spec_with(require, lambda n=n: inputs(n))
    valid = [c["BLOCK"] for c in spec.space.configs(limits_for(spec, NOWHERE))]
    assert valid and min(valid) == smallest


def test_inputs_are_called_once_and_only_when_a_constraint_needs_them():
    CALLS["n"] = 0
    spec = spec_with("require BLOCK <= MAX_THREADS_PER_BLOCK * 2")  # a limit: no call
    list(spec.space.configs(limits_for(spec, NOWHERE)))
    assert CALLS["n"] == 0
    spec = spec_with("require BLOCK * 4 >= n")
    for _ in range(3):
        limits_for(spec, NOWHERE)
    assert CALLS["n"] == 1


def test_an_unknown_name_is_still_one_line_with_the_fix():
    spec = spec_with("require BLOCK >= rows")
    with pytest.raises(Exception, match=r"cell line 3: 'rows' in 'BLOCK >= rows' is neither"):
        list(spec.space.configs(limits_for(spec, NOWHERE)))


@pytest.mark.usefixtures("triton_interpreter")
def test_a_run_picks_a_config_that_covers_the_row(worker):
    pytest.importorskip("triton")
    r = run_kernel(spec_with("require BLOCK * 4 >= n"), worker=worker)
    assert r.status.value == "ok", r.reason
    assert r.config["BLOCK"] * 4 >= 1000
