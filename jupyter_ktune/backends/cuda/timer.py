"""CupyTimer: the DeviceTimer of CUDA C++ cells (CuPy events on the current stream).

CuPy is imported when a timer is made, i.e. in the worker only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# The flush READS a buffer much larger than L2. Writing it instead (do_bench's ``zero_``) leaves
# L2 full of dirty lines whose write-back then lands inside the timed kernel: on the H200 that
# made a 48 us copy read 54 us (bench/results/foundation-timing.md). A read leaves clean lines.
_FLUSH_SRC = r"""
extern "C" __global__ void ktune_l2_flush(const int4* __restrict__ buf, long long n, int* sink) {
  int acc = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    int4 v = buf[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x7fffffff) sink[0] = acc;  // never true (the buffer is zero); keeps the loads
}
extern "C" __global__ void ktune_empty() {}
// The hold (measure/held_runs.py): wait until the host writes `epoch` into `gate` from another
// stream, or `max_ns` pass (then count a timeout). One thread; volatile reads go to L2.
extern "C" __global__ void ktune_hold(const volatile int* gate, int epoch,
                                      unsigned long long max_ns, int* timeouts) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  t = t0;
  while (*gate < epoch && t - t0 < max_ns) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  if (*gate < epoch) atomicAdd(timeouts, 1);
}
"""

class CupyTimer:
    """DeviceTimer over CuPy events on the current stream, with a read-only L2 flush."""

    name = "CUDA"

    def __init__(self, flush_bytes: int = 256 << 20, sm_count: int = 132):
        import cupy

        self._cupy = cupy
        self.l2_flush_bytes = flush_bytes
        self._flush = cupy.zeros(flush_bytes // 16 * 4, dtype=cupy.int32)
        self._sink = cupy.zeros(1, dtype=cupy.int32)
        module = cupy.RawModule(code=_FLUSH_SRC)
        self._flush_kernel = module.get_function("ktune_l2_flush")
        self._empty_kernel = module.get_function("ktune_empty")
        self._flush_grid = (sm_count * 4,)
        self._hold_kernel = module.get_function("ktune_hold")
        self._gate = cupy.zeros(2, dtype=cupy.int32)  # [gate, timeouts]
        self._word, self._timeouts = self._gate[:1], self._gate[1:]
        self._epoch = 0
        # non-blocking: a stream that synchronised with the legacy default stream would wait
        # for the held work it is meant to release
        self._side = cupy.cuda.Stream(non_blocking=True)
        # compile the release's fill kernel now: compiled on the first release, it kept the
        # first hold waiting past its timeout (bench/results/hold_ab/2026-12-02-1700)
        with self._side:
            self._word.fill(-1)
            self._word.fill(0)
        self._side.synchronize()

    def synchronize(self) -> None:
        """Wait for all work queued on the current stream."""
        self._cupy.cuda.get_current_stream().synchronize()

    def new_event(self) -> Any:
        """Return a fresh CUDA event (not yet recorded)."""
        return self._cupy.cuda.Event()

    def record(self, event: Any) -> None:
        """Record ``event`` on the current stream."""
        event.record()

    def wait_for(self, event: Any) -> None:
        """Wait for one recorded event (a measurement's step; the next may be queued)."""
        event.synchronize()

    def elapsed_ms(self, start: Any, end: Any) -> float:
        """Return the device time between two recorded, completed events."""
        return float(self._cupy.cuda.get_elapsed_time(start, end))

    def empty_launch(self) -> None:
        """Enqueue the empty kernel, to measure what the events add."""
        self._empty_kernel((1,), (32,), ())

    def hold(self) -> None:
        """Enqueue the hold kernel: the stream waits until :meth:`release` (measure/held_runs)."""
        from jupyter_ktune.measure.held_runs import HOLD_MAX_NS

        self._epoch += 1
        self._hold_kernel((1,), (1,), (self._gate, np.int32(self._epoch),
                                       np.uint64(HOLD_MAX_NS), self._timeouts))

    def release(self) -> None:
        """Open the gate of the last hold from the side stream."""
        with self._side:
            self._word.fill(self._epoch)

    def hold_timeouts(self) -> int:
        """How many holds timed out so far (reads the device counter: synchronizes)."""
        return int(self._timeouts.get()[0])

    def kernel_clock(self) -> str | None:
        """Return None when CUPTI kernel records work, else the reason they don't."""
        from jupyter_ktune.measure.cupti import cupti_status

        return cupti_status()

    def flush_l2(self) -> None:
        """Enqueue the flush kernel over a buffer larger than the L2 cache."""
        n = self._flush.size // 4
        self._flush_kernel(self._flush_grid, (512,), (self._flush, np.int64(n), self._sink))

    def graph_ms(self, launch: Any, launches: int) -> float | None:
        """Return the per-launch time of a captured graph, or None if unsupported."""
        cp = self._cupy
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            stream.begin_capture()
            for _ in range(launches):
                launch()
            graph = stream.end_capture()
            graph.launch()
            stream.synchronize()
            reps = []
            for _ in range(5):
                s, e = cp.cuda.Event(), cp.cuda.Event()
                s.record()
                graph.launch()
                e.record()
                e.synchronize()
                reps.append(cp.cuda.get_elapsed_time(s, e) / launches)
        return float(np.median(reps))
