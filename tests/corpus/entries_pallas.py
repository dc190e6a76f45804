"""Pallas kernels of the corpus: tokamax's Pallas-Triton ops (normalization, gated linear unit).

A tokamax op is a frozen, slotted dataclass whose ``_fwd`` builds the ``pallas_call`` (through
tokamax's own ``block.pallas_call`` wrapper, with ``functools.partial`` kernels and a config
dataclass). The cell copies the kernel function and the op class verbatim; the factory that
today's cell contract asks for (``NAME(**tunables) -> callable``) is the only code we add.
"""

from __future__ import annotations

import numpy as np

from corpus.harness import Entry

NORM = "tokamax._src.ops.normalization.pallas_triton:PallasTritonNormalization"
GLU = "tokamax._src.ops.gated_linear_unit.pallas_triton:PallasTritonGatedLinearUnit"
_NORM_TAKE = ("imports", "Config", "Key", "FusedInputArray", "_NUM_REGISTERS_PER_SM",
              "_normalization_kernel")


def norm_inputs(m=16, n=128):
    return dict(x=np.random.randn(m, n).astype(np.float32),
                scale=np.random.rand(n).astype(np.float32),
                offset=np.random.rand(n).astype(np.float32), y=np.empty((m, n), np.float32))


def layer_norm_reference(x, scale, offset, **_):
    return (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-6) * scale \
        + offset


def rms_norm_reference(x, scale, offset, **_):
    return x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-6) * scale + offset


def _norm_factory(name: str, subtract_mean: bool) -> str:
    return f'''
def {name}(block_m, num_warps):
    op = PallasTritonNormalization()
    config = Config(block_m=block_m, block_n=None, num_warps=num_warps)
    def run(x, scale, offset):
        y, _ = op._fwd(x, scale, offset, axis=-1, epsilon=1e-6, scale_offset=0.0,
                       subtract_mean={subtract_mean}, return_residuals=False, config=config)
        return y
    return run
'''


def glu_inputs(m=32, k=64, n=64):
    return dict(x=np.random.randn(m, k).astype(np.float32) / 4,
                w=np.random.randn(k, 2, n).astype(np.float32) / 4, y=np.empty((m, n), np.float32))


def glu_reference(x, w, **_):
    gate, up = x @ w[:, 0], x @ w[:, 1]
    return gate / (1 + np.exp(-gate)) * up


_GLU_FACTORY = '''
def tokamax_glu(block_m, block_n, block_k, num_warps, num_stages):
    op = PallasTritonGatedLinearUnit()
    config = Config(block_m=block_m, block_n=block_n, block_k=block_k, num_warps=num_warps,
                    num_stages=num_stages)
    def run(x, w):
        y, _ = op._fwd(x, w, activation=jax.nn.silu, precision=jax.lax.Precision.DEFAULT,
                       return_residuals=False, config=config)
        return y
    return run
'''

TOK = "tokamax"
_LINE = "--inputs inputs --reference reference --out y --budget-ms 5"
PALLAS = [
    Entry("tokamax-layer-norm", "pallas", TOK, NORM,
          "frozen slotted dataclass op; tokamax's block.pallas_call wrapper (no interpret "
          "argument); functools.partial kernel; fuser", norm_inputs, layer_norm_reference,
          _LINE, "# ktune: block_m in [1, 2, 4]; num_warps in [1, 4]", take=_NORM_TAKE,
          wrapper=_norm_factory("tokamax_layer_norm", True)),
    Entry("tokamax-rms-norm", "pallas", TOK, NORM,
          "the same op with subtract_mean=False", norm_inputs, rms_norm_reference, _LINE,
          "# ktune: block_m in [1, 2, 4]; num_warps in [1, 4]", take=_NORM_TAKE,
          wrapper=_norm_factory("tokamax_rms_norm", False)),
    Entry("tokamax-glu", "pallas", TOK, GLU,
          "config dataclass (kw_only, slots); jaxtyping annotations; grid pid remapping helper",
          glu_inputs, glu_reference, _LINE,
          "# ktune: block_m in [16, 32]; block_n in [32, 64]; block_k in [32]; "
          "num_warps in [4]; num_stages in [2]",
          take=("imports", "Residuals", "_gated_linear_unit_kernel", "Config",
                "_get_best_block_size"),
          wrapper=_GLU_FACTORY),
]
