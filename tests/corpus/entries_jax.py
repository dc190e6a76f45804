"""Pallas kernels of the corpus from JAX itself: ``jax.experimental.pallas.ops`` (gpu: the
Triton-lowering softmax, layer norm, RMS norm, flash, decode and paged attention; tpu:
matmul, the example kernel), as JAX ships them.

The ops are ``jax.jit`` functions over the arrays whose tunables are static keywords (the cell
contract's "op itself"), some under ``jax.custom_vjp``: a factory (ours) calls the forward
(``.fun``, the jitted function under the custom VJP) with the config's values. The gpu ops run
in interpret mode on a CPU (the ops pass ``interpret=False``; ktune's global switch still
interprets them) and through Pallas' Triton lowering on the H200.
"""

from __future__ import annotations

import numpy as np

from corpus.harness import Entry

GPU = "jax.experimental.pallas.ops.gpu"
TPU = "jax.experimental.pallas.ops.tpu"
JAX = "jax"
_LINE = "--inputs inputs --reference reference --out y --budget-ms 5"


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def softmax_inputs(m=8, n=200):
    return dict(x=np.random.randn(m, n).astype(np.float32), y=np.empty((m, n), np.float32))


def softmax_reference(x, **_):
    return _softmax(x)


def norm_inputs(b=2, s=4, n=256):
    return dict(x=np.random.randn(b, s, n).astype(np.float32),
                weight=np.random.rand(n).astype(np.float32),
                bias=np.random.rand(n).astype(np.float32), y=np.empty((b, s, n), np.float32))


def layer_norm_reference(x, weight, bias, **_):
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * weight + bias


def rms_norm_reference(x, weight, bias, **_):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * weight + bias


def mha_inputs(b=1, s=64, h=2, d=32):
    q, k, v = (np.random.randn(b, s, h, d).astype(np.float32) / 2 for _ in range(3))
    return dict(q=q, k=k, v=v, y=np.empty_like(q))


def _attention(q, k, v, causal=False):
    s = np.einsum("bqhd,bkhd->bhqk", q, k)
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    return np.einsum("bhqk,bkhd->bqhd", _softmax(s), v)


def mha_reference(q, k, v, **_):
    return _attention(q, k, v)


def mha_causal_reference(q, k, v, **_):
    return _attention(q, k, v, causal=True)


_MHA = '''
def jax_gpu_mha{suffix}(block_q, block_k, num_warps, num_stages):
    sizes = BlockSizes(block_q=block_q, block_k=block_k)
    def run(q, k, v):
        return mha.fun(q, k, v, None, sm_scale=1.0, causal={causal}, block_sizes=sizes,
                       num_warps=num_warps, num_stages=num_stages)
    return run
'''


def mqa_inputs(b=2, h=16, s=256, d=32):
    return dict(q=np.random.randn(b, h, d).astype(np.float32) / 2,
                k=np.random.randn(b, s, d).astype(np.float32) / 2,
                v=np.random.randn(b, s, d).astype(np.float32), y=np.empty((b, h, d), np.float32))


def mqa_reference(q, k, v, **_):
    s = np.einsum("bhd,bkd->bhk", q, k) / np.sqrt(q.shape[-1])
    return np.einsum("bhk,bkd->bhd", _softmax(s), v)


def gqa_inputs(b=2, hq=16, hkv=4, s=256, d=32):
    return dict(q=np.random.randn(b, hq, d).astype(np.float32) / 2,
                k=np.random.randn(b, s, hkv, d).astype(np.float32) / 2,
                v=np.random.randn(b, s, hkv, d).astype(np.float32),
                y=np.empty((b, hq, d), np.float32))


def gqa_reference(q, k, v, **_):
    groups = q.shape[1] // k.shape[2]
    k, v = np.repeat(k, groups, axis=2), np.repeat(v, groups, axis=2)
    s = np.einsum("bhd,bkhd->bhk", q, k) / np.sqrt(q.shape[-1])
    return np.einsum("bhk,bkhd->bhd", _softmax(s), v)


def paged_inputs(b=2, hq=16, hkv=4, d=32, page=16, per_seq=8):
    pages = b * per_seq
    tables = np.random.permutation(pages).reshape(b, per_seq).astype(np.int32)
    return dict(q=np.random.randn(b, hq, d).astype(np.float32) / 2,
                k_pages=np.random.randn(hkv, pages, page, d).astype(np.float32) / 2,
                v_pages=np.random.randn(hkv, pages, page, d).astype(np.float32),
                block_tables=tables, lengths=np.full(b, per_seq * page, np.int32),
                y=np.empty((b, hq, d), np.float32))


def paged_reference(q, k_pages, v_pages, block_tables, **_):
    def gather(pages):  # [hkv, pages, page, d] -> [b, seq, hkv, d]
        g = pages[:, block_tables]  # [hkv, b, per_seq, page, d]
        return g.reshape(g.shape[0], g.shape[1], -1, g.shape[-1]).transpose(1, 2, 0, 3)
    k, v = gather(k_pages), gather(v_pages)
    groups = q.shape[1] // k.shape[2]
    k, v = np.repeat(k, groups, axis=2), np.repeat(v, groups, axis=2)
    s = np.einsum("bhd,bkhd->bhk", q, k)  # the op's default sm_scale is 1
    return np.einsum("bhk,bkhd->bhd", _softmax(s), v)


def matmul_inputs(m=256, k=512, n=256):
    return dict(x=np.random.randn(m, k).astype(np.float32) / 8,
                y_in=np.random.randn(k, n).astype(np.float32) / 8, y=np.empty((m, n), np.float32))


def matmul_reference(x, y_in, **_):
    return x @ y_in


_MATMUL = '''
LOWERINGS = ["tpu", "interpret"]  # written for a TPU; elsewhere interpret mode, host time
def jax_tpu_matmul(bm, bn, bk):
    def run(x, y_in):
        return matmul(x, y_in, block_shape=(bm, bn), block_k=bk)
    return run
'''


def double_inputs(n=1024):
    return dict(x=np.random.randn(8, n).astype(np.float32), y=np.empty((8, n), np.float32))


def double_reference(x, **_):
    return 2 * x


_NORM_FACTORY = '''
def {name}(num_warps, num_stages):
    def run(x, weight, bias):
        return {op}.fun(x, weight, bias, num_warps=num_warps, num_stages=num_stages)
    return run
'''
_LN_TAKE = ("imports", "layer_norm_forward_kernel", "layer_norm")
_RMS_TAKE = ("imports", "rms_norm_forward_kernel", "rms_norm")
_MHA_TAKE = ("imports", "DEFAULT_MASK_VALUE", "BlockSizes", "mha_forward_kernel", "segment_mask",
             "mha")
_DECODE_TAKE = ("imports", "attn_forward_kernel", "decode_attn_unbatched")

JAX_PALLAS = [
    Entry("jax-gpu-softmax", "pallas", JAX, f"{GPU}.softmax:softmax",
          "jax.jit op, tunable as a static keyword; jax.vmap of a grid-less pallas_call",
          softmax_inputs, softmax_reference, _LINE, "# ktune: num_warps in [1, 4]",
          take=("imports", "_vmappable_softmax_kernel")),
    Entry("jax-gpu-layer-norm", "pallas", JAX, f"{GPU}.layer_norm:layer_norm",
          "custom_vjp over jit; vmap of vmap; fori_loop over masked plgpu.load blocks",
          norm_inputs, layer_norm_reference, _LINE,
          "# ktune: num_warps in [1, 4]; num_stages in [1, 3]", take=_LN_TAKE[:-1],
          wrapper=_NORM_FACTORY.format(name="jax_gpu_layer_norm", op="layer_norm")),
    Entry("jax-gpu-rms-norm", "pallas", JAX, f"{GPU}.rms_norm:rms_norm",
          "the RMS variant: custom_vjp over jit, masked loads with eviction policy",
          norm_inputs, rms_norm_reference, _LINE,
          "# ktune: num_warps in [1, 4]; num_stages in [1, 3]", take=_RMS_TAKE[:-1],
          wrapper=_NORM_FACTORY.format(name="jax_gpu_rms_norm", op="rms_norm")),
    Entry("jax-gpu-mha", "pallas", JAX, f"{GPU}.attention:mha",
          "flash attention forward: frozen slotted BlockSizes dataclass, online softmax in a "
          "fori_loop, segment masks", mha_inputs, mha_reference, _LINE,
          "# ktune: block_q in [32, 64]; block_k in [32, 64]; num_warps in [4]; "
          "num_stages in [2]", take=_MHA_TAKE[:-1],
          wrapper=_MHA.format(suffix="", causal=False)),
    Entry("jax-gpu-mha-causal", "pallas", JAX, f"{GPU}.attention:mha",
          "the same kernel, causal: the loop bound depends on the query block",
          mha_inputs, mha_causal_reference, _LINE,
          "# ktune: block_q in [32, 64]; block_k in [32]; num_warps in [4]; num_stages in [2]",
          take=_MHA_TAKE[:-1], wrapper=_MHA.format(suffix="_causal", causal=True)),
    Entry("jax-gpu-decode-mqa", "pallas", JAX, f"{GPU}.decode_attention:mqa",
          "split-K decode attention: vmap over the batch, a second pass combining the splits",
          mqa_inputs, mqa_reference, _LINE,
          "# ktune: block_h in [16]; block_k in [32, 64]; k_splits in [2, 4]",
          take=_DECODE_TAKE),
    Entry("jax-gpu-decode-gqa", "pallas", JAX, f"{GPU}.decode_attention:gqa",
          "grouped-query decode: heads regrouped around mqa's inner kernel",
          gqa_inputs, gqa_reference, _LINE,
          "# ktune: block_h in [16]; block_k in [32, 64]; k_splits in [2, 4]",
          take=(*_DECODE_TAKE, "mqa")),
    Entry("jax-gpu-paged-attention", "pallas", JAX, f"{GPU}.paged_attention:paged_attention",
          "paged KV cache: block tables gathered in the kernel, split-K over page blocks, "
          "optional quantized-scale arguments left None", paged_inputs, paged_reference, _LINE,
          "# ktune: block_h in [16]; pages_per_compute_block in [2, 4]; k_splits in [2]",
          take=("imports", "DEFAULT_MASK_VALUE", "paged_attention_kernel",
                "paged_attention_unbatched")),
    Entry("jax-tpu-matmul", "pallas", JAX, f"{TPU}.matmul:matmul",
          "Mosaic TPU matmul: PrefetchScalarGridSpec, VMEM accumulator scratch, pl.when on "
          "the k axis", matmul_inputs, matmul_reference, _LINE,
          "# ktune: bm in [128]; bn in [128, 256]; bk in [128, 256]",
          take=("imports", "matmul_kernel"), wrapper=_MATMUL),
    Entry("jax-tpu-double", "pallas", JAX, f"{TPU}.example_kernel:double",
          "the smallest pallas_call: no grid, no block specs", double_inputs, double_reference,
          _LINE, take=("imports", "double_kernel")),
]
