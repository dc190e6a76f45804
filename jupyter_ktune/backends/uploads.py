"""One input set's arrays on the device, uploaded once and copied from there for every variant.

A sweep checks up to ``REDRAW_EVERY`` variants on one input set (``runner.input_sets``). Each
variant's binding needs its own guarded copy of every array (``measure.integrity``), and after
the verification run each input is compared with what the inputs function returned. Both used
the host: every binding uploaded the arrays again, and the check read every input back and
compared it on the CPU. On the H200 that was 0.17 s a config for a 4096² bf16 matmul and 0.2 s
(plus 0.47 s of host compare) for a CUDA copy of 2^26 floats
(bench/results/sweep_profile/2026-12-01-1258). Here the first binding of a set uploads each
host array once, a *pristine* copy that no kernel is ever given; every binding copies its guarded
buffers from it on the device, and the inputs are compared with it there, bit for bit.

The runner opens the set's cache around a binding (:func:`for_input_set`); a binding made
outside one (a test, a probe) uploads a pristine copy of its own. The cache holds each host
array it serves, so an ``id`` is never reused while its copy is kept, and it lives exactly as
long as the input set: the device memory is the inputs' size again, freed with the set.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any

_open: contextvars.ContextVar[Uploads | None] = contextvars.ContextVar("ktune_uploads",
                                                                      default=None)


class Uploads:
    """Pristine device copies of one input set's host arrays, each made on first use."""

    def __init__(self) -> None:
        self._copies: dict[tuple[int, str], tuple[Any, Any]] = {}

    def pristine(self, host: Any, upload: Callable[[Any], Any], where: str = "") -> Any:
        """The device copy of ``host`` (``upload(host)`` the first time; ``where`` tells apart
        copies on different devices or in different array types)."""
        key = (id(host), where)
        hit = self._copies.get(key)
        if hit is None or hit[0] is not host:
            hit = self._copies[key] = (host, upload(host))
        return hit[1]

    def __len__(self) -> int:
        return len(self._copies)


@contextlib.contextmanager
def for_input_set(uploads: Uploads) -> Iterator[Uploads]:
    """Serve bindings made inside the block from ``uploads`` (the current input set's)."""
    token = _open.set(uploads)
    try:
        yield uploads
    finally:
        _open.reset(token)


def pristine(host: Any, upload: Callable[[Any], Any], where: str = "") -> Any:
    """The open input set's device copy of ``host``, or a fresh upload outside one."""
    uploads = _open.get()
    return upload(host) if uploads is None else uploads.pristine(host, upload, where)
