// ktune.cuh: helpers for kernels written in a `%%kernel` cell.
//
//     #include <ktune.cuh>
//
// The header is compiled by NVRTC (CuPy RawModule), by nvcc, and by a plain
// host C++ compiler (for tests). NVRTC ships no host standard library, so this
// file includes nothing at all: it uses only builtin types (`unsigned int`,
// `int`) and keywords (`static_assert`, `constexpr`). Needs C++14 (relaxed
// constexpr); NVRTC and nvcc of CUDA 12+ default to C++17.
//
// The Python mirror of every function here is jupyter_ktune/swizzle.py; the
// tests compare the two value by value.
//
// Profiling scopes (`KT_SCOPE(name)`) are not defined here yet: they will live
// in this header, in a section after the tile helpers, once the profiler that
// reads them exists. Nothing stands in for them until then.

#ifndef KTUNE_CUH
#define KTUNE_CUH

#if defined(__cplusplus) && __cplusplus < 201402L
#error "[ktune] ktune.cuh needs C++14 or later: compile with -std=c++17"
#endif

// KT_HD marks every helper: callable from device and host code under nvcc and
// NVRTC, and an ordinary inline function under a plain host compiler (g++),
// which has no __host__/__device__ keywords.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define KT_HD __host__ __device__ __forceinline__
#define KT_DEVICE_INLINE __device__ __forceinline__
#else
#define KT_HD inline
#define KT_DEVICE_INLINE inline
#endif

namespace kt {

// ---------------------------------------------------------------------------
// Integer helpers
// ---------------------------------------------------------------------------

// Ceiling division for non-negative a and positive b: the number of tiles of
// size b needed to cover a elements (grid sizes, loop trip counts).
template <typename T>
KT_HD constexpr T cdiv(T a, T b) {
  return (a + b - 1) / b;
}

// True when x is a positive power of two. Tile sizes that feed shifts, masks
// and swizzles must be.
template <typename T>
KT_HD constexpr bool is_pow2(T x) {
  return x > 0 && (x & (x - 1)) == 0;
}

// ---------------------------------------------------------------------------
// Shared-memory swizzles (Hopper TMA / WGMMA layouts)
// ---------------------------------------------------------------------------
//
// Shared memory has 32 banks of 4 bytes: byte b lives in bank (b / 4) % 32, so
// one 128-byte row covers every bank exactly once. In a row-major tile whose
// rows are 128 bytes long, every element of a column sits in the same bank,
// and a warp reading down a column is serialised (up to 32-way conflict).
//
// A swizzle permutes the 16-byte chunks within each row, differently for each
// row, so that a column spreads over the banks. 16 bytes is the unit because
// it is the widest per-thread access (ld.shared.v4 / ldmatrix row): a chunk is
// never split, so vector loads stay aligned and contiguous.
//
// The pattern is the one the tensor-memory accelerator writes and WGMMA reads:
// CU_TENSOR_MAP_SWIZZLE_32B/64B/128B, which CUTLASS spells
// Swizzle<1,4,3>, Swizzle<2,4,3>, Swizzle<3,4,3>. With B = 1, 2, 3 bits:
//
//     byte offset  ...  Y Y Y  x x x  Z Z Z  c c c c
//                       9 8 7  ----   6 5 4  3 2 1 0
//                        row         chunk   byte in chunk
//
//     swizzled = offset ^ ((offset & (((1 << B) - 1) << 7)) >> 3)
//
// i.e. the low B bits of the 128-byte row index (bits 7..7+B) are XORed into
// the 16-byte chunk index (bits 4..4+B). The pattern repeats every
// 8 * SWIZZLE bytes: 1024 for 128B, 512 for 64B, 256 for 32B, which is why TMA
// wants swizzled tiles aligned to that span. Using the same function for the
// addresses you compute by hand lets ordinary loads and stores agree with the
// layout TMA wrote.

// Number of row bits a swizzle mode XORs in (CUTLASS's BBits).
template <int BYTES>
KT_HD constexpr int swizzle_bits() {
  static_assert(BYTES == 0 || BYTES == 32 || BYTES == 64 || BYTES == 128,
                "[ktune] swizzle BYTES must be 0 (none), 32, 64 or 128");
  return BYTES == 128 ? 3 : BYTES == 64 ? 2 : BYTES == 32 ? 1 : 0;
}

// Bytes after which the swizzle pattern repeats (0 for no swizzle). Swizzled
// tiles should start at a multiple of this in shared memory.
template <int BYTES>
KT_HD constexpr unsigned int swizzle_span() {
  return BYTES * 8u;
}

// Swizzled byte offset of `byte_offset` within a shared-memory tile.
// BYTES is the swizzle mode: 0 (none), 32, 64 or 128.
template <int BYTES>
KT_HD constexpr unsigned int swizzle(unsigned int byte_offset) {
  return byte_offset ^
         ((byte_offset & (((1u << swizzle_bits<BYTES>()) - 1u) << 7)) >> 3);
}

// Element index of (row, col) in a row-major tile of T with `row_elems`
// elements per row, after swizzling. Use it to index a `T*` that points at a
// tile TMA loaded with the same swizzle mode. T must be 1, 2, 4, 8 or 16 bytes
// so that an element never straddles a 16-byte chunk.
template <int BYTES, typename T>
KT_HD constexpr unsigned int swizzle_index(unsigned int row, unsigned int col,
                                           unsigned int row_elems) {
  static_assert(sizeof(T) <= 16 && (16 % sizeof(T)) == 0,
                "[ktune] swizzle_index needs an element of 1, 2, 4, 8 or 16 bytes");
  return swizzle<BYTES>((row * row_elems + col) * (unsigned int)sizeof(T)) /
         (unsigned int)sizeof(T);
}

// ---------------------------------------------------------------------------
// Program-id ordering
// ---------------------------------------------------------------------------

// Map a linear program id to an output tile (pid_m, pid_n) in GROUP_M
// "super-groups", as Triton's matmul tutorial does: consecutive programs walk
// down group_m tile rows before moving one tile column right, so programs
// that run at the same time share rows of A and columns of B in L2.
// group_m <= 1 gives the plain row-major order (pid_n fastest).
KT_HD constexpr void grouped_tile(int pid, int num_pid_m, int num_pid_n,
                                  int group_m, int* pid_m, int* pid_n) {
  if (group_m <= 1) {
    *pid_m = pid / num_pid_n;
    *pid_n = pid % num_pid_n;
    return;
  }
  const int num_pid_in_group = group_m * num_pid_n;
  const int group_id = pid / num_pid_in_group;
  const int first_pid_m = group_id * group_m;
  // The last group may have fewer than group_m tile rows.
  const int rows_left = num_pid_m - first_pid_m;
  const int group_size_m = rows_left < group_m ? rows_left : group_m;
  const int in_group = pid % num_pid_in_group;
  *pid_m = first_pid_m + in_group % group_size_m;
  *pid_n = in_group / group_size_m;
}

}  // namespace kt

#endif  // KTUNE_CUH
