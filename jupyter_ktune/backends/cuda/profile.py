"""KT_SCOPE buffers of CUDA C++ cells: build the instrumented variant, run it once, parse.

The device side is the KT_SCOPE section of ``ktune.cuh`` (its comment has the buffer layout).
Here: the sampling (which blocks and warps are traced, chosen from the launch geometry so the
buffer stays small), the instrumented NVRTC build (``-DKT_PROFILE`` plus the sampling macros),
one warm launch and one traced launch, and the parser from the raw ``uint32`` buffer to a
:class:`~jupyter_ktune.measure.breakdown.Breakdown`. The parser runs anywhere (tests feed it a
buffer recorded on the H200); the rest needs CuPy and a GPU.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from jupyter_ktune.backends.cuda.archcubin import compile_with_nvcc, nvcc_runs
from jupyter_ktune.backends.cuda.flags import nvrtc_flags
from jupyter_ktune.backends.cuda.launch import CudaVariant
from jupyter_ktune.backends.cuda.nvrtc import nvrtc_options
from jupyter_ktune.backends.cuda.source import (
    cell_constants,
    device_source,
    macro_defines,
    name_expression,
    parse_signature,
)
from jupyter_ktune.backends.cuda.templates import type_arguments
from jupyter_ktune.measure.breakdown import Breakdown, pair_edges
from jupyter_ktune.measure.clocks import read_clocks

HEADER_WORDS = 12
MAGIC = 0x4B54
END_BIT = 0x80000000
_SCOPE_NAME = re.compile(r'\bKT_(?:SCOPE|BEGIN|END)\s*\(\s*"((?:[^"\\]|\\.)*)"\s*\)')


def fnv31(name: str) -> int:
    """The 31-bit FNV-1a tag of a scope name, as ``kt::prof::fnv`` computes it on the device."""
    h = 2166136261
    for byte in name.encode():
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    return h & 0x7FFFFFFF


def scope_names(source: str) -> dict[int, str]:
    """Tags of the scope names used in a cell: ``{fnv31(name): name}``."""
    return {fnv31(n): n for n in dict.fromkeys(_SCOPE_NAME.findall(source))}


def uses_scopes(source: str) -> bool:
    """True when the cell declares a trace (``KT_PROFILE_KERNEL()``) and at least one scope."""
    return "KT_PROFILE_KERNEL" in source and bool(_SCOPE_NAME.search(source))


@dataclass(frozen=True)
class ScopeSampling:
    """Which blocks and warps are traced, and how many records each traced warp keeps."""

    block_stride: int = 1
    max_blocks: int = 64
    warp_stride: int = 1
    warps: int = 4
    events: int = 256

    @classmethod
    def for_launch(cls, blocks: int, warps_per_block: int, max_blocks: int = 64,
                   warps: int = 4, events: int = 256) -> ScopeSampling:
        """Spread ``max_blocks`` traced blocks over the grid and ``warps`` over each block."""
        stride = max(1, math.ceil(blocks / max_blocks))
        wstride = max(1, math.ceil(warps_per_block / warps))
        return cls(block_stride=stride, max_blocks=min(max_blocks, math.ceil(blocks / stride)),
                   warp_stride=wstride, warps=min(warps, math.ceil(warps_per_block / wstride)),
                   events=events)

    @property
    def slot_words(self) -> int:
        """Words per traced warp: header plus ``events`` {tag, clock} pairs."""
        return HEADER_WORDS + 2 * self.events

    @property
    def buffer_words(self) -> int:
        """Size of the global buffer in 32-bit words."""
        return self.max_blocks * self.warps * self.slot_words

    def defines(self) -> dict[str, str]:
        """The ``-D`` macros the instrumented build gets."""
        return {"KT_PROFILE": "1", "KT_PROFILE_BLOCK_STRIDE": str(self.block_stride),
                "KT_PROFILE_MAX_BLOCKS": str(self.max_blocks),
                "KT_PROFILE_WARP_STRIDE": str(self.warp_stride),
                "KT_PROFILE_WARPS": str(self.warps), "KT_PROFILE_EVENTS": str(self.events)}

    def describe(self) -> str:
        """The sampling in words, for the breakdown's notes."""
        return (f"traced every {self.block_stride}th block (up to {self.max_blocks}) and every "
                f"{self.warp_stride}th warp (up to {self.warps} per block), lane 0, at most "
                f"{self.events} records per warp")


def fitted_clock_mhz(words: np.ndarray, sampling: ScopeSampling) -> float | None:
    """SM clock fitted from each traced warp's (clock, globaltimer) pairs: median, in MHz.

    Only warps that ran at least 20 µs count (the global timer ticks in 32 ns steps).
    """
    slots = words.reshape(-1, sampling.slot_words)
    used = slots[(slots[:, 0] != 0) & (slots[:, 11] == MAGIC)]
    if not len(used):
        return None
    gt0 = used[:, 5].astype(np.uint64) | (used[:, 6].astype(np.uint64) << np.uint64(32))
    gt1 = used[:, 7].astype(np.uint64) | (used[:, 8].astype(np.uint64) << np.uint64(32))
    dns = (gt1 - gt0).astype(np.float64)
    dcyc = ((used[:, 10].astype(np.int64) - used[:, 9].astype(np.int64)) % (1 << 32))
    ok = dns >= 20_000
    if not ok.any():
        return None
    return float(np.median(dcyc[ok] / dns[ok] * 1e3))


def parse_scope_buffer(words: np.ndarray, sampling: ScopeSampling, names: dict[int, str],
                       sm_mhz: float | None, kernel: str, clock_source: str = "NVML"
                       ) -> Breakdown:
    """Parse a raw KT_SCOPE buffer (``uint32`` words) into a Breakdown.

    ``sm_mhz`` is the SM clock measured during the run (NVML); without it the clock fitted from
    the buffer's own clock/globaltimer pairs is used, and the notes say so.
    """
    t_start = time.perf_counter()
    words = np.ascontiguousarray(words, dtype=np.uint32).ravel()
    if words.size % sampling.slot_words:
        raise ValueError(f"[ktune] KT_SCOPE buffer of {words.size} words is not a whole number of "
                         f"{sampling.slot_words}-word slots: was it recorded with other sampling?")
    slots = words.reshape(-1, sampling.slot_words)
    used = slots[slots[:, 0] != 0]
    bad = int((used[:, 11] != MAGIC).sum())
    used = used[used[:, 11] == MAGIC]
    fit = fitted_clock_mhz(words, sampling)
    notes = [sampling.describe()]
    if sm_mhz is None or sm_mhz <= 0:
        if fit is None:
            raise ValueError("[ktune] no SM clock: NVML gave none and the traced warps ran too "
                             "briefly to fit one; cycles cannot be converted (never 1 GHz)")
        sm_mhz, clock_source = fit, "fitted from %clock64 vs %globaltimer (NVML unavailable)"
    elif fit is not None and abs(fit - sm_mhz) / sm_mhz > 0.05:
        notes.append(f"the clock fitted from %globaltimer ({fit:.0f} MHz) differs from "
                     f"{clock_source}'s {sm_mhz:.0f} MHz by more than 5%: the clock changed "
                     "during the run")
    if bad:
        notes.append(f"{bad} slot(s) without the KT marker were ignored")
    ns_per_cycle = 1e3 / sm_mhz
    gt0 = used[:, 5].astype(np.int64) | (used[:, 6].astype(np.int64) << 32)
    gt_min = int(gt0.min()) if len(used) else 0
    cols: dict[str, list[np.ndarray]] = {k: [] for k in _COLS}
    dropped = int(used[:, 4].sum()) if len(used) else 0
    unpaired = 0
    block_ns: dict[int, int] = {}
    for block in np.unique(used[:, 0]):
        rows = used[used[:, 0] == block]
        # One clock per SM: the block's reference is its warp that started first (mod 2^32);
        # its (globaltimer, clock) pair places the whole block on the common ns axis.
        ref = rows[np.argmin((rows[:, 9].astype(np.int64) - int(rows[0, 9])
                              + (1 << 31)) % (1 << 32))]
        clk_ref = int(ref[9])
        block_ns[int(block) - 1] = (int(ref[5]) | (int(ref[6]) << 32)) - gt_min
        for r in rows:
            n = int(r[3])
            rec = r[HEADER_WORDS:HEADER_WORDS + 2 * n].reshape(-1, 2).astype(np.int64)
            cyc = (rec[:, 1] - clk_ref) % (1 << 32)
            tag, is_end = rec[:, 0] & 0x7FFFFFFF, (rec[:, 0] & END_BIT) != 0
            tags, starts, ends, left = _pairs(tag, is_end, cyc)
            unpaired += left
            k = len(tags)
            cols["scope"].append(np.array([names.get(int(t), f"tag {int(t):#x}") for t in tags],
                                          dtype=object))
            cols["unit"].append(np.full(k, int(r[1])))
            cols["sm"].append(np.full(k, int(r[2])))
            cols["block"].append(np.full(k, int(block) - 1))
            cols["start_cycles"].append(starts)
            cols["end_cycles"].append(ends)
    arrays = {k: (np.concatenate(v) if v else np.zeros(0, dtype=object if k == "scope" else
                                                        np.int64)) for k, v in cols.items()}
    base = np.array([block_ns[int(b)] for b in arrays["block"]], dtype=np.float64)
    arrays["start_ns"] = base + arrays["start_cycles"] * ns_per_cycle
    arrays["end_ns"] = base + arrays["end_cycles"] * ns_per_cycle
    if dropped:
        notes.append(f"{dropped} records dropped: a traced warp filled its {sampling.events} "
                     "slots (raise events=, or trace scopes outside the hot loop)")
    if unpaired:
        notes.append(f"{unpaired} scope edges had no partner (dropped records)")
    return Breakdown(**arrays, kernel=kernel, source="KT_SCOPE", unit_kind="warp",
                                 sm_clock_mhz=float(sm_mhz), clock_source=clock_source,
                                 notes=tuple(notes), trace_bytes=int(words.nbytes),
                                 dropped=dropped,
                                 parse_ms=(time.perf_counter() - t_start) * 1e3)


_COLS = ("scope", "unit", "sm", "block", "start_cycles", "end_cycles")


def _pairs(tag: np.ndarray, is_end: np.ndarray, cyc: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Pair one warp's begin/end records: vectorised when each tag alternates begin, end."""
    out_t, out_s, out_e, left = [], [], [], 0
    for t in np.unique(tag):
        m = tag == t
        ends = is_end[m]
        c = cyc[m]
        if len(ends) % 2 == 0 and not ends[0::2].any() and ends[1::2].all():
            out_t.append(np.full(len(c) // 2, t))
            out_s.append(c[0::2])
            out_e.append(c[1::2])
            continue
        pairs, unpaired = pair_edges([(int(t), bool(e), int(x))
                                      for e, x in zip(ends, c, strict=True)])
        left += unpaired
        out_t.append(np.array([p[0] for p in pairs], dtype=np.int64))
        out_s.append(np.array([p[1] for p in pairs], dtype=np.int64))
        out_e.append(np.array([p[2] for p in pairs], dtype=np.int64))
    if not out_t:
        z = np.zeros(0, np.int64)
        return z, z, z, 0
    return np.concatenate(out_t), np.concatenate(out_s), np.concatenate(out_e), left


# -- worker side (CuPy, a GPU) -----------------------------------------------------------------
def instrumented_variant(spec: Any, config: Any, sampling: ScopeSampling,
                         limits: Mapping[str, int], backend: Any = None
                         ) -> tuple[CudaVariant, Any]:
    """Build the variant with ``-DKT_PROFILE`` and the sampling macros, as the timed variant is
    built (:mod:`.archcubin`): with nvcc wherever it is found (always for an arch-specific
    target, ``--arch sm_90a``, which NVRTC through CuPy cannot build), else with NVRTC.

    Returns ``(variant, module)``; the module gives the ``kt_profile_out`` pointer.
    """
    import cupy

    if nvcc_runs(spec.options.arch):
        variant = compile_with_nvcc(backend, spec, config, sampling.defines())
        return variant, variant.module

    sig = parse_signature(spec)
    cxx = spec.space.cxx_env(config)
    types = type_arguments(spec, sig)
    expr = name_expression(spec, sig, cxx, types)
    options = (*nvrtc_options(spec, sig, cxx, sampling.defines()), *nvrtc_flags(spec, config))
    module = cupy.RawModule(code=device_source(spec, macro_defines(spec, sig, cxx), types),
                            options=options, name_expressions=[expr])
    fn = module.get_function(expr)
    variant = CudaVariant(spec, sig, cxx, fn, expr, limits, types)
    variant.module, variant.constants = module, cell_constants(spec)
    return variant, module


def profile_cuda(backend: Any, spec: Any, config: Any, host_args: dict[str, Any],
                 max_blocks: int = 64, warps: int = 4, events: int = 256,
                 ) -> tuple[Breakdown, np.ndarray, ScopeSampling]:
    """Trace one launch of the variant; returns the breakdown, the raw buffer and the sampling.

    ``backend`` is the CUDA backend (it compiles the plain variant and knows the device limits).
    """
    import cupy

    if not uses_scopes(spec.source):
        raise ValueError("[ktune] the cell has no KT_SCOPE: add KT_PROFILE_KERNEL(); as the "
                         "kernel's first statement and KT_SCOPE(\"load\"); in the blocks to time")
    plain = backend.compile(spec, config).bind(host_args)
    blocks = math.prod(plain.grid)
    sampling = ScopeSampling.for_launch(blocks, math.ceil(math.prod(plain.block) / 32),
                                        max_blocks, warps, events)
    variant, module = instrumented_variant(spec, config, sampling, backend.device().limits,
                                           backend)
    bound = variant.bind(host_args)
    buf = cupy.zeros(sampling.buffer_words, dtype=cupy.uint32)
    ptr = module.get_global("kt_profile_out")
    cupy.ndarray((1,), cupy.uint64, ptr).fill(buf.data.ptr)
    bound.launch()  # warm: module load, caches, clock ramp
    buf.fill(0)
    cupy.cuda.get_current_stream().synchronize()
    bound.launch()
    cupy.cuda.get_current_stream().synchronize()
    clk = read_clocks()
    words = buf.get()
    bd = parse_scope_buffer(words, sampling, scope_names(spec.source),
                            float(clk.sm_mhz) if clk else None, variant.expr,
                            clock_source="NVML SM clock read after the traced launch")
    return bd, words, sampling
