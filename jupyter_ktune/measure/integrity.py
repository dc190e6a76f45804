"""Memory a kernel must not write: its inputs, and the guard regions around every buffer.

Issue 15 items 5 and 6. An in-place kernel (the ``triton.autotune`` trap) changes its inputs, so
the next timed run and the next config see other data; a kernel that writes past the end of its
output passes verification while corrupting whatever lies there. Both are checked after the
verification run only; they cost a read-back of the inputs and of the guards, not of the timed
runs.

**Inputs.** The worker keeps the host arrays the inputs function returned (the backends bind
copies of them), so after the run each input is read back from the device with the bound
variant's ``read_inputs(names) -> {name: host array}`` and compared bit for bit, one input at
a time. A bound that keeps a pristine device copy of each input (uploaded once per input set,
:mod:`jupyter_ktune.backends.uploads`) compares there instead, with
``count_changed_inputs(names) -> {name: (changed, size)}``, and nothing crosses to the host. A name
the kernel does not take (an
array the inputs function returned for the reference only) is left out of the reply.

**Guards.** A backend allocates each buffer with :func:`guard_layout`'s guard elements before and
after it, fills the guards with :func:`guard_bits` (a device memset through an integer view, as
the poison), passes the kernel the inner view, and after the run reads the guards back and
reports :func:`guard_breach` through ``guard_breaches() -> [GuardBreach]``. The inner view starts
:data:`ALIGN`-aligned, as an allocation does, so vectorised loads and TMA descriptors behave as
without guards. A write farther out than the guard is not seen (it may still fault).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from jupyter_ktune.results import GuardBreach, InputChange

GUARD_MIN_BYTES = 4096
GUARD_MAX_BYTES = 16 << 20
#: Bytes of guard per byte of buffer (before the bounds above): an unmasked last tile of a
#: 2-D output writes up to a whole tile row past its end, so the guard grows with the buffer.
GUARD_FRACTION = 1 / 16
ALIGN = 256  # cudaMalloc's alignment: the inner view starts where an allocation would
GUARD_BYTE = 0xA5  # 0xA5A5A5A5 as fp32 is -2.9e-16: not a value a kernel writes by chance


def guard_layout(dtype: Any, size: int) -> tuple[int, int]:
    """``(before, after)``: guard elements around a buffer of ``size`` elements of ``dtype``.

    Each side holds ``size * itemsize / 16`` bytes, at least 4 KiB and at most 16 MiB; the guard
    before is a multiple of :data:`ALIGN` bytes so the inner view stays aligned.
    """
    item = np.dtype(dtype).itemsize
    want = min(max(int(size * item * GUARD_FRACTION), GUARD_MIN_BYTES), GUARD_MAX_BYTES)
    step = math.lcm(item, ALIGN)  # bytes: whole elements and whole alignment units
    before = -(-want // step) * step // item
    after = -(-want // item)
    return before, after


def guard_bits(dtype: Any) -> tuple[int, int] | None:
    """``(itemsize, pattern as a signed integer)`` for a device fill of the guards, like
    :func:`~jupyter_ktune.measure.verify.poison_bits`; None for item sizes with no integer view."""
    size = np.dtype(dtype).itemsize
    if size not in (1, 2, 4, 8):
        return None
    value = int.from_bytes(bytes([GUARD_BYTE]) * size, "little")
    return size, value - (1 << 8 * size) if value >= 1 << (8 * size - 1) else value


def fill_guard(region: np.ndarray) -> None:
    """Fill a host guard region (any dtype) with the guard pattern, byte for byte."""
    region.view(np.uint8)[...] = GUARD_BYTE


def guarded_empty(shape: tuple[int, ...] | int, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(whole, inner)``: a host buffer with filled guards and the C-order view a kernel gets.

    ``whole`` is flat: ``before`` guard elements, the buffer, ``after`` guard elements.
    """
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    size = math.prod(shape)
    before, after = guard_layout(dtype, size)
    whole = np.empty(before + size + after, dtype)
    fill_guard(whole[:before])
    fill_guard(whole[before + size:])
    return whole, whole[before:before + size].reshape(shape)


def _changed(region: np.ndarray) -> np.ndarray:
    """Flat mask of the elements of a guard region that no longer hold the pattern."""
    flat = np.ascontiguousarray(region).reshape(-1)
    return (flat.view(np.uint8).reshape(flat.size, flat.dtype.itemsize) != GUARD_BYTE).any(axis=1)


def _intact(region: np.ndarray) -> bool:
    """Whether every byte of a guard region still holds the pattern."""
    flat = np.ascontiguousarray(region).reshape(-1).view(np.uint8)
    return bool((flat == GUARD_BYTE).all())


def guard_breach(name: str, before: np.ndarray, after: np.ndarray) -> GuardBreach | None:
    """What the kernel wrote into the guards of ``name`` (host copies of the two regions, in
    address order), or None when both are intact."""
    if all(_intact(r) for r in (before, after)):  # the common case, ~10x faster than the mask
        return None
    hit_before, hit_after = _changed(before), _changed(after)
    if not hit_before.any() and not hit_after.any():
        return None
    reach_before = int(hit_before.size - np.flatnonzero(hit_before)[0]) if hit_before.any() else 0
    reach_after = int(np.flatnonzero(hit_after)[-1] + 1) if hit_after.any() else 0
    return GuardBreach(name, int(hit_before.sum()), int(hit_after.sum()), reach_before,
                       reach_after)


def guard_breach_of(name: str, whole: np.ndarray, inner_size: int) -> GuardBreach | None:
    """:func:`guard_breach` of a flat host buffer made by :func:`guarded_empty`."""
    before, _ = guard_layout(whole.dtype, inner_size)
    return guard_breach(name, whole[:before], whole[before + inner_size:])


# --- inputs ---------------------------------------------------------------------------------------

def _host_view(value: Any) -> np.ndarray | None:
    """An array's elements as a host ndarray (torch tensors too, bf16 through an integer view);
    None for scalars and anything else."""
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "detach") and hasattr(value, "element_size"):
        t = value.detach().cpu()
        try:
            return t.numpy()
        except TypeError:  # bfloat16 / fp8: no NumPy dtype in torch
            import torch

            ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
            return t.view(ints[t.element_size()]).numpy()
    return None


def input_names(args: Mapping[str, Any], outputs: Iterable[str]) -> list[str]:
    """The array arguments that are not outputs: what the kernel must leave unchanged."""
    outs = set(outputs)
    return [k for k, v in args.items() if k not in outs and _host_view(v) is not None]


def count_changed(before: np.ndarray, after: np.ndarray) -> int:
    """Elements whose bits differ (NaN-safe, -0 is not +0); all of them if the shapes differ."""
    if before.size != after.size or before.dtype.itemsize != after.dtype.itemsize:
        return int(max(before.size, after.size))
    item = before.dtype.itemsize
    a = np.ascontiguousarray(before).reshape(-1)
    b = np.ascontiguousarray(after).reshape(-1)
    word = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}.get(item)
    if word is not None:  # one integer compare per element: 20x faster than bytes on a 4096^2
        return int(np.count_nonzero(a.view(word) != b.view(word)))  # bf16 (0.19 -> 0.009 s)
    a, b = a.view(np.uint8).reshape(-1, item), b.view(np.uint8).reshape(-1, item)
    return int((a != b).any(axis=1).sum())


def changed_inputs(bound: Any, originals: Mapping[str, Any], outputs: Iterable[str]
                   ) -> tuple[tuple[InputChange, ...], tuple[str, ...]]:
    """``(changes, notes)``: the inputs the run changed, read back one at a time through
    ``bound.read_inputs``; a note instead where the bound cannot read them back."""
    names = input_names(originals, outputs)
    read = getattr(bound, "read_inputs", None)
    if not names:
        return (), ()
    if read is None:
        return (), ("inputs not checked for changes: this backend cannot read them back yet",)
    changes = []
    # where the bound keeps a pristine device copy of an input, it compares there (no read-back)
    counted = bound.count_changed_inputs(names) if hasattr(bound, "count_changed_inputs") else {}
    for name in names:
        if name in counted:
            n, size = counted[name]
            if n:
                changes.append(InputChange(name, n, size))
            continue
        got = read((name,))
        if name not in got:  # not a kernel argument (the backend bound only the kernel's)
            continue
        before = _host_view(originals[name])
        after = _host_view(got[name])
        if after is None or before is None:
            continue
        if np.shares_memory(before, after):  # bound in place: nothing to compare against
            return tuple(changes), (f"input `{name}` not checked: the backend bound the host "
                                    "array itself",)
        n = count_changed(before, after)
        if n:
            changes.append(InputChange(name, n, int(before.size)))
    return tuple(changes), ()
