"""Host arrays and device arrays as torch tensors, for the backends that compare on the device.

The Triton backend binds torch tensors; the CUDA backend binds CuPy arrays and hands them to the
same on-device compare (:mod:`jupyter_ktune.measure.verify_device`) through DLPack, without a
copy. bfloat16 and fp8 have no CuPy or NumPy dtype of their own (NumPy's come from ml_dtypes):
they travel as unsigned integers of their size and are viewed back here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: Dtypes that travel as raw unsigned integers (their bits) between NumPy, CuPy and torch.
RAW_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")


def torch_dtype(torch: Any, np_dtype: np.dtype) -> Any:
    """The torch dtype of a NumPy dtype (by name: float32, bfloat16, ...)."""
    return getattr(torch, np_dtype.name)


def to_torch(value: np.ndarray, device: str) -> Any:
    """A NumPy array (ml_dtypes bfloat16/fp8 included) as a torch tensor on ``device``."""
    import torch

    if value.dtype.kind == "V" or value.dtype.name in RAW_DTYPES:
        raw = torch.from_numpy(np.ascontiguousarray(value).view(f"u{value.dtype.itemsize}"))
        return raw.view(torch_dtype(torch, value.dtype)).to(device)
    return torch.from_numpy(np.ascontiguousarray(value)).to(device)


def to_numpy(tensor: Any, dtype: np.dtype) -> np.ndarray:
    """Copy a torch tensor back to the host, viewed as the NumPy dtype it came in as."""
    import torch

    host = tensor.detach().cpu()
    if host.dtype in (torch.bfloat16, getattr(torch, "float8_e4m3fn", None),
                      getattr(torch, "float8_e5m2", None)):
        raw = host.view(torch.uint8 if host.element_size() == 1 else torch.int16).numpy()
        return raw.view(dtype)
    return host.numpy().astype(dtype, copy=False)


def cuda_torch() -> Any:
    """torch, when it is importable and sees a GPU; else None (the caller compares on the host)."""
    try:
        import torch
    except ImportError:
        return None
    try:
        return torch if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001 - a broken CUDA install: no device compare, not a crash
        return None


def warm_cuda_torch() -> bool:
    """Initialise torch's CUDA state and load the kernels the on-device compare uses, now.

    In a worker that never ran a Triton cell, torch's first CUDA operation took about 10 s on
    the H200, inside the first config's verification run (bench/results/
    sweep_vs_kernel_tuner/2026-12-01-1315: the first result at 19 s of a 23 s sweep). The CUDA
    backend calls this when the worker opens the device, so the cost is the worker's start,
    paid once per session; compile-only pool processes never call it. Returns whether torch
    is there to warm.
    """
    torch = cuda_torch()
    if torch is None:
        return False
    x = torch.rand(4096, device="cuda")
    y = x.to(torch.float64)
    bad = ~((x - x).abs() <= torch.clamp(x.abs(), min=1e-3))
    float(y.square().sum()), int(torch.nonzero(bad).numel()), bool(torch.isfinite(x).all())
    float(torch.where(x > 0, x / x, torch.zeros_like(x)).max())
    torch.cuda.synchronize()
    return True


def from_cupy(torch: Any, array: Any, dtype: np.dtype) -> Any:
    """A CuPy array as a torch tensor over the same memory, viewed as ``dtype`` (raw unsigned
    integers for bfloat16 / fp8 become those types again)."""
    if dtype.name in RAW_DTYPES or array.dtype != dtype:
        signed = array.view(f"i{array.dtype.itemsize}")  # DLPack's unsigned support varies
        return torch.from_dlpack(signed).view(torch_dtype(torch, dtype))
    return torch.from_dlpack(array)
