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

from jupyter_ktune.measure.integrity import GUARD_BYTE

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


_warm_lock = threading.Lock()
_warm_thread: list[threading.Thread] = []  # the one warm-up thread of this process, once started
_warm_ok: list[bool] = []
_warm_asked: list[bool] = []  # warm_when_idle: started by the worker (runner.torch_warm)


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
    def warm() -> None:
        try:
            _warm_ok.append(_warm_cuda_torch())
        except Exception:  # noqa: BLE001 - no device checks then, never a crash
            _warm_ok.append(False)

    with _warm_lock:
        if not _warm_thread:
            _warm_thread.append(threading.Thread(target=warm, name="ktune-torch-warm",
                                                 daemon=True))
            _warm_thread[0].start()


def warm_when_idle() -> None:
    """Ask for :func:`start_warming` without starting it: the worker starts it once the cell's
    functions name torch, or once it has answered a run or sits idle
    (:mod:`jupyter_ktune.runner.torch_warm`), so a first run that never needs torch does not
    share the GIL with its import."""
    with _warm_lock:
        if not _warm_thread and not _warm_asked:
            _warm_asked.append(True)


def warm_asked() -> bool:
    """Whether :func:`warm_when_idle` asked for a warm-up that has not started."""
    return bool(_warm_asked) and not _warm_thread


def wait_for_warming(timeout_s: float) -> bool:
    """Wait (at most ``timeout_s``) for the warm-up thread; whether one was running. Its
    import of torch holds the GIL for seconds: a timing taken meanwhile can be host-bound."""
    thread = _warm_thread[0] if _warm_thread else None
    if thread is None or not thread.is_alive():
        return False
    thread.join(timeout_s)
    return True


def warmed_torch() -> Any:
    """torch with its CUDA started, once :func:`start_warming` has finished; else None."""
    if not (_warm_ok and _warm_ok[0]):  # appended when the warm-up is done
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
    raw = x.view(torch.uint8)
    differing_elements(torch, raw, raw, 4), guards_touched(torch, raw)
    try:  # only a head start: a failure here leaves the compares to load on first use
        _warm_compares(torch, x)
    except Exception:  # noqa: BLE001
        pass
    torch.cuda.synchronize()
    return True


def _warm_compares(torch: Any, x: Any) -> None:
    """Run the output compare once per common float dtype, passing and failing, so its
    kernels are loaded before the first config's verification needs them."""
    from jupyter_ktune.measure.tolerance import Rule, Tolerance
    from jupyter_ktune.measure.verify_device import compare_tensor

    # NumPy has no bfloat16: its outputs are declared float32 here, only the kernels matter
    for dtype, declared in ((torch.float32, np.float32), (torch.float16, np.float16),
                            (torch.bfloat16, np.float32)):
        ref = x.to(dtype)
        wrong = ref.clone()
        wrong[0] = float("nan")
        for rule in (Rule.ELEMENTWISE, Rule.NORMWISE):
            tol = Tolerance(1e-3, 1e-3, rule, bound=1e-3, elem=1e-2)
            for out in (ref, wrong):
                compare_tensor("warm", out, ref, tol, np.dtype(declared))


def differing_elements(torch: Any, a: Any, b: Any, item: int) -> int:
    """Elements of ``item`` bytes whose bits differ between two flat uint8 tensors of the same
    size, counted where they live: one integer word per element (NaN-safe, -0 is not +0),
    bytewise for 16-byte elements. The integrity checks of both backends (an input the kernel
    changed) use it on the device; ``measure.integrity.count_changed`` is its host twin."""
    word = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(item)
    if word is None:
        return int((a.view(-1, item) != b.view(-1, item)).any(dim=1).sum())
    return int(torch.count_nonzero(a.view(word) != b.view(word)))


def guards_touched(torch: Any, *regions: Any) -> bool:
    """Whether any byte of these uint8 guard regions lost the guard pattern (one sync)."""
    return bool(torch.stack([(r != GUARD_BYTE).any() for r in regions]).any())


def from_cupy(torch: Any, array: Any, dtype: np.dtype) -> Any:
    """A CuPy array as a torch tensor over the same memory, viewed as ``dtype`` (raw unsigned
    integers for bfloat16 / fp8 become those types again)."""
    if dtype.name in RAW_DTYPES or array.dtype != dtype:
        signed = array.view(f"i{array.dtype.itemsize}")  # DLPack's unsigned support varies
        return torch.from_dlpack(signed).view(torch_dtype(torch, dtype))
    return torch.from_dlpack(array)
