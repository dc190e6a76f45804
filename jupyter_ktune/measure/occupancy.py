"""Theoretical occupancy: how many blocks of a kernel fit on one SM, and what stops more.

Works without a GPU: the per-architecture limits are a table, and the arithmetic follows
``cuda_occupancy.h`` from the CUDA toolkit (``cudaOccMaxActiveBlocksPerMultiprocessor``), so the
numbers match the CUDA occupancy calculator and ``cudaOccupancyMaxActiveBlocksPerMultiprocessor``
with the default shared-memory carveout. Two details from that header matter for tuning:

* registers are allocated per warp in units of 256 and *per SM sub-partition* (4 per SM), so a
  40-register kernel fits 48 warps, not the 51 that ``65536 / (40 * 32)`` suggests;
* since Ampere the driver reserves 1 KiB of shared memory per block, on top of what the kernel
  asks for.

Not modelled: the Hopper block-barrier limit (only binds with many named barriers), partitioned
global caching (pre-Volta) and carveouts smaller than the maximum.

Examples
--------
>>> from jupyter_ktune.measure.occupancy import occupancy
>>> occ = occupancy("sm_90", threads_per_block=256, regs_per_thread=128, smem_per_block=0)
>>> occ.active_blocks_per_sm, occ.limiter, occ.occupancy
(2, 'registers', 0.25)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from jupyter_ktune.errors import PREFIX

Limiter = Literal["warps", "registers", "shared_memory", "blocks"]
# On a tie the first limiter in this order is reported: a slot limit (warps, blocks) is the
# more useful answer, since raising registers or smem would not help.
_LIMITER_ORDER: tuple[Limiter, ...] = ("warps", "blocks", "registers", "shared_memory")

WARP_SIZE = 32
KIB = 1024


@dataclass(frozen=True)
class ArchLimits:
    """Per-SM hardware limits of one compute capability (CUDA programming guide, table 21).

    Parameters
    ----------
    arch
        ``"sm_90"`` style name.
    max_threads_per_sm, max_blocks_per_sm
        Resident thread and block slots of one SM.
    max_threads_per_block
        Launch limit (1024 on every current GPU).
    regs_per_sm, max_regs_per_thread, reg_alloc_unit
        Register file size (32-bit registers), the ptxas per-thread ceiling, and the allocation
        unit in registers per warp.
    smem_per_sm, max_smem_per_block, reserved_smem_per_block, smem_alloc_unit
        Shared memory in bytes: per SM at the largest carveout, the per-block opt-in maximum
        (``cudaFuncAttributeMaxDynamicSharedMemorySize``), the driver's per-block reservation and
        the allocation granularity.
    sub_partitions
        SM sub-partitions (SMSPs); registers are split evenly among them.
    """

    arch: str
    max_threads_per_sm: int
    max_blocks_per_sm: int
    smem_per_sm: int
    max_smem_per_block: int
    max_threads_per_block: int = 1024
    regs_per_sm: int = 65536
    max_regs_per_thread: int = 255
    reg_alloc_unit: int = 256
    reserved_smem_per_block: int = 1 * KIB
    smem_alloc_unit: int = 128
    sub_partitions: int = 4

    @property
    def max_warps_per_sm(self) -> int:
        """Resident warp slots of one SM."""
        return self.max_threads_per_sm // WARP_SIZE


ARCHS: dict[str, ArchLimits] = {
    lim.arch: lim
    for lim in (
        ArchLimits("sm_80", 2048, 32, smem_per_sm=164 * KIB, max_smem_per_block=163 * KIB),
        ArchLimits("sm_86", 1536, 16, smem_per_sm=100 * KIB, max_smem_per_block=99 * KIB),
        ArchLimits("sm_89", 1536, 24, smem_per_sm=100 * KIB, max_smem_per_block=99 * KIB),
        ArchLimits("sm_90", 2048, 32, smem_per_sm=228 * KIB, max_smem_per_block=227 * KIB),
        ArchLimits("sm_100", 2048, 32, smem_per_sm=228 * KIB, max_smem_per_block=227 * KIB),
    )
}


@dataclass(frozen=True)
class Occupancy:
    """Theoretical occupancy of one launch configuration on one SM.

    ``blocks_by_*`` are the block counts each resource alone would allow; the smallest one is
    ``active_blocks_per_sm`` and names the ``limiter``. ``occupancy`` is active warps over the
    SM's warp slots (1.0 = every slot filled). A block that cannot fit at all (too much shared
    memory or registers) gives 0 blocks, occupancy 0.0 and a ``reason``.
    """

    arch: str
    threads_per_block: int
    regs_per_thread: int
    smem_per_block: int
    active_blocks_per_sm: int
    active_warps_per_sm: int
    occupancy: float
    limiter: Limiter
    blocks_by_warps: int
    blocks_by_registers: int
    blocks_by_shared_memory: int
    blocks_by_blocks: int
    reason: str = ""

    def to_dict(self) -> dict:
        """Return a JSON-ready dict of every field."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def arch_limits(arch: str) -> ArchLimits:
    """Return the limits of ``arch``, accepting ``sm_90a``/``sm_100a`` and ``compute_90`` spellings.

    Raises
    ------
    TypeError
        ``arch`` is not a string.
    ValueError
        The architecture is not in the table; the message lists the known ones.
    """
    if not isinstance(arch, str):
        raise TypeError(f"{PREFIX} arch must be a string such as 'sm_90', "
                        f"got {type(arch).__name__}")
    match = re.fullmatch(r"(?:sm|compute)_(\d+)[af]?", arch.strip().lower())
    key = f"sm_{match.group(1)}" if match else arch
    if key not in ARCHS:
        raise ValueError(f"{PREFIX} no occupancy limits for arch {arch!r}; "
                         f"known: {', '.join(ARCHS)}")
    return ARCHS[key]


def occupancy(arch: str, threads_per_block: int, regs_per_thread: int,
              smem_per_block: int = 0) -> Occupancy:
    """Compute the theoretical occupancy of a kernel launch, like the CUDA occupancy calculator.

    Parameters
    ----------
    arch
        Target, such as ``"sm_90"`` or ``"sm_90a"``.
    threads_per_block
        Threads per block (1..1024).
    regs_per_thread
        Registers per thread from ptxas (0..255).
    smem_per_block
        Static plus dynamic shared memory in bytes, *without* the driver's 1 KiB reservation
        (added here). Above 48 KiB a kernel must opt in with ``cudaFuncSetAttribute``; this
        function assumes it did.

    Returns
    -------
    Occupancy
        Active blocks and warps per SM, the occupancy fraction and the limiting resource.

    Raises
    ------
    TypeError
        An argument is not an int (``bool`` is refused too).
    ValueError
        Unknown arch, a block over the thread limit, registers over 255, or a negative value.

    Examples
    --------
    >>> occupancy("sm_90", 256, 32, 0).occupancy
    1.0
    >>> occupancy("sm_90", 128, 32, 200 * 1024).limiter
    'shared_memory'
    """
    lim = arch_limits(arch)
    for name, value in (("threads_per_block", threads_per_block),
                        ("regs_per_thread", regs_per_thread), ("smem_per_block", smem_per_block)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{PREFIX} {name} must be an int, got {type(value).__name__}")
        if value < 0:
            raise ValueError(f"{PREFIX} {name} must be >= 0, got {value}")
    if not 1 <= threads_per_block <= lim.max_threads_per_block:
        raise ValueError(f"{PREFIX} threads_per_block={threads_per_block} is outside 1.."
                         f"{lim.max_threads_per_block}, the per-block limit of {lim.arch}")
    if regs_per_thread > lim.max_regs_per_thread:
        raise ValueError(f"{PREFIX} regs_per_thread={regs_per_thread} exceeds "
                         f"{lim.max_regs_per_thread}, the most ptxas can allocate on {lim.arch}")
    return _occupancy(lim, arch, threads_per_block, regs_per_thread, smem_per_block)


def _occupancy(lim: ArchLimits, arch: str, threads: int, regs: int, smem: int) -> Occupancy:
    warps_per_block = -(-threads // WARP_SIZE)
    by_warps = lim.max_warps_per_sm // warps_per_block
    by_regs, reg_reason = _blocks_by_registers(lim, warps_per_block, regs)
    by_smem, smem_reason = _blocks_by_smem(lim, smem)
    counts: dict[Limiter, int] = {"warps": by_warps, "blocks": lim.max_blocks_per_sm,
                                  "registers": by_regs, "shared_memory": by_smem}
    blocks = min(counts.values())
    limiter = next(name for name in _LIMITER_ORDER if counts[name] == blocks)
    warps = blocks * warps_per_block
    return Occupancy(
        arch=arch, threads_per_block=threads, regs_per_thread=regs, smem_per_block=smem,
        active_blocks_per_sm=blocks, active_warps_per_sm=warps,
        occupancy=warps / lim.max_warps_per_sm, limiter=limiter,
        blocks_by_warps=by_warps, blocks_by_registers=by_regs,
        blocks_by_shared_memory=by_smem, blocks_by_blocks=lim.max_blocks_per_sm,
        reason=smem_reason or reg_reason,
    )


def _blocks_by_registers(lim: ArchLimits, warps_per_block: int, regs: int) -> tuple[int, str]:
    # cuda_occupancy.h cudaOccMaxBlocksPerSMRegsLimit: round per-warp use up to the allocation
    # unit, fit whole warps into each sub-partition's quarter of the register file.
    if regs == 0:
        return lim.max_blocks_per_sm, ""
    per_warp = -(-regs * WARP_SIZE // lim.reg_alloc_unit) * lim.reg_alloc_unit
    # The hardware launch check assumes warps are spread over all sub-partitions at once.
    assumed_warps = -(-warps_per_block // lim.sub_partitions) * lim.sub_partitions
    if per_warp * assumed_warps > lim.regs_per_sm:
        return 0, (f"a block needs {per_warp * assumed_warps} registers "
                   f"({regs}/thread), more than the {lim.regs_per_sm} of one SM")
    warps_per_sub = (lim.regs_per_sm // lim.sub_partitions) // per_warp
    return (warps_per_sub * lim.sub_partitions) // warps_per_block, ""


def _blocks_by_smem(lim: ArchLimits, smem: int) -> tuple[int, str]:
    # cudaOccMaxBlocksPerSMSmemLimit: the 1 KiB driver reservation counts, rounded to 128 B.
    if smem > lim.max_smem_per_block:
        return 0, (f"{smem} B of shared memory per block exceeds the {lim.max_smem_per_block} B "
                   f"({lim.max_smem_per_block // KIB} KiB) a block may use on {lim.arch}")
    unit = lim.smem_alloc_unit
    allocated = -(-(smem + lim.reserved_smem_per_block) // unit) * unit
    return lim.smem_per_sm // allocated, ""
