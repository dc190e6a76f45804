"""CUDA C++ kernels of the corpus from torchao's shipped sources (``torchao/csrc/cuda``): the
MoE token-group padding kernels of its MXFP8 training path, as the wheel ships them.

They include host headers (``<cstdint>``, ``<cstdio>``, ``<cuda_runtime.h>``) and
``<cuda_bf16.h>``, move rows as ``float4`` and broadcast with ``__shfl_sync``: the idioms that
issue 36 found building for the static report (nvcc) and not for the run (then NVRTC). The run
now loads nvcc's cubin; :func:`nvrtc_log` also compiles each cell as the NVRTC fallback does.
On a machine without a GPU the expected result is the sm_90 static compile.
"""

from __future__ import annotations

import numpy as np

from corpus.harness import Entry

TAO = "torchao"
PAD = "torchao/csrc/cuda/mx_kernels/fused_pad_token_groups.cu"
ROWS, DIM, GROUPS = 96, 200, 3  # group sizes 32, 48, 16: multiples of the 16-row alignment


def _bf16(a):
    import ml_dtypes

    return a.astype(ml_dtypes.bfloat16)


def pad_inputs():
    ends = np.array([32, 80, 96], np.int32)
    return dict(input=_bf16(np.random.randn(ROWS, DIM)), group_end_offsets=ends,
                padded_group_start_offsets=np.array([0, 32, 80], np.int32),
                output=_bf16(np.zeros((ROWS, DIM))), num_tokens=ROWS, dim=DIM,
                num_groups=GROUPS)


def pad_reference(input, **_):
    return input  # aligned groups: every row lands at its own index


def offsets_inputs():
    return dict(group_end_offsets=np.array([30, 70, 71, 100], np.int32),
                padded_group_start_offsets=np.empty(4, np.int32),
                padded_group_end_offsets=np.empty(4, np.int32), num_groups=4,
                alignment_size=16)


def offsets_reference(group_end_offsets, alignment_size, **_):
    sizes = np.diff(np.concatenate([[0], group_end_offsets]))
    ends = np.cumsum(-(-sizes // alignment_size) * alignment_size).astype(np.int32)
    return np.concatenate([[0], ends[:-1]]).astype(np.int32), ends


_ROWS = ("// ktune: BLOCK in [128, 256]; grid = cdiv(num_tokens, BLOCK / 32); block = BLOCK")
_LINE = "--inputs inputs --reference reference --budget-ms 5"
TORCHAO_CUDA = [
    Entry("torchao-cuda-pad-token-groups", "cuda", TAO, f"{PAD}:fused_pad_token_groups_kernel",
          "host headers (<cstdint>, <cstdio>, <cuda_runtime.h>) and <cuda_bf16.h>; a warp per "
          "row, group id broadcast by __shfl_sync; float4 row copies", pad_inputs,
          pad_reference, f"{_LINE} --out output", _ROWS, take=("imports", "find_group_id")),
    Entry("torchao-cuda-unpad-token-groups", "cuda", TAO,
          f"{PAD}:fused_unpad_token_groups_kernel", "the inverse copy, reading padded rows",
          pad_inputs, pad_reference, f"{_LINE} --out output", _ROWS,
          take=("imports", "find_group_id")),
    Entry("torchao-cuda-padded-offsets", "cuda", TAO, f"{PAD}:compute_padded_offsets_kernel",
          "one thread walks the groups: a serial prefix sum of aligned sizes, two outputs",
          offsets_inputs, offsets_reference,
          f"{_LINE} --out padded_group_start_offsets,padded_group_end_offsets",
          "// ktune: grid = 1; block = 32", take=("imports",)),
]


def nvrtc_log(entry: Entry) -> tuple[bool, str]:
    """Compile the entry's cell as the NVRTC fallback does (the backend's options, the
    ``nvidia-cuda-nvrtc`` wheel): (compiled, log). Raises LookupError without libnvrtc."""
    from nvrtc_wheel import load_nvrtc, nvrtc_compile

    from jupyter_ktune.api import parse_cell
    from jupyter_ktune.backends.cuda.nvrtc import nvrtc_options
    from jupyter_ktune.backends.cuda.source import parse_signature, static_source
    from jupyter_ktune.backends.cuda.templates import type_arguments

    nvrtc = load_nvrtc()
    if nvrtc is None:
        raise LookupError("libnvrtc not found: pip install nvidia-cuda-nvrtc")
    line, body, _ = entry.cell()
    spec = parse_cell(line, body, {"inputs": entry.inputs, "reference": entry.reference})
    config = next(iter(spec.space.configs()))
    sig, cxx = parse_signature(spec), spec.space.cxx_env(config)
    return nvrtc_compile(nvrtc, static_source(spec, sig, cxx, type_arguments(spec, sig)),
                         ["--gpu-architecture=sm_90", *nvrtc_options(spec, sig, cxx)])
