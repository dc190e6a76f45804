"""Theoretical occupancy against numbers worked out by hand from cuda_occupancy.h's rules."""

import pytest

from jupyter_ktune.measure.occupancy import ARCHS, arch_limits, occupancy


def test_small_kernel_fills_the_sm():
    # 256 threads = 8 warps; 64 warp slots -> 8 blocks; 32 regs -> 1024 regs/warp, 16 warps per
    # sub-partition -> 64 warps -> 8 blocks too; the tie is reported as "warps" (full occupancy).
    occ = occupancy("sm_90", 256, 32, 0)
    assert (occ.active_blocks_per_sm, occ.active_warps_per_sm, occ.occupancy) == (8, 64, 1.0)
    assert occ.limiter == "warps"
    assert (occ.blocks_by_warps, occ.blocks_by_registers, occ.blocks_by_blocks) == (8, 8, 32)
    # 1 KiB reservation: 233472 // 1024 = 228 blocks by shared memory.
    assert occ.blocks_by_shared_memory == 228


def test_many_registers_limit_occupancy():
    # 128 regs -> 4096 regs/warp -> 4 warps per 16384-reg sub-partition -> 16 warps -> 2 blocks.
    occ = occupancy("sm_90", 256, 128, 0)
    assert (occ.active_blocks_per_sm, occ.occupancy, occ.limiter) == (2, 0.25, "registers")


def test_registers_are_split_per_sub_partition():
    # 40 regs -> 1280/warp: 16384 // 1280 = 12 warps per sub-partition = 48 warps = 24 blocks of 2
    # warps. Dividing the whole file (65536 // 1280 = 51 warps) would wrongly give 25 blocks.
    occ = occupancy("sm_90", 64, 40, 0)
    assert (occ.active_blocks_per_sm, occ.limiter, occ.occupancy) == (24, "registers", 0.75)


def test_register_allocation_rounds_up_to_256_per_warp():
    # 65 regs * 32 = 2080 -> 2304 per warp; 32 warps need 73728 > 65536: the block cannot launch.
    occ = occupancy("sm_90", 1024, 65, 0)
    assert (occ.active_blocks_per_sm, occ.limiter, occ.occupancy) == (0, "registers", 0.0)
    assert "registers" in occ.reason
    assert occupancy("sm_90", 1024, 64, 0).active_blocks_per_sm == 1


def test_shared_memory_limits_occupancy():
    # 100 KiB + 1 KiB reserved = 103424 B; 233472 // 103424 = 2 blocks of 4 warps = 8/64.
    occ = occupancy("sm_90", 128, 32, 100 * 1024)
    assert (occ.active_blocks_per_sm, occ.limiter, occ.occupancy) == (2, "shared_memory", 0.125)
    # 48 KiB + 1 KiB = 50176 B -> 4 blocks.
    assert occupancy("sm_90", 128, 32, 48 * 1024).blocks_by_shared_memory == 4
    # Allocation is rounded up to 128 B: 1 B + 1 KiB -> 1152 B -> 202 blocks.
    assert occupancy("sm_90", 32, 16, 1).blocks_by_shared_memory == 233472 // 1152


def test_shared_memory_over_the_block_maximum_gives_zero_blocks():
    fits = occupancy("sm_90", 128, 32, 227 * 1024)
    assert fits.active_blocks_per_sm == 1
    over = occupancy("sm_90", 128, 32, 227 * 1024 + 1)
    assert (over.active_blocks_per_sm, over.limiter, over.occupancy) == (0, "shared_memory", 0.0)
    assert "exceeds" in over.reason and "227 KiB" in over.reason


def test_block_slot_limit_on_small_blocks():
    # 32 threads = 1 warp: 64 warp slots but only 32 block slots on sm_90, 16 on sm_86.
    assert occupancy("sm_90", 32, 16, 0).limiter == "blocks"
    occ = occupancy("sm_86", 32, 16, 0)
    assert (occ.active_blocks_per_sm, occ.occupancy) == (16, 16 / 48)


def test_other_archs():
    assert occupancy("sm_89", 256, 32, 0).active_blocks_per_sm == 6  # 48 warp slots
    assert occupancy("sm_80", 128, 32, 100 * 1024).active_blocks_per_sm == 1  # 164 KiB per SM
    assert occupancy("sm_90a", 256, 32, 0).occupancy == 1.0
    assert arch_limits("compute_100a") is ARCHS["sm_100"]


@pytest.mark.parametrize(("args", "error", "text"), [
    (("sm_90", 1025, 32, 0), ValueError, "threads_per_block=1025"),
    (("sm_90", 0, 32, 0), ValueError, "threads_per_block=0"),
    (("sm_90", 256, 256, 0), ValueError, "regs_per_thread=256"),
    (("sm_90", 256, 32, -1), ValueError, "smem_per_block must be >= 0"),
    (("sm_90", 256.0, 32, 0), TypeError, "threads_per_block must be an int"),
    (("sm_90", True, 32, 0), TypeError, "threads_per_block must be an int"),
    (("sm_75", 256, 32, 0), ValueError, "known: sm_80"),
    ((90, 256, 32, 0), TypeError, "arch must be a string"),
])
def test_bad_inputs_are_refused(args, error, text):
    with pytest.raises(error, match=r"^\[ktune\]") as info:
        occupancy(*args)
    assert text in str(info.value)


def test_result_is_frozen_and_serialisable():
    occ = occupancy("sm_90", 256, 32, 0)
    with pytest.raises(AttributeError):
        occ.occupancy = 0.5
    assert occ.to_dict()["limiter"] == "warps"
    assert hash(occ) == hash(occupancy("sm_90", 256, 32, 0))
