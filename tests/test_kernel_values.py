"""Tunables as a Python kernel (Triton, Pallas) receives them: their values, not the C++ index."""

from __future__ import annotations

import ast

from jupyter_ktune.backends.triton.params import param_kinds
from jupyter_ktune.space import Config, Param, Space


def test_python_kernels_get_values_and_cxx_keeps_integers():
    space = Space((Param("ACT", ("relu", "leaky_relu")), Param("SWZ", ("none", "128B")),
                   Param("MODE", ("none", "fast")), Param("FLAG", ("False", "True")),
                   Param("SCALE", ("0.5", "1e-3")), Param("BLOCK", (64, 128))))
    config = Config(dict(ACT="leaky_relu", SWZ="128B", MODE="none", FLAG="False", SCALE="1e-3",
                         BLOCK=128))
    assert space.py_env(config) == dict(ACT="leaky_relu", SWZ=128, MODE="none", FLAG=False,
                                        SCALE=0.001, BLOCK=128)
    assert space.py_env(config)["FLAG"] is False
    # C++ cannot take strings: names are their index, swizzles their byte span (as before)
    assert space.cxx_env(config) == dict(ACT=1, SWZ=128, MODE=0, FLAG=0, SCALE=1, BLOCK=128)


def test_parameter_kinds_come_from_annotations_defaults_and_uses():
    kernel = ast.parse('''
def k(x, n: int, s: float, BLOCK: tl.constexpr, ACT: tl.constexpr, MODE: tl.constexpr = "a",
      EVEN: tl.constexpr = False, MIXED: tl.constexpr = None, UNUSED: tl.constexpr = None):
    offs = tl.arange(0, BLOCK)
    if ACT == "leaky_relu":
        pass
    if MIXED == "x":
        y = MIXED + 1
''').body[0]
    assert param_kinds(kernel) == dict(n=int, s=float, BLOCK=int, ACT=str, MODE=str, EVEN=bool)
