"""The TMA GEMM cell's best configs against cuBLAS, interleaved, with a CI on the ratio.

``gemm_vs_cublas.py`` times cuBLAS once (or twice) and each config once. On the H200 runs of
issue 8, cuBLAS's do_bench median moved from 1.38 to 1.62 ms between runs and even within one
process, so one sample per side can't carry a 95 % claim. Here every round times cuBLAS and each
config back to back (``triton.testing.do_bench``, median, rotating the order), and the ratio
median(cuBLAS) / median(config) gets a bootstrap 95 % CI over the rounds
(``jupyter_ktune.tune.report.ratio_ci``). The kernel is the notebook's own cell, loaded the way
the worker loads it, and checked once against ``torch.matmul``.

    python bench/gemm_interleaved.py [SIZE] [--rounds N] [--json PATH]     # on the GPU
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

BEST = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, NUM_SMS=132,
            EPILOGUE_SUBTILE=1, WARP_SPECIALIZE=0)
CONFIGS = {"tma s4": dict(BEST, num_stages=4), "tma s3": dict(BEST, num_stages=3)}


class PowerSampler:
    """SM clock and board power from NVML every 20 ms on a thread, tagged with the side being
    timed: to see whether a side ran at the power limit rather than to guess it."""

    def __init__(self, period_s: float = 0.02):
        import threading
        self.rows: list[tuple[str, int, int, float]] = []  # side, round, SM MHz, W
        self._tag: tuple[str, int] | None = None
        self._done = threading.Event()
        try:
            import pynvml
            pynvml.nvmlInit()
            self._nvml, self._h = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
            self.limit_w = pynvml.nvmlDeviceGetEnforcedPowerLimit(self._h) / 1000
        except Exception as exc:  # noqa: BLE001 - no NVML: the timings still stand
            print(f"no NVML ({exc}): clocks and power not read", flush=True)
            self._nvml = None
            return
        self._thread = threading.Thread(target=self._run, args=(period_s,), daemon=True)
        self._thread.start()

    def _run(self, period_s: float) -> None:
        nv = self._nvml
        while not self._done.wait(period_s):
            tag = self._tag
            if tag is not None:
                self.rows.append((tag[0], tag[1], nv.nvmlDeviceGetClockInfo(self._h, nv.NVML_CLOCK_SM),
                                  nv.nvmlDeviceGetPowerUsage(self._h) / 1000))

    @contextlib.contextmanager
    def tagged(self, side: str, rnd: int):
        """Samples taken inside the block belong to ``side`` in round ``rnd``."""
        self._tag = (side, rnd)
        try:
            yield
        finally:
            self._tag = None

    def round_text(self, rnd: int) -> str:
        import numpy as np
        parts = []
        for side in dict.fromkeys(r[0] for r in self.rows if r[1] == rnd):
            rows = [r for r in self.rows if r[1] == rnd and r[0] == side]
            parts.append(f"{side} {np.median([r[2] for r in rows]):.0f} MHz "
                         f"{np.median([r[3] for r in rows]):.0f} W")
        return ", ".join(parts) if parts else "no NVML"

    def summary(self) -> dict:
        import numpy as np
        if self._nvml is None:
            return {}
        out: dict = {"enforced_limit_w": self.limit_w}
        for side in dict.fromkeys(r[0] for r in self.rows):
            rows = [r for r in self.rows if r[0] == side]
            out[side] = {"sm_mhz_median": float(np.median([r[2] for r in rows])),
                         "watts_median": float(np.median([r[3] for r in rows])),
                         "watts_max": float(max(r[3] for r in rows)), "samples": len(rows)}
        return out

    def stop(self) -> None:
        self._done.set()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("size", type=int, nargs="?", default=8192)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--json", type=Path, default=Path("gemm_interleaved.json"))
    args = ap.parse_args()

    import numpy as np
    import torch
    import triton

    from gemm_vs_cublas import cells
    from jupyter_ktune.backends.triton.module import ensure_allocator, load_module
    from jupyter_ktune.tune.report import ratio_ci

    ensure_allocator()
    n = args.size
    kernel = getattr(load_module(cells()["matmul_tma"][1], "matmul_tma"), "matmul_tma")
    a = torch.randn(n, n, device="cuda").to(torch.bfloat16)
    b = torch.randn(n, n, device="cuda").to(torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    expected = torch.matmul(a, b)

    def launcher(cfg):
        grid = (min(cfg["NUM_SMS"], triton.cdiv(n, cfg["BLOCK_M"]) * triton.cdiv(n, cfg["BLOCK_N"])),)
        return lambda: kernel[grid](a, b, c, n, n, n, **cfg)

    sides = {"cuBLAS": lambda: torch.matmul(a, b)}
    for name, cfg in CONFIGS.items():
        fn = launcher(cfg)
        fn()
        torch.cuda.synchronize()
        err = (c.float() - expected.float()).abs().max().item()
        assert err < 1.0, f"{name}: max abs error {err} against torch.matmul"
        sides[name] = fn
    samples: dict[str, list[float]] = {k: [] for k in sides}
    sensor = PowerSampler()
    names = list(sides)
    for r in range(args.rounds):
        for k in names[r % len(names):] + names[:r % len(names)]:  # rotate who goes first
            with sensor.tagged(k, r):
                samples[k].append(float(triton.testing.do_bench(sides[k], return_mode="median")))
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.3f} ms" for k, v in samples.items())
              + "  |  " + sensor.round_text(r), flush=True)
    sensor.stop()
    tflops = lambda ms: 2 * n ** 3 / (ms * 1e-3) / 1e12  # noqa: E731
    out = {"size": n, "rounds": args.rounds, "device": torch.cuda.get_device_name(),
           "torch": torch.__version__, "triton": triton.__version__, "configs": CONFIGS,
           "samples_ms": samples, "summary": {}, "power": sensor.summary()}
    print(f"\n{n}^3 bf16, {args.rounds} interleaved rounds of do_bench medians on "
          f"{out['device']} (torch {torch.__version__}, triton {triton.__version__})")
    for k, v in samples.items():
        med = float(np.median(v))
        row = {"median_ms": med, "min_ms": min(v), "max_ms": max(v), "tflops": tflops(med)}
        line = f"{k:8} median {med:.3f} ms [{min(v):.3f}, {max(v):.3f}] {tflops(med):6.1f} TFLOP/s"
        if k != "cuBLAS":
            ratio, lo, hi = ratio_ci(np.asarray(v), np.asarray(samples["cuBLAS"]))
            row |= {"pct_of_cublas": 100 * ratio, "ci95_pct": [100 * lo, 100 * hi]}
            line += f"  {100 * ratio:5.1f} % of cuBLAS, 95 % CI [{100 * lo:.1f}, {100 * hi:.1f}]"
        out["summary"][k] = row
        print(line)
    print("SM clock and board power while each side ran (NVML, every 20 ms): "
          + json.dumps(out["power"]))
    args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
