"""TorchTimer: the DeviceTimer of Triton cells on a GPU (torch CUDA events, a Triton flush)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from jupyter_ktune.backends.triton.module import load_module

# The flush READS 256 MiB (a write leaves dirty lines whose write-back lands in the timed kernel,
# bench/results/foundation-timing.md); named like the CUDA one so CUPTI records skip it.
_TIMER_SOURCE = '''
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


class TorchTimer:
    """DeviceTimer over torch CUDA events on the current stream, with a read-only L2 flush."""

    name = "torch CUDA"

    def __init__(self, flush_bytes: int = 256 << 20, sm_count: int = 132):
        import torch

        self._torch = torch
        self.l2_flush_bytes = flush_bytes
        self._buf = torch.zeros(flush_bytes // 4, dtype=torch.int32, device="cuda")
        self._sink = torch.zeros(1, dtype=torch.int32, device="cuda")
        mod = load_module(_TIMER_SOURCE, "timer")
        self._flush = mod.ktune_l2_flush[(sm_count * 4,)]
        self._empty = mod.ktune_empty[(1,)]
        self._hold = mod.ktune_hold[(1,)]
        self._gate = torch.zeros(2, dtype=torch.int32, device="cuda")  # [gate, timeouts]
        self._word, self._timeouts = self._gate[:1], self._gate[1:]
        self._epoch = 0
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
        self._flush(self._buf, self._buf.numel(), self._sink, BLOCK=4096, num_warps=8)

    def empty_launch(self) -> None:
        """Enqueue an empty Triton kernel (its launch path is the same as the user's)."""
        self._empty(self._sink)

    def hold(self) -> None:
        """Enqueue the hold kernel: the stream waits until :meth:`release` (measure/held_runs)."""
        from jupyter_ktune.measure.held_runs import HOLD_MAX_NS

        self._epoch += 1
        self._hold(self._gate, self._timeouts, self._epoch, MAX_NS=HOLD_MAX_NS, num_warps=1)

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
