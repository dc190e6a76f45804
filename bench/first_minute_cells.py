"""The cells ``first_minute.py`` runs: kernels read from installed packages, not written here.

fla's matmul (its own autotune list) through ``--from``, liger's dyt and any other entry of the
compatibility corpus (``tests/corpus``) by its id, and Kernel Tuner's CUDA convolution read
from its sdist in the carried wheelhouse. The inputs and reference functions live here, at
module level, so a worker or a pool process unpickles them by reference.
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


def convolution_cell() -> tuple[str, str, Any, Any]:
    """Kernel Tuner's ``convolution.cu`` from its sdist in the carried wheelhouse, under the
    directives of the same space (``convolution_vs_kernel_tuner.ktune_body``: text, no parse)."""
    import convolution_vs_kernel_tuner as conv

    found = sorted(ROOT.glob(".whl*/kernel_tuner-*.tar.gz"))
    if not found:
        raise LookupError("no kernel_tuner-*.tar.gz in the carried wheelhouse (.whl*/)")
    return (conv.KTUNE_LINE + " -o panel", conv.ktune_body(conv.kernel_source(found[-1])),
            conv.inputs, conv.reference)


def cell(name: str) -> tuple[str, str, Any, Any]:
    """One kernel's cell, ``(magic line, body, inputs, reference)``: fla's matmul, Kernel
    Tuner's convolution, or any corpus entry by id (liger's dyt among them, as
    ``bench/corpus_vs_autotune.py`` sweeps the corpus kernels that carry an autotune list).
    Only that cell is built: a side's clock runs from its spawn, and a notebook's user types
    one cell, not the bench's three (building all three, the convolution's parsed, took 0.3 s
    on a 2-core machine before ``%load_ext``)."""
    if name == "fla-matmul":
        return fla_matmul_cell()
    if name == "kt-convolution":
        return convolution_cell()
    from corpus.entries import BY_ID

    entry = BY_ID[name]
    line, body, _changed = entry.cell()
    return line + " -o panel", body, entry.inputs, entry.reference
