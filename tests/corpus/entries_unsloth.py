"""Triton kernels of the corpus from Unsloth (``unsloth.kernels``) and torchao, as their wheels
ship them.

Unsloth's modules import their siblings relatively (``from .utils import ...``), so the cell
takes the kernels and the jit helpers they call, not the module's imports: the cell's prelude
gives ``triton`` and ``tl``. Its RMS-norm backward is jitted and wrapped in
``triton.heuristics`` by assignment (``kernel = triton.jit(kernel, ...)``, then
``kernel = triton.heuristics({...})(kernel)``), the style issue 36 asked ktune to read.
Constexprs that describe the problem (strides, ``n_cols``, ``eps``, the flags) come from
``inputs()``, as Unsloth's launcher passes them.
"""

from __future__ import annotations

import numpy as np

from corpus.harness import Entry

R, C = 6, 200
UNS = "unsloth"
K = "unsloth.kernels"
_LINE = "--inputs inputs --reference reference --budget-ms 5"


def _pow2(n: int) -> int:
    return 1 << (int(n) - 1).bit_length()


def rms_inputs():
    x = np.random.randn(R, C).astype(np.float32)
    return dict(Y=np.empty_like(x), X=x, W=np.random.rand(C).astype(np.float32),
                r=np.empty(R, np.float32), Y_row_stride=C, X_row_stride=C, W_row_stride=1,
                r_row_stride=1, n_cols=C, eps=1e-6, LONG_INDEXING=False, BLOCK_SIZE=_pow2(C))


def _rstd(x, eps):
    return 1 / np.sqrt((x * x).mean(axis=1) + eps)


def rms_reference(X, W, eps, **_):
    r = _rstd(X, eps)
    return X * r[:, None] * W, r


def rms_backward_inputs():
    d = rms_inputs()
    x, w = d["X"], d["W"]
    return dict(dY=np.random.randn(R, C).astype(np.float32), dX=np.empty_like(x), X=x, W=w,
                r=_rstd(x, 1e-6).astype(np.float32), dW=np.random.rand(1, C).astype(np.float32),
                n_rows=R, rows_per_program=R, dY_row_stride=C, dX_row_stride=C, X_row_stride=C,
                W_row_stride=1, r_row_stride=1, n_cols=C, eps=1e-6, GEMMA=False,
                LONG_INDEXING=False, BLOCK_SIZE=_pow2(C), TRAIN_W=False, FROM_Y=False)


def rms_backward_reference(dY, X, W, r, n_cols, **_):
    normed, dyw = X * r[:, None], dY * W
    return r[:, None] / n_cols * (n_cols * dyw - normed * (dyw * normed).sum(1, keepdims=True))


def glu_inputs(n=R * C):
    e, g = np.random.randn(n).astype(np.float32), np.random.randn(n).astype(np.float32)
    return dict(e=e, g=g, h=np.empty_like(e), n_elements=n, LONG_INDEXING=False)


def swiglu_reference(e, g, **_):
    return e / (1 + np.exp(-e)) * g


def geglu_reference(e, g, **_):
    from math import erf

    return 0.5 * e * (1 + np.vectorize(erf)(e / np.sqrt(2))) * g


def ln_inputs():
    x = np.random.randn(R, C).astype(np.float32)
    return dict(Y=np.empty_like(x), X=x, W=np.random.rand(C).astype(np.float32),
                b=np.random.rand(C).astype(np.float32), r=np.empty(R, np.float32),
                mu=np.empty(R, np.float32), Y_row_stride=C, X_row_stride=C, n_cols=C, eps=1e-5,
                LONG_INDEXING=False, BLOCK_SIZE=_pow2(C))


def ln_reference(X, W, b, eps, **_):
    mu, r = X.mean(1), 1 / np.sqrt(X.var(1) + eps)
    return (X - mu[:, None]) * r[:, None] * W + b, r, mu


UNSLOTH = [
    Entry("unsloth-rms-norm", "triton", UNS, f"{K}.rms_layernorm:_rms_layernorm_forward",
          "row strides, n_cols and eps as constexprs from inputs; a LONG_INDEXING branch "
          "that widens the program id", rms_inputs, rms_reference, f"{_LINE} --out Y,r",
          f"# ktune: num_warps in [1, 4]; grid = ({R},)"),
    Entry("unsloth-rms-norm-backward", "triton", UNS,
          f"{K}.rms_layernorm:_rms_layernorm_backward",
          "jit and heuristics applied by assignment (kernel = triton.jit(kernel, "
          "do_not_specialize=...), then triton.heuristics({...})(kernel)); a jit helper with "
          "constexpr flags", rms_backward_inputs, rms_backward_reference, f"{_LINE} --out dX",
          f"# ktune: num_warps in [1, 4]; grid = ({R},)", take=("_rms_backward_row",)),
    Entry("unsloth-swiglu", "triton", UNS, f"{K}.swiglu:_fg_kernel",
          "1-D elementwise over a tunable block; result cast to the input dtype as HF does",
          glu_inputs, swiglu_reference, f"{_LINE} --out h",
          "# ktune: BLOCK_SIZE in [256, 1024]; grid = (cdiv(n_elements, BLOCK_SIZE),)"),
    Entry("unsloth-geglu-exact", "triton", UNS, f"{K}.geglu:_exact_forward_kernel",
          "tl.math.erf and tl.math.rsqrt of a literal", glu_inputs, geglu_reference,
          f"{_LINE} --out h",
          "# ktune: BLOCK_SIZE in [256, 1024]; grid = (cdiv(n_elements, BLOCK_SIZE),)"),
    Entry("unsloth-layer-norm", "triton", UNS, f"{K}.layernorm:layernorm_forward",
          "three outputs (y, rstd, mean); a defaulted constexpr (HAS_BIAS=True)",
          ln_inputs, ln_reference, f"{_LINE} --out Y,r,mu",
          f"# ktune: num_warps in [1, 4]; grid = ({R},)"),
]


# -- torchao ----------------------------------------------------------------------------------
# torchao.kernel.intmm_triton: int8 x int8 -> int32 GEMMs behind torch.library ops; the module
# imports torchao's own autotuner, so the cell takes the kernels only (the prelude has triton).
TAO = "torchao"
M_, N_, K_ = 64, 48, 96


def intmm_inputs():
    a = np.random.randint(-8, 8, (M_, K_)).astype(np.int8)
    b = np.random.randint(-8, 8, (K_, N_)).astype(np.int8)
    return dict(a_ptr=a, b_ptr=b, c_ptr=np.empty((M_, N_), np.int32), M=M_, N=N_, K=K_,
                stride_am=K_, stride_ak=1, stride_bk=N_, stride_bn=1, stride_cm=N_,
                stride_cn=1)


def intmm_reference(a_ptr, b_ptr, **_):
    return a_ptr.astype(np.int32) @ b_ptr.astype(np.int32)


def scaled_intmm_inputs():
    d = intmm_inputs()
    d.update(c_ptr=np.empty((M_, N_), np.float32), s1_ptr=np.random.rand(M_, 1).astype(
        np.float32), stride_s1m=1, stride_s1n=1, EVEN_K=K_ % 2 == 0)
    return d


def scaled_intmm_reference(a_ptr, b_ptr, s1_ptr, **_):
    return intmm_reference(a_ptr, b_ptr) * s1_ptr


_INTMM = ("# ktune: BLOCK_M in [32, 64]; BLOCK_N in [16, 32]; BLOCK_K in [32]; GROUP_M in [8]\n"
          "# ktune: grid = (cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N),)")
TORCHAO = [
    Entry("torchao-int-mm", "triton", TAO,
          "torchao.kernel.intmm_triton:matmul_kernel_with_block_pointers",
          "tl.make_block_ptr / tl.advance with boundary_check; an int8 dot into an int32 "
          "accumulator; a constexpr (GROUP_M) rebound inside the kernel",
          intmm_inputs, intmm_reference, f"{_LINE} --out c_ptr", _INTMM),
    Entry("torchao-scaled-int-mm", "triton", TAO,
          "torchao.kernel.intmm_triton:scaled_matmul_kernel_with_block_pointers",
          "inductor-style epilogue (row scales broadcast with eviction_policy); a constexpr "
          "defaulting to a dtype (ACC_TYPE=tl.int32); EVEN_K from inputs",
          scaled_intmm_inputs, scaled_intmm_reference, f"{_LINE} --out c_ptr", _INTMM),
]
