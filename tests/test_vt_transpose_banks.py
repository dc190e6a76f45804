"""kt::vt_unit (ktune_wgmma.cuh): the lane order of the fp8 attention's V -> V^T transpose.

The e4m3 P * V reads B only K-major, so the producer's warps transpose each V tile in shared
memory (examples/attention_wgmma.ipynb). Each lane moves a unit of 4 kv rows x 4 columns: 4
word loads from the V tile (rows of D bytes, TMA swizzle span D) and 4 word stores into V^T
(rows of BN bytes, span BN). The lane-major order made every store instruction a 16-way bank
conflict at D = 128; this test compiles the header's order on the host (g++) and checks, with
a model of the 16-byte-chunk swizzle TMA and WGMMA share, that every unit is visited once and
that each warp instruction touches as few words per bank as the layout allows.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

INCLUDE = Path(__file__).resolve().parents[1] / "jupyter_ktune" / "include"
CASES = [(64, 64), (64, 128), (128, 64), (128, 128)]

PROGRAM = r"""
#include <ktune_wgmma.cuh>
#include <cstdio>
template <int D, int BN> void dump() {
  for (int step = 0; step < BN * D / 512; ++step)
    for (int lane = 0; lane < 32; ++lane) {
      const kt::VtUnit u = kt::vt_unit<D, BN>(lane, step);
      std::printf("%d %d %d %d %d %d\n", D, BN, step, lane, u.ku, u.dq);
    }
}
int main() { dump<64, 64>(); dump<64, 128>(); dump<128, 64>(); dump<128, 128>(); return 0; }
"""


def swizzle(off: int, span: int) -> int:
    """Byte offset ``off`` of a tile with rows ``span`` bytes wide, under the swizzle of that
    span: the 16-byte chunk index XORed with the 128-byte line index (TMA's SW64 / SW128)."""
    return off ^ (((off >> 7) & (span // 16 - 1)) << 4)


def ways(byte_offsets: list[int]) -> int:
    """Shared-memory wavefronts of one warp access: distinct 4-byte words in the worst bank."""
    banks: dict[int, set[int]] = {}
    for off in byte_offsets:
        banks.setdefault((off // 4) % 32, set()).add(off // 4)
    return max(len(words) for words in banks.values())


def accesses(d: int, bn: int, units: list[tuple[int, int]], i: int) -> tuple[list, list]:
    """Word ``i`` of each lane's unit: where it is loaded from V and stored into V^T, by the
    cell's formulas (kv row x + (i & 1) + 8 (i >> 1), V^T row 4 dq + i at byte 4 ku)."""
    loads, stores = [], []
    for ku, dq in units:
        kv0 = 32 * (ku >> 3) + 16 * ((ku >> 2) & 1) + 2 * (ku & 3)
        loads.append(swizzle((kv0 + (i & 1) + 8 * (i >> 1)) * d + 4 * dq, d))
        stores.append(swizzle((4 * dq + i) * bn + 4 * ku, bn))
    return loads, stores


def lane_major(d: int, bn: int) -> dict[int, list[tuple[int, int]]]:
    """The order the transpose had: unit u = 32 step + lane, dq = u % (D / 4) fastest."""
    return {s: [divmod(32 * s + lane, d // 4) for lane in range(32)]
            for s in range(bn * d // 512)}


def worst(d: int, bn: int, steps: dict[int, list[tuple[int, int]]]) -> tuple[int, int]:
    load_ways = store_ways = 0
    for units in steps.values():
        for i in range(4):
            loads, stores = accesses(d, bn, units, i)
            load_ways, store_ways = max(load_ways, ways(loads)), max(store_ways, ways(stores))
    return load_ways, store_ways


@pytest.fixture(scope="module")
def header_orders(tmp_path_factory: pytest.TempPathFactory) -> dict:
    if shutil.which("g++") is None:
        pytest.skip("g++ not found on PATH")
    tmp = tmp_path_factory.mktemp("vt")
    (tmp / "vt.cpp").write_text(PROGRAM)
    built = subprocess.run(["g++", "-std=c++14", "-Wall", "-Werror", f"-I{INCLUDE}", "vt.cpp",
                            "-o", "vt"], cwd=tmp, capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr
    rows = subprocess.run([str(tmp / "vt")], capture_output=True, text=True,
                          check=True).stdout.split("\n")
    orders: dict = {}
    for row in filter(None, rows):
        d, bn, step, _lane, ku, dq = map(int, row.split())
        orders.setdefault((d, bn), {}).setdefault(step, []).append((ku, dq))
    return orders


@pytest.mark.parametrize("d,bn", CASES)
def test_every_unit_once(header_orders: dict, d: int, bn: int) -> None:
    steps = header_orders[(d, bn)]
    units = [u for us in steps.values() for u in us]
    assert sorted(units) == [(ku, dq) for ku in range(bn // 4) for dq in range(d // 4)]


@pytest.mark.parametrize("d,bn", CASES)
def test_each_warp_access_is_conflict_free(header_orders: dict, d: int, bn: int) -> None:
    """1 wavefront where the rows are 128 bytes; 2 where they are 64 (the least possible:
    the word's row parity is the same for all lanes of one instruction)."""
    load_ways, store_ways = worst(d, bn, header_orders[(d, bn)])
    assert (load_ways, store_ways) == (1 if d == 128 else 2, 1 if bn == 128 else 2)


def test_the_model_sees_the_old_order_conflict() -> None:
    """The lane-major order, through the same model: 16-way stores at D = 128 (what the fp8
    kernel ran at D = 128 until this order), 8-way at D = 64."""
    assert worst(128, 128, lane_major(128, 128)) == (1, 16)
    assert worst(64, 128, lane_major(64, 128)) == (2, 8)
