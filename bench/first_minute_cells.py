"""The cells ``first_minute.py`` runs: kernels read from installed packages, not written here.

fla's matmul (its own autotune list) through ``--from``, liger's dyt and any other entry of the
compatibility corpus (``tests/corpus``) by its id, and Kernel Tuner's CUDA convolution and
vector add read from its sdist in the carried wheelhouse. The inputs and reference functions
live here, at module level, so a worker or a pool process unpickles them by reference.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

FLA_MATMUL = "fla.ops.utils.matmul:matmul_kernel"  # fla-core's, its own 8-config autotune list


def fla_matmul_inputs(m: int = 4096, n: int = 4096, k: int = 4096) -> dict:
    """fla's matmul as fla calls it for a plain 2-D product (no input, alpha, beta)."""
    import numpy as np

    a = (np.random.rand(m, k).astype(np.float32) - 0.5).astype(np.float16)
    b = (np.random.rand(k, n).astype(np.float32) - 0.5).astype(np.float16)
    c = np.empty((m, n), np.float16)
    return dict(a=a, b=b, c=c, input=None, alpha=None, beta=None, M=m, N=n, K=k,
                stride_ab=0, stride_am=k, stride_ak=1, stride_bk=n, stride_bn=1,
                stride_cb=0, stride_cm=n, stride_cn=1, ACTIVATION="", HAS_INPUT=False,
                ALLOW_TF32=False, X_DIM=1)


def fla_matmul_reference(a, b, **_: Any):  # noqa: ANN001, ANN201 - the cell's reference
    """fp32 product of the fp16 operands, rounded to fp16 as the kernel stores it."""
    import numpy as np

    return (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)


def fla_matmul_cell() -> tuple[str, str, Any, Any]:
    """fla's matmul through ``--from``: the package's kernel and its own autotune list."""
    return (f"matmul_kernel --backend triton --from {FLA_MATMUL} --inputs inputs "
            "--reference reference --out c --budget-ms 10 -o panel",
            "# ktune: grid = lambda META: (1, triton.cdiv(M, META['BM']), "
            "triton.cdiv(N, META['BN']))\n", fla_matmul_inputs, fla_matmul_reference)


def kernel_tuner_sdist() -> Path:
    """Kernel Tuner's source distribution in the carried wheelhouse (``.whl*/``)."""
    found = sorted(ROOT.glob(".whl*/kernel_tuner-*.tar.gz"))
    if not found:
        raise LookupError("no kernel_tuner-*.tar.gz in the carried wheelhouse (.whl*/)")
    return found[-1]


def vector_add_inputs(n: int = 10_000_000) -> dict:
    """Kernel Tuner's vector_add example: two random fp32 vectors of 10 M, ``c`` to fill."""
    import numpy as np

    a = np.random.randn(n).astype(np.float32)
    b = np.random.randn(n).astype(np.float32)
    return dict(c=np.zeros_like(a), a=a, b=b, n=np.int32(n))


def vector_add_reference(c, a, b, n):  # noqa: ANN001, ANN201 - the cell's reference
    """NumPy's sum, as Kernel Tuner's example checks it (``answer = [a + b, None, None, None]``)."""
    return a + b


def vector_add_cell() -> tuple[str, str, Any, Any]:
    """Kernel Tuner's ``test/vector_add.cu``: a CUDA C++ cell whose reference is NumPy, so
    nothing in it needs torch (the convolution's reference is torch's ``conv2d``). Its block
    size is a preprocessor macro, as in Kernel Tuner's example."""
    import convolution_vs_kernel_tuner as conv

    source = conv.kernel_source(kernel_tuner_sdist(), "test/vector_add.cu")
    return ("vector_add --backend cuda --inputs inputs --reference reference --out c -o panel",
            "// ktune: block_size_x in [64, 128, 256, 512, 1024]\n"
            "// ktune: grid = cdiv(n, block_size_x); block = block_size_x; "
            "bytes = 12 * n; flops = n\n" + source, vector_add_inputs, vector_add_reference)


def convolution_cell() -> tuple[str, str, Any, Any]:
    """Kernel Tuner's ``convolution.cu`` from its sdist in the carried wheelhouse, under the
    directives of the same space (``convolution_vs_kernel_tuner.ktune_body``: text, no parse)."""
    import convolution_vs_kernel_tuner as conv

    source = conv.kernel_source(kernel_tuner_sdist())
    return conv.KTUNE_LINE + " -o panel", conv.ktune_body(source), conv.inputs, conv.reference


def cell(name: str) -> tuple[str, str, Any, Any]:
    """One kernel's cell, ``(magic line, body, inputs, reference)``: fla's matmul, Kernel
    Tuner's convolution or vector add, or any corpus entry by id (liger's dyt among them, as
    ``bench/corpus_vs_autotune.py`` sweeps the corpus kernels that carry an autotune list).
    Only that cell is built: a side's clock runs from its spawn, and a notebook's user types
    one cell, not the bench's three (building all three, the convolution's parsed, took 0.3 s
    on a 2-core machine before ``%load_ext``)."""
    if name == "fla-matmul":
        return fla_matmul_cell()
    if name == "kt-convolution":
        return convolution_cell()
    if name == "kt-vector-add":
        return vector_add_cell()
    from corpus.entries import BY_ID

    entry = BY_ID[name]
    line, body, _changed = entry.cell()
    return line + " -o panel", body, entry.inputs, entry.reference
