"""TorchTimer: the DeviceTimer of Triton cells on a GPU (torch CUDA events, a Triton flush)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from jupyter_ktune.backends.triton.module import load_module

# The flush READS 256 MiB (a write leaves dirty lines whose write-back lands in the timed kernel,
# bench/results/foundation-timing.md); named like the CUDA one so CUPTI records skip it.
TIMER_SOURCE = '''
@triton.jit
def ktune_l2_flush(buf, n, sink, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.int32)
    for start in range(tl.program_id(0) * BLOCK, n, tl.num_programs(0) * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(buf + offs, mask=offs < n, other=0)
    total = tl.sum(acc, axis=0)
    tl.store(sink, total, mask=total == 0x7FFFFFFF)  # never true (the buffer is zero)


@triton.jit
def ktune_empty(sink):
    pass


@triton.jit
def _globaltimer():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64,
                                     is_pure=False, pack=1)


@triton.jit(do_not_specialize=["epoch"])
def ktune_hold(gate, timeouts, epoch, MAX_NS: tl.constexpr):
    # the hold (measure/held_runs.py): wait until the host writes `epoch` into `gate` from
    # another stream, or MAX_NS pass (then count a timeout)
    t0 = _globaltimer()
    t = t0
    seen = tl.load(gate, volatile=True)
    while (seen < epoch) & (t - t0 < MAX_NS):
        seen = tl.load(gate, volatile=True)
        t = _globaltimer()
    if seen < epoch:
        tl.atomic_add(timeouts, 1)
'''


FLUSH_BLOCK, FLUSH_WARPS, HOLD_WARPS = 4096, 8, 1


def flush_bytes(l2_bytes: int) -> int:
    """How much the L2 flush reads: four L2s, at least 256 MiB."""
    return max(256 << 20, 4 * l2_bytes)


def launch_arguments(buf: Any, sink: Any, gate: Any, timeouts: Any,
                     flush_words: int) -> dict[str, dict[str, Any]]:
    """Each timer kernel's launch arguments (its int32 arrays given; the hold's epoch is 1).

    The timer's launches and :mod:`.timer_ahead`'s compiles (every array a dtype placeholder)
    both take them from here, so that the compile ahead specialises as the launch will and the
    launch finds it in Triton's cache. Each array is an allocation of its own, 16-byte aligned
    as a placeholder is taken to be: the hold's counter was a view 4 bytes into the gate's
    allocation, which specialises otherwise and would compile again.
    """
    from jupyter_ktune.measure.held_runs import HOLD_MAX_NS

    return {"ktune_l2_flush": {"buf": buf, "n": flush_words, "sink": sink,
                               "BLOCK": FLUSH_BLOCK, "num_warps": FLUSH_WARPS},
            "ktune_empty": {"sink": sink},
            "ktune_hold": {"gate": gate, "timeouts": timeouts, "epoch": 1,
                           "MAX_NS": HOLD_MAX_NS, "num_warps": HOLD_WARPS}}


def timer_arrays(torch: Any, flush_bytes: int, device: str = "cuda") -> tuple[Any, ...]:
    """The timer's int32 arrays: the flush's buffer, the sink, the hold's gate word and its
    timeout counter, each an allocation of its own (see :func:`launch_arguments`)."""
    return (torch.zeros(flush_bytes // 4, dtype=torch.int32, device=device),
            *(torch.zeros(1, dtype=torch.int32, device=device) for _ in range(3)))


class TorchTimer:
    """DeviceTimer over torch CUDA events on the current stream, with a read-only L2 flush."""

    name = "torch CUDA"

    def __init__(self, flush_bytes: int = 256 << 20, sm_count: int = 132):
        import torch

        self._torch = torch
        self.l2_flush_bytes = flush_bytes
        self._buf, self._sink, self._word, self._timeouts = timer_arrays(torch, flush_bytes)
        mod = load_module(TIMER_SOURCE, "timer")
        self._flush = mod.ktune_l2_flush[(sm_count * 4,)]
        self._empty = mod.ktune_empty[(1,)]
        self._hold = mod.ktune_hold[(1,)]
        self._epoch = 0
        self._args = launch_arguments(self._buf, self._sink, self._word, self._timeouts,
                                      self._buf.numel())
        self._side = torch.cuda.Stream()  # torch's streams do not sync with the default one

    def synchronize(self) -> None:
        """Wait for the current stream."""
        self._torch.cuda.current_stream().synchronize()

    def new_event(self) -> Any:
        """Return a fresh timing event."""
        return self._torch.cuda.Event(enable_timing=True)

    def record(self, event: Any) -> None:
        """Record ``event`` on the current stream (the one Triton launches on)."""
        event.record()

    def wait_for(self, event: Any) -> None:
        """Wait for one recorded event (a measurement's step; the next may be queued)."""
        event.synchronize()

    def elapsed_ms(self, start: Any, end: Any) -> float:
        """Device milliseconds between two completed events."""
        return float(start.elapsed_time(end))

    def flush_l2(self) -> None:
        """Enqueue the read-only flush kernel."""
        self._flush(**self._args["ktune_l2_flush"])

    def empty_launch(self) -> None:
        """Enqueue an empty Triton kernel (its launch path is the same as the user's)."""
        self._empty(**self._args["ktune_empty"])

    def hold(self) -> None:
        """Enqueue the hold kernel: the stream waits until :meth:`release` (measure/held_runs)."""
        self._epoch += 1
        self._hold(**{**self._args["ktune_hold"], "epoch": self._epoch})

    def release(self) -> None:
        """Open the gate of the last hold from the side stream."""
        with self._torch.cuda.stream(self._side):
            self._word.fill_(self._epoch)

    def hold_timeouts(self) -> int:
        """How many holds timed out so far (reads the device counter: synchronizes)."""
        return int(self._timeouts.item())

    def warmed(self) -> TorchTimer:
        """Launch the flush, the empty kernel and a hold once (their JIT compiles and launcher
        builds), wait for them, and return self."""
        self.flush_l2()
        self.empty_launch()
        self.hold()
        self.release()
        self.synchronize()
        return self

    def kernel_clock(self) -> str | None:
        """None when CUPTI kernel records work here, else why not."""
        from jupyter_ktune.measure.cupti import cupti_status

        return cupti_status()

    def graph_ms(self, launch: Callable[[], None], launches: int) -> float | None:
        """Per-launch time of a CUDA graph of ``launches`` back-to-back launches."""
        torch = self._torch
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(launches):
                launch()
        graph.replay()
        torch.cuda.synchronize()
        reps = []
        for _ in range(5):
            s, e = self.new_event(), self.new_event()
            s.record()
            graph.replay()
            e.record()
            e.synchronize()
            reps.append(s.elapsed_time(e) / launches)
        return float(np.median(reps))
