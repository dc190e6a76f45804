"""Triton kernels of the corpus: Liger-Kernel, flash-linear-attention, xformers and FlagGems.

Each entry's directives and inputs are written the way issue 18 says a user should be able to
write them: constexprs that are properties of the problem (a head size, a casting mode, a
``next_power_of_2`` block) come from ``inputs()``; the kernel's own ``@triton.autotune`` list
is left to speak for itself; grids are what the library's launcher uses.
"""

from __future__ import annotations

import numpy as np

from corpus.harness import Entry

R, C = 6, 200  # rows and columns of the row-wise kernels: C is not a power of two


def _pow2(n: int) -> int:
    return 1 << (int(n) - 1).bit_length()


def rows(seed_cols: int = C, *names: str) -> dict:
    """Random (R, C) float32 arrays named ``names``."""
    return {n: np.random.randn(R, seed_cols).astype(np.float32) for n in names}


# -- Liger-Kernel ---------------------------------------------------------------------------------
def liger_rms_inputs():
    d = rows(C, "X_ptr")
    return dict(Y_ptr=np.empty((R, C), np.float32), Y_row_stride=C, X_ptr=d["X_ptr"],
                X_row_stride=C, W_ptr=np.random.randn(C).astype(np.float32), W_row_stride=1,
                RSTD_ptr=np.empty(R, np.float32), RSTD_row_stride=1, n_cols=C, eps=1e-6,
                offset=0.0, casting_mode=0, elementwise_affine=True, BLOCK_SIZE=_pow2(C))


def liger_rms_reference(X_ptr, W_ptr, eps, offset, **_):
    rstd = 1 / np.sqrt((X_ptr * X_ptr).mean(axis=1) + eps)
    return X_ptr * rstd[:, None] * (offset + W_ptr), rstd


def liger_ln_inputs():
    x = np.random.randn(R, C).astype(np.float32)
    return dict(Y_ptr=np.empty_like(x), Y_row_stride=C, X_ptr=x, X_row_stride=C,
                W_ptr=np.random.randn(C).astype(np.float32), W_row_stride=1,
                B_ptr=np.random.randn(C).astype(np.float32), B_row_stride=1,
                Mean_ptr=np.empty(R, np.float32), Mean_row_stride=1,
                RSTD_ptr=np.empty(R, np.float32), RSTD_row_stride=1, n_cols=C, eps=1e-5,
                BLOCK_SIZE=_pow2(C))


def liger_ln_reference(X_ptr, W_ptr, B_ptr, eps, **_):
    mean = X_ptr.mean(axis=1)
    rstd = 1 / np.sqrt(X_ptr.var(axis=1) + eps)
    return (X_ptr - mean[:, None]) * rstd[:, None] * W_ptr + B_ptr, mean, rstd


def glu_inputs():
    a, b = np.random.randn(R, C).astype(np.float32), np.random.randn(R, C).astype(np.float32)
    return dict(a_ptr=a, b_ptr=b, c_ptr=np.empty_like(a), stride=C, gate_multiplier=1.0,
                n_cols=C, BLOCK_SIZE=_pow2(C))


def swiglu_reference(a_ptr, b_ptr, **_):
    return a_ptr / (1 + np.exp(-a_ptr)) * b_ptr


def geglu_inputs():
    d = glu_inputs()
    return dict(a=d["a_ptr"], b=d["b_ptr"], c=d["c_ptr"], stride=C, n_cols=C,
                BLOCK_SIZE=_pow2(C))


def geglu_reference(a, b, **_):
    return 0.5 * a * (1 + np.tanh(0.7978845608028654 * (a + 0.044715 * a ** 3))) * b


def liger_softmax_inputs():
    x = np.random.randn(R, C).astype(np.float32)
    return dict(Y_ptr=np.empty_like(x), Y_row_stride=C, X_ptr=x, X_row_stride=C, n_cols=C,
                BLOCK_SIZE=_pow2(C))


def softmax_rows(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def liger_softmax_reference(X_ptr, **_):
    return softmax_rows(X_ptr)


def dyt_inputs(M=4, N=300):
    return dict(X=np.random.randn(M, N).astype(np.float32), Y=np.empty((M, N), np.float32),
                Alpha=np.array([0.7], np.float32), Gamma=np.random.randn(N).astype(np.float32),
                Beta=np.random.randn(N).astype(np.float32), HAVE_BETA=True, N=N, M=M)


def dyt_reference(X, Alpha, Gamma, Beta, **_):
    return np.tanh(Alpha[0] * X) * Gamma + Beta


def rope_inputs(bs=2, sl=8, n_qh=4, n_kh=2, hd=16):
    q = np.random.randn(bs, sl, n_qh, hd).astype(np.float32)
    k = np.random.randn(bs, sl, n_kh, hd).astype(np.float32)
    half = np.random.rand(1, sl, hd // 2).astype(np.float32) * 3
    ang = np.concatenate([half, half], axis=-1)  # HF layout: the two halves repeat
    return dict(q_ptr=q, q_row_stride=n_qh * hd, k_ptr=k, k_row_stride=n_kh * hd,
                cos=np.cos(ang), cos_row_stride=hd, sin=np.sin(ang), sin_row_stride=hd, sl=sl,
                bs=bs, cos_bs=1, n_qh=n_qh, n_kh=n_kh, hd=hd, pad_n_qh=_pow2(n_qh),
                pad_n_kh=_pow2(n_kh), pad_hd=_pow2(hd), pad_rd=_pow2(hd), rd=hd,
                BLOCK_SIZE=max(_pow2(n_qh), _pow2(n_kh)),
                BACKWARD_PASS=False)


def rope_reference(q_ptr, k_ptr, cos, sin, hd, **_):
    def rot(x):
        c, s = cos[:, :, None, :], sin[:, :, None, :]
        x1, x2 = x[..., :hd // 2], x[..., hd // 2:]
        return x * c + np.concatenate([-x2, x1], axis=-1) * s
    return rot(q_ptr), rot(k_ptr)


# -- flash-linear-attention ---------------------------------------------------------------------
def fla_softmax_inputs(N=5, D=100):
    return dict(x=np.random.randn(N, D).astype(np.float32), p=np.empty((N, D), np.float32),
                D=D, B=_pow2(D), N=N)


def fla_softmax_reference(x, **_):
    return softmax_rows(x)


def fla_act_inputs(rows_=3, D=150):
    x = np.random.randn(rows_, D).astype(np.float32)
    return dict(x=x, y=np.empty_like(x), stride_x_row=D, stride_y_row=D, T=x.size, D=D)


def fla_sigmoid_reference(x, **_):
    return 1 / (1 + np.exp(-x))


def fla_swiglu_inputs(rows_=3, D=150):
    x, y = (np.random.randn(rows_, D).astype(np.float32) for _ in range(2))
    return dict(x=x, y=y, z=np.empty_like(x), stride_x_row=D, stride_y_row=D,
                stride_z_row=D, T=x.size, D=D)


def fla_swiglu_reference(x, y, **_):
    return x / (1 + np.exp(-x)) * y


def cumsum_inputs(B=2, T=40, H=3):
    return dict(s=np.random.randn(B, T, H).astype(np.float32),
                o=np.empty((B, T, H), np.float32), scale=None, cu_seqlens=None,
                chunk_indices=None, T=T, B=B, H=H, REVERSE=False)


def cumsum_reference(s, T, config, **_):
    bt = config["BT"]  # the output depends on the chunk size: the reference needs the config
    out = np.empty_like(s)
    for start in range(0, T, bt):
        out[:, start:start + bt] = np.cumsum(s[:, start:start + bt], axis=1)
    return out


# -- xformers -------------------------------------------------------------------------------------
def xf_rms_inputs():
    x = np.random.randn(R, C).astype(np.float32)
    return dict(x_ptr=x, h1_ptr=np.empty_like(x), w_ptr=np.random.randn(C).astype(np.float32),
                eps=1e-6, stride=C, N_COLS=C, INCLUDE_WEIGHT=True)


def xf_rms_reference(x_ptr, w_ptr, eps, **_):
    return x_ptr / np.sqrt((x_ptr ** 2).mean(axis=1, keepdims=True) + eps) * w_ptr


# -- FlagGems (its package does not import without a GPU: `libentry` and `runtime` go) ----------
def fg_rms_inputs():
    x = np.random.randn(R, C).astype(np.float32)
    return dict(out_ptr=np.empty_like(x), INV_RMS=np.empty(R, np.float32), in_ptr=x,
                w_ptr=np.random.randn(C).astype(np.float32), y_stride_r=C, y_stride_c=1,
                x_stride_r=C, x_stride_c=1, N=C, eps=1e-5, BLOCK_SIZE=_pow2(C))


def fg_rms_reference(in_ptr, w_ptr, eps, **_):
    inv = 1 / np.sqrt((in_ptr ** 2).mean(axis=1) + eps)
    return in_ptr * inv[:, None] * w_ptr, inv


def fg_norm_inputs(n=3000):
    return dict(X=np.random.randn(n).astype(np.float32), Mid=np.empty(64, np.float32), M=n)


_FG_LIBENTRY = (("@libentry()\n", ""),)

LIGER, FLA, XF, FG = "liger-kernel", "fla-core", "xformers", "flag-gems"
TRITON = [
    Entry("liger-rms-norm", "triton", LIGER, "liger_kernel.ops.rms_norm:_rms_norm_forward_kernel",
          "constexprs from inputs (casting mode, affine, next_power_of_2 block); module-level "
          "tl.constexpr globals; libdevice import fallback",
          liger_rms_inputs, liger_rms_reference,
          "--inputs inputs --reference reference --out Y_ptr,RSTD_ptr --budget-ms 5",
          f"# ktune: num_warps in [4, 8]; grid = ({R},)",
          take=("imports", "_CASTING_MODE_NONE", "_CASTING_MODE_LLAMA", "_CASTING_MODE_GEMMA")),
    Entry("liger-layer-norm", "triton", LIGER,
          "liger_kernel.ops.layer_norm:_layer_norm_forward_kernel",
          "three outputs; next_power_of_2 block from inputs; eps.to() on a scalar",
          liger_ln_inputs, liger_ln_reference,
          "--inputs inputs --reference reference --out Y_ptr,Mean_ptr,RSTD_ptr --budget-ms 5",
          f"# ktune: num_warps in [4, 8]; grid = ({R},)", take=("imports",)),
    Entry("liger-swiglu", "triton", LIGER, "liger_kernel.ops.swiglu:_swiglu_forward_kernel",
          "helper @triton.jit (silu) in the same cell; n_cols constexpr from inputs",
          glu_inputs, swiglu_reference,
          "--inputs inputs --reference reference --out c_ptr --budget-ms 5",
          f"# ktune: num_warps in [4, 8]; grid = ({R},)", take=("imports", "silu")),
    Entry("liger-geglu", "triton", LIGER, "liger_kernel.ops.geglu:_geglu_tanh_forward_kernel",
          "libdevice tanh chosen at import by triton version; constexpr n_cols",
          geglu_inputs, geglu_reference,
          "--inputs inputs --reference reference --out c --budget-ms 5",
          f"# ktune: num_warps in [4, 8]; grid = ({R},)", take=("imports",)),
    Entry("liger-softmax", "triton", LIGER,
          "liger_kernel.ops.softmax:_softmax_single_block_forward_kernel",
          "cache_modifier loads/stores; next_power_of_2 block from inputs",
          liger_softmax_inputs, liger_softmax_reference,
          "--inputs inputs --reference reference --out Y_ptr --budget-ms 5",
          f"# ktune: num_warps in [4, 8]; grid = ({R},)", take=("imports",)),
    Entry("liger-dyt", "triton", LIGER, "liger_kernel.ops.dyt:_dyt_fwd_kernel",
          "@triton.autotune(configs=[...18], key=['N']); lambda META grid; 2-D grid",
          dyt_inputs, dyt_reference, "--inputs inputs --reference reference --out Y --budget-ms 5",
          "# ktune: grid = lambda META: (triton.cdiv(N, META['BLOCK_N']), M)", take=("imports",)),
    Entry("liger-rope", "triton", LIGER, "liger_kernel.ops.rope:_triton_rope",
          "in-place outputs (q, k rotated where they are); 11 constexprs from inputs",
          rope_inputs, rope_reference,
          "--inputs inputs --reference reference --out q_ptr,k_ptr --budget-ms 5",
          "# ktune: num_warps in [4]; grid = (bs * sl,)", take=("imports",)),
    Entry("fla-softmax", "triton", FLA, "fla.ops.utils.softmax:softmax_fwd_kernel",
          "@triton.autotune over num_warps only (Config({})), **autotune_cache_kwargs; "
          "module-level list chosen by IS_AMD",
          fla_softmax_inputs, fla_softmax_reference,
          "--inputs inputs --reference reference --out p --budget-ms 5", "# ktune: grid = (N,)",
          take=("imports", "NUM_WARPS_AUTOTUNE")),
    Entry("fla-sigmoid", "triton", FLA, "fla.modules.activations.ops:sigmoid_fwd_kernel",
          "autotune configs from a helper function; jit(do_not_specialize=['T']); "
          "tunable only in the grid (B)",
          fla_act_inputs, fla_sigmoid_reference,
          "--inputs inputs --reference reference --out y --budget-ms 5",
          "# ktune: grid = lambda meta: (triton.cdiv(T, meta['B']),)",
          take=("imports", "_activation_autotune_configs")),
    Entry("fla-swiglu", "triton", FLA, "fla.modules.activations.ops:swiglu_fwd_kernel",
          "same autotune helper, three arrays with row strides",
          fla_swiglu_inputs, fla_swiglu_reference,
          "--inputs inputs --reference reference --out z --budget-ms 5",
          "# ktune: grid = lambda meta: (triton.cdiv(T, meta['B']),)",
          take=("imports", "_activation_autotune_configs")),
    Entry("fla-chunk-cumsum", "triton", FLA,
          "fla.ops.utils.cumsum:chunk_local_cumsum_scalar_kernel",
          "@triton.heuristics(lambda args) + a custom autotune decorator; None arguments; "
          "helper jit imported from the package; reference depends on the config",
          cumsum_inputs, cumsum_reference,
          "--inputs inputs --reference reference --out o --budget-ms 5",
          "# ktune: BT in [16, 32]; grid = (triton.cdiv(T, BT) * B * H,)",
          take=("imports", "BS_LIST")),
    Entry("xformers-rms-norm", "triton", XF,
          "xformers.ops._triton.rmsnorm_kernels:_rms_norm_kernel",
          "a real BLOCK_SIZE tunable (looped); helper from libdevice_find at module level",
          xf_rms_inputs, xf_rms_reference,
          "--inputs inputs --reference reference --out h1_ptr --budget-ms 5",
          f"# ktune: BLOCK_SIZE in [64, 128, 256]; num_warps in [4, 8]; grid = ({R},)",
          take=("imports", "rsqrt")),
    Entry("flag-gems-rms-norm", "triton", FG, "flag_gems.ops.rms_norm:rms_norm_kernel",
          "@libentry() wrapper; jit(do_not_specialize=['eps']); package that needs a GPU to "
          "import", fg_rms_inputs, fg_rms_reference,
          "--inputs inputs --reference reference --out out_ptr,INV_RMS --budget-ms 5",
          f"# ktune: num_warps in [4, 8]; grid = ({R},)", patches=_FG_LIBENTRY),
]


def liger_block_rms_inputs():
    return {**liger_rms_inputs(), "n_rows": R}


def xf_rms_add_inputs():
    d = xf_rms_inputs()
    d["y_ptr"] = np.random.randn(R, C).astype(np.float32)
    return d


def xf_rms_add_reference(x_ptr, y_ptr, w_ptr, eps, **_):
    s = x_ptr + y_ptr  # x_ptr is updated in place with x + y
    return s, xf_rms_reference(s, w_ptr, eps)


def fg_l2_reference(X, M, config, **_):
    block = config["BLOCK_SIZE"]  # partial sums per program: their count depends on BLOCK_SIZE
    starts = range(0, M, block)  # Mid holds cdiv(M, BLOCK_SIZE) of them (Mid.shape directive)
    return np.array([(X[s:s + block].astype(np.float64) ** 2).sum() for s in starts], np.float32)


TRITON += [
    Entry("xformers-rms-norm-add", "triton", XF,
          "xformers.ops._triton.rmsnorm_kernels:_rms_norm_add_kernel",
          "an input updated in place (x += y) and checked as an output",
          xf_rms_add_inputs, xf_rms_add_reference,
          "--inputs inputs --reference reference --out x_ptr,h1_ptr --budget-ms 5",
          f"# ktune: BLOCK_SIZE in [64, 128]; grid = ({R},)", take=("imports", "rsqrt")),
    Entry("flag-gems-l2-norm", "triton", FG, "flag_gems.ops.vector_norm:l2_norm_kernel_1",
          "two kernels in a pipeline (partial sums, then the final pass); reference needs the "
          "config; FlagGems' tle.program_id", fg_norm_inputs, fg_l2_reference,
          "--inputs inputs --reference reference --out Mid --budget-ms 5",
          "# ktune: BLOCK_SIZE in [64, 128]; grid = (triton.cdiv(M, BLOCK_SIZE),)\n"
          "# ktune: Mid.shape = (cdiv(M, BLOCK_SIZE),)",
          take=("l2_norm_kernel_2",),
          patches=(("@libentry()\n", ""), ("tle.program_id", "tl.program_id"))),
    Entry("liger-block-rms-norm", "triton", LIGER,
          "liger_kernel.ops.rms_norm:_block_rms_norm_forward_kernel",
          "BLOCK_ROW tunable with a grid over row blocks; constexprs from inputs",
          liger_block_rms_inputs, liger_rms_reference,
          "--inputs inputs --reference reference --out Y_ptr,RSTD_ptr --budget-ms 5",
          "# ktune: BLOCK_ROW in [2, 4]; grid = (triton.cdiv(n_rows, BLOCK_ROW),)",
          take=("imports", "_CASTING_MODE_NONE", "_CASTING_MODE_LLAMA", "_CASTING_MODE_GEMMA")),
]
