"""A CUDA cell's checks through CuPy on a real GPU, against the host read-back they replace.

Before torch's CUDA warm-up (a CUDA cell with a NumPy reference never asks for it on its first
run) the worker compares a CUDA variant's outputs and counts its changed inputs where they live,
with CuPy (``KTUNE_CUPY_CHECKS``). Here real kernels that are right, change an input, write NaN,
leave half the output unwritten, or get three elements wrong are verified both ways in this
process (torch is never warmed here): each verdict must be the host's, word for word, and the
CuPy way must read nothing back. Skipped where CuPy has no GPU (the CPU tests stand in with a
fake CuPy, tests/test_cuda_guards.py).
"""

from __future__ import annotations

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")
try:
    cupy.zeros(1)
except Exception as exc:  # noqa: BLE001 - no driver or no device
    pytest.skip(f"CuPy has no GPU here: {exc}", allow_module_level=True)

from jupyter_ktune.api import parse_cell  # noqa: E402
from jupyter_ktune.backends import get_backend  # noqa: E402
from jupyter_ktune.measure.verify_device import DeviceReference  # noqa: E402
from jupyter_ktune.runner.execute import _verify  # noqa: E402

CELL = """// ktune: FAULT in [0, 1, 2, 3, 4]; grid = cdiv(n, 128); block = 128
extern "C" __global__ void twice(float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
#if FAULT == 3
  if (i >= n / 2) return;  // half the output never written
#endif
  y[i] = 2.f * x[i];
#if FAULT == 1
  if (i < 10) x[i] = 0.f;  // changes its input
#elif FAULT == 2
  if (i >= n - 10) y[i] = nanf("");  // writes NaN
#elif FAULT == 4
  if (i < 3) y[i] = 1e4f;  // three wrong
#endif
}
"""
N = 1 << 20
WORDS = {0: None, 1: "the kernel changed input `x` (10 of", 2: "y: kernel wrote NaN/Inf at 10",
         3: "y: 524,288 of 1,048,576 elements never written", 4: "y: 3 of 1,048,576 elements"}


def verdict(fault: int, monkeypatch, cupy_checks: bool) -> tuple[bool, str]:
    monkeypatch.setenv("KTUNE_CUPY_CHECKS", "1" if cupy_checks else "0")
    monkeypatch.setattr("jupyter_ktune.backends.cuda.launch.warmed_torch", lambda: None)
    spec = parse_cell("twice --backend cuda --out y", CELL)
    variant = get_backend("cuda").compile(spec, spec.space.config({"FAULT": fault}))
    rng = np.random.default_rng(fault)
    host = {"x": rng.standard_normal(N).astype(np.float32), "y": np.empty(N, np.float32), "n": N}
    bound = variant.bind(host)
    if cupy_checks:
        for read in ("read_inputs", "read_outputs"):
            monkeypatch.setattr(type(bound), read,
                                lambda *a, r=read: pytest.fail(f"{r}: read back"))
    expected = {"y": 2 * host["x"]}
    v = _verify(spec, bound, expected, DeviceReference(expected), inputs=host)
    monkeypatch.undo()
    return v.passed, v.summary()


@pytest.mark.parametrize("fault", sorted(WORDS))
def test_the_cupy_checks_give_the_host_verdict(fault, monkeypatch):
    on_gpu = verdict(fault, monkeypatch, cupy_checks=True)
    on_host = verdict(fault, monkeypatch, cupy_checks=False)
    assert on_gpu == on_host
    passed, summary = on_gpu
    assert passed == (WORDS[fault] is None), summary
    assert WORDS[fault] is None or summary.startswith(WORDS[fault]), summary
