"""Plain-text view of a :class:`~jupyter_ktune.measure.static.StaticReport`, for a terminal.

The twin of :mod:`jupyter_ktune.measure.static_html`: the same facts (registers, shared memory,
spills, stack, theoretical occupancy, SASS mix), a few lines per kernel, so ``ktune static``
shows in a shell what the notebook shows in its card.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jupyter_ktune.render import counted

if TYPE_CHECKING:
    from jupyter_ktune.measure.sass import SassMix
    from jupyter_ktune.measure.static import KernelStatic, StaticReport

__all__ = ["report_text"]

# SASS categories worth a word in a terminal, in reading order
_MIX = (("tma", "TMA"), ("async_copy", "cp.async"), ("shared_load", "LDS"),
        ("shared_store", "STS"), ("barrier", "barriers"), ("fp32", "fp32"))


def report_text(rep: StaticReport) -> str:
    """Render ``rep`` as indented text, one block per kernel.

    Examples
    --------
    >>> print(report_text(rep))  # doctest: +SKIP
    static report for sm_90 (nvcc 13.0, cuobjdump 13.0)
      void scale<256>(float const*, float*, int)
        registers 10 · shared memory 0 B · spills 0 B stored / 0 B loaded · stack 0 B
        occupancy 100%: 8 blocks of 256 threads per SM, limited by warps
        SASS (24 instructions): no tensor-core MMA · LDG.32 ×1 · STG.32 ×1 · LDL/STL 0/0
    """
    versions = ", ".join(f"{tool} {v}" for tool, v in rep.versions.items())
    lines = [f"static report for {rep.arch}" + (f" ({versions})" if versions else "")]
    for k in rep.kernels.values():
        lines += [f"  {k.demangled}",
                  f"    registers {k.registers} · shared memory {_bytes(k.smem_static)}"
                  + (f" + {_bytes(rep.dynamic_smem)} dynamic" if rep.dynamic_smem else "")
                  + " · spills "
                  f"{k.spill_stores} B stored / {k.spill_loads} B loaded · stack "
                  f"{_bytes(k.local_memory)}",
                  f"    {_occupancy(rep, k)}",
                  f"    {_mix(k.sass, rep.sass_error)}"]
    return "\n".join(lines)


def _occupancy(rep: StaticReport, k: KernelStatic) -> str:
    if rep.threads_per_block is None:
        return "occupancy: block size unknown (give --config values or a block = ... directive)"
    try:
        occ = rep.occupancy(k.name, rep.threads_per_block)
    except ValueError as exc:
        return f"occupancy: {exc}"
    if occ.active_blocks_per_sm == 0:
        return f"occupancy 0%: {occ.reason or 'the block does not fit on an SM'}"
    return (f"occupancy {occ.occupancy:.0%}: {counted(occ.active_blocks_per_sm, 'block')} of "
            f"{counted(rep.threads_per_block, 'thread')} per SM, "
            f"limited by {occ.limiter.replace('_', ' ')}")


def _mix(mix: SassMix | None, error: str) -> str:
    if mix is None:
        return f"SASS: {error or 'no disassembler found'}"
    parts = [f"tensor-core MMA ×{mix.tensor_mma}" + (" (wgmma)" if mix.uses_wgmma else "")
             if mix.uses_tensor_cores else "no tensor-core MMA"]
    parts += [f"LDG.{bits} ×{n}" for bits, n in mix.global_load_bits.items()]
    parts += [f"STG.{bits} ×{n}" for bits, n in mix.global_store_bits.items()]
    parts.append(f"LDL/STL {mix.categories.get('local_load', 0)}/"
                 f"{mix.categories.get('local_store', 0)}")
    parts += [f"{label} ×{mix.categories[cat]}" for cat, label in _MIX if mix.categories.get(cat)]
    return f"SASS ({counted(mix.instructions, 'instruction')}): " + " · ".join(parts)


def _bytes(n: int) -> str:
    return f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n} B"
