"""CUDA C++ kernels of the corpus: CUTLASS's device utilities and CuTe tutorial, as its wheel
(``nvidia-cutlass``) ships them under ``cutlass_library/source``.

On a machine without a GPU the expected result is an sm_90 static compile (registers, shared
memory, SASS). The kernels include CUTLASS headers; each cell names CUTLASS's include folders
inside the wheel with one ``// ktune: include package:folder`` line (:data:`INCLUDES`), as a
CUTLASS user passes ``-I``. (The survey before the include directive existed exported them
through ``CPATH``; :func:`include_path` now returns nothing, so the harness adds no folders.)
"""

from __future__ import annotations

import numpy as np

from corpus.harness import Entry

M, N = 8, 256
UTIL = "cutlass_library/source/tools/util/include/cutlass/util"
TUTORIAL = "cutlass_library/source/examples/cute/tutorial"


def include_path() -> list[str]:
    """Folders the harness exports through ``CPATH``: none, the cells say ``include``."""
    return []


#: CUTLASS's include folders in the nvidia-cutlass wheel: the library, its tools/util, and the
#: util folder itself (device_layernorm.h includes its sibling by a relative name).
INCLUDES = ("// ktune: include cutlass_library:source/include; "
            "include cutlass_library:source/tools/util/include; "
            "include cutlass_library:source/tools/util/include/cutlass/util")


def norm_inputs():
    x = np.random.randn(M, N).astype(np.float32)
    return dict(output=np.empty_like(x), input=x, weight=np.random.rand(N).astype(np.float32),
                gamma=np.random.rand(N).astype(np.float32),
                beta=np.random.rand(N).astype(np.float32), m=M, n=N, epsilon=1e-5)


def rms_reference(input, weight, epsilon, **_):
    return input / np.sqrt((input ** 2).mean(axis=1, keepdims=True) + epsilon) * weight


def ln_reference(input, gamma, beta, **_):
    mu, var = input.mean(axis=1, keepdims=True), input.var(axis=1, keepdims=True)
    return (input - mu) / np.sqrt(var + 1e-5) * gamma + beta


def half_inputs():
    d = norm_inputs()
    return {k: (v.astype(np.float16) if isinstance(v, np.ndarray) else v) for k, v in d.items()}


def transpose_inputs(n=2, h=8, w=8, c=64):
    x = np.random.randn(n, c, h, w).astype(np.float32)
    return dict(output=np.empty((n, h, w, c), np.float32), input=x, n=n, h=h, w=w, c=c)


def transpose_reference(input, **_):
    return input.transpose(0, 2, 3, 1)


def pool_inputs(N_=2, H=8, W=8, C=32):
    x = np.random.randn(N_, H, W, C).astype(np.float32)
    return dict(output=np.empty((N_, 4, 4, C), np.float32), input=x, N=N_, H=H, W=W, C=C,
                output_H=4, output_W=4, kernel_H=2, kernel_W=2, stride_H=2, stride_W=2,
                padding_H=0, padding_W=0)


def pool_reference(input, **_):
    n, h, w, c = input.shape
    return input.reshape(n, h // 2, 2, w // 2, 2, c).mean(axis=(2, 4))


def sgemm_inputs(m=128, n=128, k=64):
    a, b = np.random.randn(m, k).astype(np.float32), np.random.randn(n, k).astype(np.float32)
    return dict(A=a, B=b, C=np.empty((m, n), np.float32), m=m, n=n, k=k)


def sgemm_reference(A, B, **_):
    return A @ B.T


_CUTLASS = "using namespace cutlass;"
_NORM = "--inputs inputs --reference reference --out output"
CUT = "nvidia-cutlass"
CUDA = [
    Entry("cutlass-rmsnorm-e1", "cuda", CUT, f"{UTIL}/device_rmsnorm.h:rmsnorm_twoPassAlgo_e1",
          "type template parameter T; helpers (warp/block reduce) from a CUTLASS header",
          norm_inputs, rms_reference, _NORM,
          f"{INCLUDES}\n// ktune: THREADS in [128, 256]; grid = m; block = THREADS",
          take=("imports",), setup=_CUTLASS),
    Entry("cutlass-rmsnorm-e8", "cuda", CUT, f"{UTIL}/device_rmsnorm.h:rmsnorm_twoPassAlgo_e8",
          "float4 / half2 vectorised pointers; no template", half_inputs, rms_reference, _NORM,
          f"{INCLUDES}\n// ktune: THREADS in [32, 64]; grid = m; block = THREADS",
          take=("imports",), setup=_CUTLASS),
    Entry("cutlass-layernorm-e1", "cuda", CUT,
          f"{UTIL}/device_layernorm.h:layernorm_twoPassAlgo_e1",
          "type template T; relative #include of a sibling header", norm_inputs, ln_reference,
          _NORM, f"{INCLUDES}\n// ktune: THREADS in [128, 256]; grid = m; block = THREADS",
          take=("imports",), setup=_CUTLASS),
    Entry("cutlass-layernorm-local", "cuda", CUT,
          f"{UTIL}/device_layernorm.h:layernorm_twoPassAlgo_stored_locally_e1",
          "int template parameter as tunable (ITEM_PER_THREAD) beside a type parameter",
          norm_inputs, ln_reference, _NORM,
          f"{INCLUDES}\n// ktune: ITEM_PER_THREAD in [1, 2, 4]; grid = m; "
          "block = n / ITEM_PER_THREAD",
          take=("imports",), setup=_CUTLASS),
    Entry("cutlass-nchw-to-nhwc", "cuda", CUT,
          f"{UTIL}/device_nchw_to_nhwc.h:nchw_to_nhwc_kernel",
          "static shared tile 32x33; 3-D grid and 2-D block", transpose_inputs,
          transpose_reference, _NORM,
          f"{INCLUDES}\n// ktune: grid = (cdiv(h * w, 32), cdiv(c, 32), n); block = (32, 8)",
          take=("imports",), setup=_CUTLASS),
    Entry("cutlass-pooling", "cuda", CUT,
          f"{UTIL}/device_nhwc_pooling.h:pooling_nhwc_element1_kernel",
          "bool template parameter (IS_AVG_POOLING) with a type parameter", pool_inputs,
          pool_reference, _NORM,
          # the launch of the header's own host code: grid(N, output_H, output_W),
          # block(min(C, 256)) (a flat grid wrote past the output on the H200)
          f"{INCLUDES}\n// ktune: IS_AVG_POOLING in [1]; "
          "grid = (N, output_H, output_W); block = min(C, 256)",
          take=("imports",), setup=_CUTLASS),
    Entry("cute-sgemm-1", "cuda", CUT, f"{TUTORIAL}/sgemm_1.cu:gemm_device",
          "CuTe tutorial GEMM: template over shapes, strides and layouts (typename params), "
          "__launch_bounds__ from a template expression", sgemm_inputs, sgemm_reference,
          "--inputs inputs --reference reference --out C",
          f"{INCLUDES}\n// ktune: grid = (cdiv(m, 128), cdiv(n, 128)); block = 256",
          take=("imports",)),
]
