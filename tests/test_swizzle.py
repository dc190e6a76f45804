"""Tests for jupyter_ktune.swizzle: swizzle math, bank maps, conflict model.

The conflict numbers are derived by hand in the comments; the model is
32 banks of 4 bytes, bank(b) = (b // 4) % 32, 16-byte accesses served a
quarter warp at a time and 8-byte accesses a half warp at a time.
"""

from __future__ import annotations

import numpy as np
import pytest

from jupyter_ktune.swizzle import (
    Swizzle,
    bank_map,
    conflicts,
    grouped_tile,
    swizzle_index,
    swizzle_offset,
)

MODES = list(Swizzle)
SWIZZLED = [Swizzle.B32, Swizzle.B64, Swizzle.B128]


def _reference(offset: int, mode: Swizzle) -> int:
    """Swizzle written the other way round: permute 16-byte chunks per row.

    Chunk c of 128-byte row r moves to chunk c ^ (r mod 2**bits), TMA's
    description of the pattern, independent of the bit-mask form under test.
    """
    row, chunk, byte = offset // 128, (offset // 16) % 8, offset % 16
    new_chunk = chunk ^ (row % (1 << mode.bits))
    return row * 128 + new_chunk * 16 + byte


# --- swizzle_offset ---------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_matches_chunk_permutation_reference(mode: Swizzle) -> None:
    """The bit-mask swizzle equals the per-row chunk permutation."""
    offsets = np.arange(4096)
    expected = [_reference(int(o), mode) for o in offsets]
    assert swizzle_offset(offsets, mode).tolist() == expected


@pytest.mark.parametrize(
    ("mode", "span"), [(Swizzle.B32, 256), (Swizzle.B64, 512), (Swizzle.B128, 1024)]
)
def test_bijection_on_each_span(mode: Swizzle, span: int) -> None:
    """Each 256/512/1024-byte span maps onto itself, one to one."""
    assert mode.span == span
    for base in range(0, 4 * span, span):
        out = swizzle_offset(np.arange(base, base + span), mode)
        # Stays within its own span and hits every byte of it once.
        assert sorted(out.tolist()) == list(range(base, base + span))


@pytest.mark.parametrize("mode", SWIZZLED)
def test_pattern_repeats_every_span(mode: Swizzle) -> None:
    """The pattern repeats after ``mode.span`` bytes and not before."""
    offsets = np.arange(mode.span)
    assert (
        swizzle_offset(offsets + 3 * mode.span, mode)
        == swizzle_offset(offsets, mode) + 3 * mode.span
    ).all()
    # ...and not earlier: the half span is swizzled differently.
    half = mode.span // 2
    assert (swizzle_offset(offsets + half, mode) != swizzle_offset(offsets, mode) + half).any()


@pytest.mark.parametrize("mode", MODES)
def test_keeps_16_byte_chunks_whole(mode: Swizzle) -> None:
    """Bytes of one 16-byte chunk stay together and in order."""
    offsets = np.arange(2048)
    out = swizzle_offset(offsets, mode)
    assert ((out % 16) == (offsets % 16)).all()
    assert (out[1:][offsets[1:] % 16 != 0] - out[:-1][offsets[1:] % 16 != 0] == 1).all()


def test_none_is_identity() -> None:
    """``Swizzle.NONE`` leaves every offset where it is."""
    offsets = np.arange(5000)
    assert (swizzle_offset(offsets, Swizzle.NONE) == offsets).all()


@pytest.mark.parametrize(
    ("offset", "mode", "expected"),
    [
        (128, "128B", 144),  # row 1, chunk 0 -> chunk 1
        (256, "128B", 288),  # row 2, chunk 0 -> chunk 2
        (1023, "128B", 911),  # row 7, chunk 7 -> chunk 0, byte 15
        (1024, "128B", 1024),  # next 1024-byte span starts over
        (384, "64B", 432),  # row 3, chunk 0 -> chunk 3
        (512, "64B", 512),  # row 4: 64B looks at row bits 7..8 only
        (128, "32B", 144),
        (256, "32B", 256),  # row 2: 32B looks at row bit 7 only
        (144, "none", 144),
    ],
)
def test_known_values(offset: int, mode: str, expected: int) -> None:
    """Offsets worked out by hand (row = offset // 128, chunk = offset // 16 % 8)."""
    assert swizzle_offset(offset, mode) == expected
    assert isinstance(swizzle_offset(offset, mode), int)


def test_offset_errors() -> None:
    """Negative or non-integer offsets are rejected."""
    with pytest.raises(ValueError, match="non-negative"):
        swizzle_offset(-16, "128B")
    with pytest.raises(TypeError, match="integers"):
        swizzle_offset(1.5, "128B")


def test_swizzle_index_matches_offsets() -> None:
    """Element indices are swizzled byte offsets divided by the size."""
    rows, cols = np.meshgrid(np.arange(16), np.arange(64), indexing="ij")
    got = swizzle_index(rows, cols, 64, 2, "128B")
    assert (got * 2 == swizzle_offset((rows * 64 + cols) * 2, "128B")).all()
    assert swizzle_index(1, 0, 64, 2, Swizzle.B128) == 72  # byte 144
    with pytest.raises(ValueError, match="elem_bytes"):
        swizzle_index(0, 0, 64, 3, "none")


# --- Swizzle.parse ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("none", Swizzle.NONE),
        ("NONE", Swizzle.NONE),
        ("32B", Swizzle.B32),
        ("64b", Swizzle.B64),
        ("128B", Swizzle.B128),
        (" 128 ", Swizzle.B128),
        (128, Swizzle.B128),
        (0, Swizzle.NONE),
        (np.int32(64), Swizzle.B64),
        (Swizzle.B32, Swizzle.B32),
    ],
)
def test_parse(text: object, expected: Swizzle) -> None:
    """Enum members, names and byte counts all parse."""
    assert Swizzle.parse(text) is expected


@pytest.mark.parametrize("bad", ["48B", "xor", "", "B128", 16, 256, -32])
def test_parse_rejects_unknown_values_listing_allowed(bad: object) -> None:
    """A bad value raises ValueError naming the allowed modes."""
    with pytest.raises(ValueError, match=r"'none', '32B', '64B', '128B'"):
        Swizzle.parse(bad)


@pytest.mark.parametrize("bad", [128.0, None, True, [128]])
def test_parse_rejects_wrong_types(bad: object) -> None:
    """A value of the wrong type raises TypeError."""
    with pytest.raises(TypeError, match="Swizzle, str or int"):
        Swizzle.parse(bad)


# --- bank_map ---------------------------------------------------------------


def test_bank_map_fp16_128_byte_rows() -> None:
    """Banks of a 64 x 64 fp16 tile, plain and 128B-swizzled."""
    # 64 fp16 = 128 bytes a row: element (r, c) is at byte 128r + 2c,
    # bank (32r + c // 2) % 32 = c // 2 for every row.
    none = bank_map(64, 64, 2, "none")
    assert none.shape == (64, 64)
    assert (none == np.arange(64) // 2).all()
    # 128B: column 0 of row r sits in chunk r % 8, i.e. bank 4 * (r % 8).
    b128 = bank_map(64, 64, 2, "128B")
    assert b128[:, 0].tolist() == [4 * (r % 8) for r in range(64)]
    # Each row still covers every bank exactly twice (one word = 2 fp16).
    for row in b128:
        assert np.bincount(row, minlength=32).tolist() == [2] * 32


def test_bank_map_wide_elements_give_first_bank() -> None:
    """16-byte elements report the first of their four banks."""
    # 16-byte elements, 8 per 128-byte row: element c starts at bank 4c.
    assert bank_map(2, 8, 16, "none")[0].tolist() == [0, 4, 8, 12, 16, 20, 24, 28]
    # 128B, row 1: chunks swap pairwise (c ^ 1).
    assert bank_map(2, 8, 16, "128B")[1].tolist() == [4, 0, 12, 8, 20, 16, 28, 24]


# --- conflicts ----------------------------------------------------------------

# 64 x 64 fp16 tile, 128-byte rows. Column access: thread t reads row t, so its
# unswizzled byte offset is 128t (+ the same column offset for all threads).
#
# Scalar (2-byte) and 4-byte reads, all 32 threads in one wavefront group:
#   none: word 32t -> bank 0 for all 32 threads, 32 distinct words -> 32-way.
#   32B:  chunk t % 2 -> banks {0, 4}, 16 threads each           -> 16-way.
#   64B:  chunk t % 4 -> banks {0, 4, 8, 12}, 8 threads each      ->  8-way.
#   128B: chunk t % 8 -> banks {0, 4, ..., 28}, 4 threads each    ->  4-way.
# 8-byte reads, half warps of 16 threads, each thread words 2 banks wide:
#   none: 16 threads on banks 0-1 -> 16-way; 32B -> 8; 64B -> 4; 128B -> 2.
# 16-byte reads, quarter warps of 8 threads, each thread a whole chunk:
#   none: 8 threads on banks 0-3 -> 8-way; 32B: chunks {0,1} -> 4-way;
#   64B: chunks {0..3} -> 2-way; 128B: 8 threads, 8 different chunks -> 1.
COLUMN_FP16 = {
    2: {"none": 32, "32B": 16, "64B": 8, "128B": 4},
    4: {"none": 32, "32B": 16, "64B": 8, "128B": 4},
    8: {"none": 16, "32B": 8, "64B": 4, "128B": 2},
    16: {"none": 8, "32B": 4, "64B": 2, "128B": 1},
}


@pytest.mark.parametrize("vector_bytes", sorted(COLUMN_FP16))
@pytest.mark.parametrize("mode", ["none", "32B", "64B", "128B"])
def test_column_access_fp16_128_byte_rows(vector_bytes: int, mode: str) -> None:
    """Column reads of a 64 x 64 fp16 tile: the table derived above."""
    got = conflicts(64, 64, 2, mode, access="column", vector_bytes=vector_bytes)
    assert got == COLUMN_FP16[vector_bytes][mode]


@pytest.mark.parametrize("vector_bytes", [2, 4, 8, 16])
@pytest.mark.parametrize("mode", ["none", "32B", "64B", "128B"])
def test_row_access_is_conflict_free(vector_bytes: int, mode: str) -> None:
    """Row reads never conflict, swizzled or not."""
    # Consecutive threads read consecutive bytes; a swizzle only permutes
    # 16-byte chunks inside a 128-byte row, so any 128 contiguous bytes of a
    # row still cover 32 distinct banks. Scalar fp16: two threads share each
    # word (broadcast), 16 words in 16 banks -> 1.
    assert conflicts(64, 64, 2, mode, access="row", vector_bytes=vector_bytes) == 1


def test_fp32_column_and_default_vector() -> None:
    """fp32 column reads, with and without one word of padding."""
    # 32 x 32 fp32, 128-byte rows: the textbook 32-way column conflict.
    assert conflicts(32, 32, 4, "none", access="column") == 32
    assert conflicts(32, 32, 4, "128B", access="column") == 4
    # 33 fp32 a row (the padding trick): row t starts at word 33t, bank t.
    assert conflicts(32, 33, 4, "none", access="column") == 1


def test_short_columns_continue_in_next_column() -> None:
    """Columns shorter than a warp continue in the next column."""
    # 16 rows of 64 fp16: a warp reads column 0 of rows 0-15, then column 1.
    # none: rows 0-15 of column 0 all in word bank 0 -> 16 distinct words;
    # column 1 is the same words again (broadcast) -> 16-way.
    assert conflicts(16, 64, 2, "none", access="column") == 16
    # 4-byte reads: column 1 is a different word in bank 1 -> still 16.
    assert conflicts(16, 32, 4, "none", access="column") == 16


def test_partial_warp() -> None:
    """A tile smaller than a warp leaves idle lanes that cost nothing."""
    # 3 rows of 64 fp16, 16-byte column reads: 24 vectors, one warp of 24
    # lanes; lane t reads row r = t % 3, chunk c = t // 3. Quarter warps:
    #   lanes 0-7:   (r,c) = (0,0) (1,0) (2,0) (0,1) (1,1) (2,1) (0,2) (1,2)
    #   lanes 8-15:  (2,2) (0,3) (1,3) (2,3) (0,4) (1,4) (2,4) (0,5)
    #   lanes 16-23: (1,5) (2,5) (0,6) (1,6) (2,6) (0,7) (1,7) (2,7)
    #   lanes 24-31: idle; they repeat lane 0's address (broadcast, free).
    # none: lanes 0-7 put rows 0, 1, 2 of chunk 0 on banks 0-3 -> 3-way.
    # 128B: chunk c ^ r. Lanes 0-7 -> 0 1 2 1 0 3 2 3 (2-way), lanes 8-15
    # -> 0 3 2 1 4 5 6 5 (2-way), lanes 16-23 -> 4 7 6 7 4 7 6 5: chunk 7
    # three times -> 3-way. Short columns defeat the swizzle.
    assert conflicts(3, 64, 2, "none", access="column", vector_bytes=16) == 3
    assert conflicts(3, 64, 2, "128B", access="column", vector_bytes=16) == 3


def test_conflicts_errors() -> None:
    """Bad access directions and vector sizes are rejected."""
    with pytest.raises(ValueError, match="access"):
        conflicts(64, 64, 2, "none", access="diagonal")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="vector_bytes"):
        conflicts(64, 64, 2, "none", vector_bytes=3)
    with pytest.raises(ValueError, match="vector_bytes"):
        conflicts(64, 64, 4, "none", vector_bytes=2)
    with pytest.raises(ValueError, match="vector_bytes"):
        conflicts(4, 4, 2, "none", vector_bytes=16)  # 8-byte rows
    with pytest.raises(ValueError, match="unknown swizzle"):
        conflicts(64, 64, 2, "96B")


# --- grouped_tile ---------------------------------------------------------------


def test_grouped_tile_order_matches_triton_tutorial() -> None:
    """GROUP_M order of Triton's matmul tutorial."""
    # 4 x 4 tiles, GROUP_M = 2: down two tile rows, then one column right.
    order = [grouped_tile(p, 4, 4, 2) for p in range(16)]
    assert order[:8] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (0, 3), (1, 3)]
    assert order[8:10] == [(2, 0), (3, 0)]


def test_grouped_tile_short_last_group() -> None:
    """The last super-group may be shorter than GROUP_M."""
    # 3 tile rows, GROUP_M = 2: the last group is one row tall.
    assert [grouped_tile(p, 3, 4, 2) for p in range(8, 12)] == [(2, 0), (2, 1), (2, 2), (2, 3)]


@pytest.mark.parametrize("group_m", [-1, 0, 1])
def test_grouped_tile_without_group_is_row_major(group_m: int) -> None:
    """``group_m <= 1`` gives row-major order."""
    assert [grouped_tile(p, 3, 5, group_m) for p in range(15)] == [
        (p // 5, p % 5) for p in range(15)
    ]


@pytest.mark.parametrize(("m", "n"), [(1, 1), (3, 5), (7, 2), (8, 8)])
@pytest.mark.parametrize("group_m", [1, 2, 3, 8, 16])
def test_grouped_tile_is_a_bijection(m: int, n: int, group_m: int) -> None:
    """Every tile is visited exactly once."""
    tiles = {grouped_tile(p, m, n, group_m) for p in range(m * n)}
    assert tiles == {(i, j) for i in range(m) for j in range(n)}
