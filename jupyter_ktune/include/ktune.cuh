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
// Profiling scopes (`KT_PROFILE_KERNEL()`, `KT_SCOPE(name)`, `KT_BEGIN`/`KT_END`)
// live in their own section at the end of this file; they compile to nothing
// unless the backend defines KT_PROFILE.

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
template <typename KtT>
KT_HD constexpr KtT cdiv(KtT a, KtT b) {
  return (a + b - 1) / b;
}

// True when x is a positive power of two. Tile sizes that feed shifts, masks
// and swizzles must be.
template <typename KtT>
KT_HD constexpr bool is_pow2(KtT x) {
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
template <int KtBytes>
KT_HD constexpr int swizzle_bits() {
  static_assert(KtBytes == 0 || KtBytes == 32 || KtBytes == 64 || KtBytes == 128,
                "[ktune] swizzle BYTES must be 0 (none), 32, 64 or 128");
  return KtBytes == 128 ? 3 : KtBytes == 64 ? 2 : KtBytes == 32 ? 1 : 0;
}

// Bytes after which the swizzle pattern repeats (0 for no swizzle). Swizzled
// tiles should start at a multiple of this in shared memory.
template <int KtBytes>
KT_HD constexpr unsigned int swizzle_span() {
  return KtBytes * 8u;
}

// Swizzled byte offset of `byte_offset` within a shared-memory tile.
// BYTES is the swizzle mode: 0 (none), 32, 64 or 128.
template <int KtBytes>
KT_HD constexpr unsigned int swizzle(unsigned int byte_offset) {
  return byte_offset ^
         ((byte_offset & (((1u << swizzle_bits<KtBytes>()) - 1u) << 7)) >> 3);
}

// Element index of (row, col) in a row-major tile of T with `row_elems`
// elements per row, after swizzling. Use it to index a `T*` that points at a
// tile TMA loaded with the same swizzle mode. T must be 1, 2, 4, 8 or 16 bytes
// so that an element never straddles a 16-byte chunk.
template <int KtBytes, typename KtT>
KT_HD constexpr unsigned int swizzle_index(unsigned int row, unsigned int col,
                                           unsigned int row_elems) {
  static_assert(sizeof(KtT) <= 16 && (16 % sizeof(KtT)) == 0,
                "[ktune] swizzle_index needs an element of 1, 2, 4, 8 or 16 bytes");
  return swizzle<KtBytes>((row * row_elems + col) * (unsigned int)sizeof(KtT)) /
         (unsigned int)sizeof(KtT);
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

// ===========================================================================
// BEGIN KT_SCOPE section (cycle breakdown; issue 5). Owned by the profiler:
// jupyter_ktune/measure/profile_cuda.py reads what this writes. Keep edits to
// the tile helpers above this block.
// ===========================================================================
//
//     __global__ void k(...) {
//       KT_PROFILE_KERNEL();               // first statement of the kernel
//       { KT_SCOPE("load"); ... }          // a scope lasts until the end of its block
//       KT_BEGIN("mma"); ...; KT_END("mma");
//     }
//
// Without KT_PROFILE every macro expands to nothing: the kernel's SASS is the
// same as without the scopes (tests/test_breakdown_cuda.py checks it).
//
// With KT_PROFILE (the backend's "profile" request defines it), lane 0 of each
// sampled warp of each sampled block stores {tag, low 32 bits of %clock64} per
// scope edge into shared memory; when the kernel returns, that lane copies its
// records to the global buffer `kt_profile_out` (set by the backend) with
// %smid and a (%globaltimer, %clock64) pair taken at the warp's start and end,
// so the host aligns each warp on the global timer and converts cycles with
// the SM clock it measured. No block-wide barrier is used, so kernels whose
// threads return early still work (a warp whose lane 0 returned early records
// nothing). KT_SCOPE must appear in the kernel body after KT_PROFILE_KERNEL(),
// not in a helper function (the trace lives in a local variable).
//
// Sampling (define to override; the backend passes them as -D flags):
//   KT_PROFILE_BLOCK_STRIDE  trace blocks whose linear id % stride == 0  (1)
//   KT_PROFILE_MAX_BLOCKS    ... and whose id / stride is below this     (256)
//   KT_PROFILE_WARP_STRIDE   trace warps whose index % stride == 0       (1)
//   KT_PROFILE_WARPS         ... at most this many warps per block       (8)
//   KT_PROFILE_EVENTS        records per traced warp (more are dropped)  (64)
//
// Global layout (unsigned int words): one slot per (sampled block, sampled
// warp), KT_PROFILE_SLOT_WORDS each: a 12-word header
//   [0] block+1 (0: slot unused) [1] warp [2] smid [3] records [4] dropped
//   [5,6] globaltimer at start (lo, hi) [7,8] globaltimer at end (lo, hi)
//   [9] clock at start [10] clock at end [11] 0x4B54 ("KT")
// then KT_PROFILE_EVENTS {tag, clock} pairs. tag = 31-bit FNV-1a of the name,
// bit 31 set for a scope's end.

#ifndef KT_PROFILE_EVENTS
#define KT_PROFILE_EVENTS 64
#endif
#ifndef KT_PROFILE_WARPS
#define KT_PROFILE_WARPS 8
#endif
#ifndef KT_PROFILE_WARP_STRIDE
#define KT_PROFILE_WARP_STRIDE 1
#endif
#ifndef KT_PROFILE_BLOCK_STRIDE
#define KT_PROFILE_BLOCK_STRIDE 1
#endif
#ifndef KT_PROFILE_MAX_BLOCKS
#define KT_PROFILE_MAX_BLOCKS 256
#endif
#define KT_PROFILE_HEADER_WORDS 12
#define KT_PROFILE_SLOT_WORDS (KT_PROFILE_HEADER_WORDS + 2 * KT_PROFILE_EVENTS)

#define KT_CAT_(a, b) a##b
#define KT_CAT(a, b) KT_CAT_(a, b)

namespace kt {
namespace prof {

// 31-bit FNV-1a of a scope name; jupyter_ktune/measure/profile_cuda.py has the same.
KT_HD constexpr unsigned int fnv(const char* s) {
  unsigned int h = 2166136261u;
  while (*s) {
    h = (h ^ (unsigned int)(unsigned char)(*s++)) * 16777619u;
  }
  return h & 0x7fffffffu;
}

// Forces the hash to be a compile-time constant (a template argument).
template <unsigned int KtV>
struct Const {
  static constexpr unsigned int value = KtV;
};

}  // namespace prof
}  // namespace kt

#if defined(KT_PROFILE) && (defined(__CUDACC__) || defined(__CUDACC_RTC__))

extern "C" {
// Set by the backend before the launch: KT_PROFILE_MAX_BLOCKS * KT_PROFILE_WARPS slots.
__device__ unsigned int* kt_profile_out;
}

namespace kt {
namespace prof {

KT_DEVICE_INLINE unsigned int clock32() {
  unsigned long long c;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)::"memory");
  return (unsigned int)c;
}

KT_DEVICE_INLINE unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
  return t;
}

KT_DEVICE_INLINE unsigned int smid() {
  unsigned int s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

KT_DEVICE_INLINE unsigned int* smem() {
  __shared__ unsigned int records[KT_PROFILE_WARPS * 2 * KT_PROFILE_EVENTS];
  return records;
}

// One warp's trace; only lane 0 of a sampled warp in a sampled block holds a buffer.
struct Trace {
  unsigned int* buf;  // this warp's shared records, or null
  unsigned int n, dropped, block, warp, clk0;
  unsigned long long gt0;

  KT_DEVICE_INLINE Trace() : buf(nullptr), n(0), dropped(0), block(0), warp(0), clk0(0), gt0(0) {
    const unsigned int tid =
        threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    warp = tid >> 5;
    const unsigned int wslot = warp / KT_PROFILE_WARP_STRIDE;
    if ((tid & 31u) == 0u && block % KT_PROFILE_BLOCK_STRIDE == 0u &&
        block / KT_PROFILE_BLOCK_STRIDE < KT_PROFILE_MAX_BLOCKS &&
        warp % KT_PROFILE_WARP_STRIDE == 0u && wslot < KT_PROFILE_WARPS &&
        kt_profile_out != nullptr) {
      buf = smem() + wslot * 2u * KT_PROFILE_EVENTS;
      gt0 = globaltimer();
      clk0 = clock32();
    }
  }

  KT_DEVICE_INLINE void record(unsigned int tag) {
    if (buf != nullptr) {
      const unsigned int c = clock32();
      if (n < KT_PROFILE_EVENTS) {
        buf[2u * n] = tag;
        buf[2u * n + 1u] = c;
        ++n;
      } else {
        ++dropped;
      }
    }
  }

  KT_DEVICE_INLINE ~Trace() {
    if (buf == nullptr) return;
    const unsigned int clk1 = clock32();
    const unsigned long long gt1 = globaltimer();
    const unsigned int slot = (block / KT_PROFILE_BLOCK_STRIDE) * KT_PROFILE_WARPS +
                              warp / KT_PROFILE_WARP_STRIDE;
    unsigned int* out = kt_profile_out + (unsigned long long)slot * KT_PROFILE_SLOT_WORDS;
    for (unsigned int i = 0; i < 2u * n; ++i) out[KT_PROFILE_HEADER_WORDS + i] = buf[i];
    out[1] = warp;
    out[2] = smid();
    out[3] = n;
    out[4] = dropped;
    out[5] = (unsigned int)gt0;
    out[6] = (unsigned int)(gt0 >> 32);
    out[7] = (unsigned int)gt1;
    out[8] = (unsigned int)(gt1 >> 32);
    out[9] = clk0;
    out[10] = clk1;
    out[11] = 0x4B54u;
    __threadfence();
    out[0] = block + 1u;
  }
};

// RAII scope: records its begin on construction and its end on destruction.
struct Scope {
  Trace& t;
  unsigned int tag;
  KT_DEVICE_INLINE Scope(Trace& trace, unsigned int tg) : t(trace), tag(tg) { t.record(tag); }
  KT_DEVICE_INLINE ~Scope() { t.record(tag | 0x80000000u); }
};

}  // namespace prof
}  // namespace kt

#define KT_PROFILE_KERNEL() ::kt::prof::Trace kt_trace_
#define KT_SCOPE(name)                                  \
  ::kt::prof::Scope KT_CAT(kt_scope_, __LINE__)(kt_trace_, \
                                              ::kt::prof::Const<::kt::prof::fnv(name)>::value)
#define KT_BEGIN(name) kt_trace_.record(::kt::prof::Const<::kt::prof::fnv(name)>::value)
#define KT_END(name) \
  kt_trace_.record(::kt::prof::Const<::kt::prof::fnv(name)>::value | 0x80000000u)

#else  // profiling off: nothing at all

#define KT_PROFILE_KERNEL() ((void)0)
#define KT_SCOPE(name) ((void)0)
#define KT_BEGIN(name) ((void)0)
#define KT_END(name) ((void)0)

#endif  // KT_PROFILE
// ===========================================================================
// END KT_SCOPE section
// ===========================================================================

#endif  // KTUNE_CUH
