"""Host arrays and device arrays as torch tensors, for the backends that compare on the device.

The Triton backend binds torch tensors; the CUDA backend binds CuPy arrays and hands them to the
same on-device compare (:mod:`jupyter_ktune.measure.verify_device`) through DLPack, without a
copy. bfloat16 and fp8 have no CuPy or NumPy dtype of their own (NumPy's come from ml_dtypes):
they travel as unsigned integers of their size and are viewed back here.
"""

from __future__ import annotations

import threading
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


_warmed = threading.Event()  # set once torch's CUDA is started in this process (or failed)
_warm_ok: list[bool] = []


def start_warming() -> None:
    """Start torch's CUDA, and the kernels the on-device checks use, in a background thread.

    In a worker that never ran a Triton cell, torch's import and first CUDA operations took
    about 6 s on the H200, and CuPy's own elementwise kernels JIT-compile on first use (about
    10 s of the first config's verification on a fresh machine, bench/results/
    sweep_vs_kernel_tuner/2026-12-01-1323). Started with the device, the warm-up overlaps the
    pool's first compiles and keeps the worker's start (and a restart after a killed kernel,
    which a short ``--timeout`` must allow) as fast as before; until it is done the checks run
    on the host (:func:`warmed_torch` is None), with the same rule and the same verdict.
    """
    if _warmed.is_set() or any(t.name == "ktune-torch-warm" for t in threading.enumerate()):
        return

    def warm() -> None:
        try:
            _warm_ok.append(_warm_cuda_torch())
        except Exception:  # noqa: BLE001 - no device checks then, never a crash
            _warm_ok.append(False)
        finally:
            _warmed.set()

    threading.Thread(target=warm, name="ktune-torch-warm", daemon=True).start()


def warmed_torch() -> Any:
    """torch with its CUDA started, once :func:`start_warming` has finished; else None."""
    if not (_warmed.is_set() and _warm_ok and _warm_ok[0]):
        return None
    import torch

    return torch


def _warm_cuda_torch() -> bool:
    torch = cuda_torch()
    if torch is None:
        return False
    x = torch.rand(4096, device="cuda")
    y = x.to(torch.float64)
    bad = ~((x - x).abs() <= torch.clamp(x.abs(), min=1e-3))
    float(y.square().sum()), int(torch.nonzero(bad).numel()), bool(torch.isfinite(x).all())
    float(torch.where(x > 0, x / x, torch.zeros_like(x)).max())
    int(torch.count_nonzero(x.view(torch.int32) != x.view(torch.int32)))
    bool((x.view(torch.uint8) != 0xA5).any())
    torch.cuda.synchronize()
    return True


def from_cupy(torch: Any, array: Any, dtype: np.dtype) -> Any:
    """A CuPy array as a torch tensor over the same memory, viewed as ``dtype`` (raw unsigned
    integers for bfloat16 / fp8 become those types again)."""
    if dtype.name in RAW_DTYPES or array.dtype != dtype:
        signed = array.view(f"i{array.dtype.itemsize}")  # DLPack's unsigned support varies
        return torch.from_dlpack(signed).view(torch_dtype(torch, dtype))
    return torch.from_dlpack(array)
