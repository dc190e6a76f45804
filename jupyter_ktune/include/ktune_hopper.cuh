// ktune_hopper.cuh: the few Hopper (sm_90 / sm_90a) primitives a TMA + WGMMA kernel needs.
//
//     #include <ktune_hopper.cuh>      // also includes ktune.cuh
//
// Written from the PTX ISA (sections "Tensor copy" / cp.async.bulk.tensor, "mbarrier",
// "Asynchronous Warpgroup Level Matrix Multiply-Accumulate" and its "Matrix Descriptor
// Format"), one small inline-asm function per instruction, so the SASS of a cell reads as the
// PTX it wrote (tests/test_ktune_hopper.py checks HGMMA, UTMALDG, UTMASTG, SYNCS).
//
// A separate header, not a section of ktune.cuh, because ktune.cuh must compile for any
// target and under a plain host compiler, and these functions are Hopper-only: the mbarrier
// tx-count, TMA and cluster ones need sm_90; wgmma and setmaxnreg need the arch-specific
// target sm_90a (nvcc -gencode=arch=compute_90a,code=sm_90a; a cell says --arch sm_90a).
// Compiled for another target, a kernel that calls them fails in ptxas ("not supported on
// .target"); one that only includes the header compiles, as unused inline functions emit
// nothing. Like ktune.cuh it includes no system header (NVRTC has none), and the host-side
// parts (kt::TensorMap, the descriptor encoders) compile under g++ too.
//
// Conventions: shared-memory operands are generic pointers converted here with
// cvta.to.shared; coordinates of TMA calls are innermost first (column, row), as in PTX.

#ifndef KTUNE_HOPPER_CUH
#define KTUNE_HOPPER_CUH

#include <ktune.cuh>

namespace kt {

// ---------------------------------------------------------------------------
// Host and device: the tensor map type and the WGMMA shared-memory descriptor
// ---------------------------------------------------------------------------

// A TMA descriptor: 128 opaque bytes, 64-byte aligned, as the driver's CUtensorMap, which
// NVRTC has no header for. The host encodes it (cuTensorMapEncodeTiled, see
// jupyter_ktune/backends/cuda/tensormap.py) and passes it by value; take it as
// `const __grid_constant__ kt::TensorMap name` so the copy engine reads it from the kernel's
// parameter space (taking the address of a plain by-value parameter would copy it to local
// memory, which TMA cannot read).
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};
static_assert(sizeof(TensorMap) == 128, "[ktune] TensorMap must be 128 bytes");

// The 2-bit swizzle field of a WGMMA descriptor (bits 62-63) for a swizzle given, as
// everywhere in ktune, by its byte span: 0 (none / interleave), 128, 64 or 32 bytes.
template <int KtBytes>
KT_HD constexpr unsigned long long wgmma_swizzle_code() {
  static_assert(KtBytes == 0 || KtBytes == 32 || KtBytes == 64 || KtBytes == 128,
                "[ktune] swizzle BYTES must be 0 (none), 32, 64 or 128");
  return KtBytes == 128 ? 1ull : KtBytes == 64 ? 2ull : KtBytes == 32 ? 3ull : 0ull;
}

// A WGMMA shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"):
//   bits  0-13  start address >> 4 (shared-window address, 18 bits of it)
//   bits 16-29  leading dimension byte offset >> 4
//   bits 32-45  stride dimension byte offset >> 4
//   bits 49-51  matrix base offset (0 when each swizzle atom starts at a multiple of its span)
//   bits 62-63  swizzle: 0 none, 1 128B, 2 64B, 3 32B
// Everything else is zero.
template <int KtBytes>
KT_HD constexpr unsigned long long wgmma_desc(unsigned int smem_addr, unsigned int lbo_bytes,
                                              unsigned int sbo_bytes,
                                              unsigned int base_offset = 0u) {
  return (((unsigned long long)smem_addr & 0x3FFFFull) >> 4) |
         ((((unsigned long long)lbo_bytes >> 4) & 0x3FFFull) << 16) |
         ((((unsigned long long)sbo_bytes >> 4) & 0x3FFFull) << 32) |
         (((unsigned long long)base_offset & 0x7ull) << 49) |
         (wgmma_swizzle_code<KtBytes>() << 62);
}

// Descriptor of a K-major operand tile as TMA writes it with swizzle BYTES (32, 64 or 128):
// rows of BYTES bytes (BYTES / sizeof(T) elements of K), 8-row swizzle atoms stacked along M
// (or N) every 8 * BYTES bytes, which is the stride byte offset. The leading byte offset is
// not used for swizzled K-major layouts (a k16 step of 16-bit data spans 32 bytes, inside one
// swizzle row), so it is set to 16 (encoded 1). To step along K inside a row, add the byte
// offset to smem_addr (k * sizeof(T)); the hardware applies the swizzle on the address bits.
template <int KtBytes>
KT_HD constexpr unsigned long long wgmma_desc_kmajor(unsigned int smem_addr) {
  static_assert(KtBytes == 32 || KtBytes == 64 || KtBytes == 128,
                "[ktune] wgmma_desc_kmajor needs a 32B, 64B or 128B swizzle");
  return wgmma_desc<KtBytes>(smem_addr, 16u, 8u * (unsigned int)KtBytes);
}

}  // namespace kt

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

namespace kt {

// ---------------------------------------------------------------------------
// Addresses
// ---------------------------------------------------------------------------

// 32-bit shared-window address of a generic pointer into shared memory.
KT_DEVICE_INLINE unsigned int smem_u32(const void* p) {
  unsigned long long a;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
  return (unsigned int)a;
}

// ---------------------------------------------------------------------------
// mbarrier (a 64-bit word in shared memory; see PTX "mbarrier")
// ---------------------------------------------------------------------------

// One thread initialises; `count` arrivals complete a phase. Make the init visible to the
// copy engine and the cluster with fence_mbarrier_init() (then a barrier) before use.
KT_DEVICE_INLINE void mbar_init(unsigned long long* bar, unsigned int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count)
               : "memory");
}

// Arrive once and announce `bytes` that asynchronous copies will deliver to this phase.
KT_DEVICE_INLINE void mbar_arrive_expect_tx(unsigned long long* bar, unsigned int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
}

// Plain arrival (release at CTA scope).
KT_DEVICE_INLINE void mbar_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

// Arrival on the barrier at the same offset in CTA `cta_rank` of the cluster (mapa), e.g. a
// consumer releasing a stage that a multicast load of the peer CTA fills.
KT_DEVICE_INLINE void mbar_arrive_cluster(unsigned long long* bar, unsigned int cta_rank) {
  asm volatile(
      "{\n .reg .b32 remote;\n mapa.shared::cluster.u32 remote, %0, %1;\n"
      " mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n}\n" ::"r"(
          smem_u32(bar)),
      "r"(cta_rank)
      : "memory");
}

// One probe: true once the phase with this parity has completed.
KT_DEVICE_INLINE bool mbar_try_wait(unsigned long long* bar, unsigned int parity) {
  unsigned int done;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      " selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(smem_u32(bar)), "r"(parity)
      : "memory");
  return done != 0u;
}

// Spin until the phase with this parity has completed (try_wait suspends for a while in
// hardware on each probe, so the loop is not a hot spin).
KT_DEVICE_INLINE void mbar_wait(unsigned long long* bar, unsigned int parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}

// ---------------------------------------------------------------------------
// Fences
// ---------------------------------------------------------------------------

// Order this thread's ordinary shared-memory writes before later accesses by the async proxy
// (TMA store, wgmma reading operands written with st.shared / stmatrix).
KT_DEVICE_INLINE void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Make mbarrier.init visible to the async proxy and to the other CTAs of the cluster.
KT_DEVICE_INLINE void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// ---------------------------------------------------------------------------
// TMA (cp.async.bulk.tensor), 2-D tiles
// ---------------------------------------------------------------------------

// Bring the descriptor into the cache ahead of the first copy (optional).
KT_DEVICE_INLINE void tma_prefetch_desc(const TensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<unsigned long long>(map))
               : "memory");
}

// Load the box at (c0 = column, c1 = row) of `map` into `dst` (aligned to 128 bytes, to the
// swizzle span for swizzled maps); completes on `bar` as transaction bytes.
KT_DEVICE_INLINE void tma_load_2d(void* dst, const TensorMap* map, unsigned long long* bar,
                                  int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1)
      : "memory");
}

// The same box, written to `dst` and signalled on `bar` at the same offsets in every CTA of
// the cluster whose bit is set in `cta_mask`.
KT_DEVICE_INLINE void tma_load_2d_multicast(void* dst, const TensorMap* map,
                                            unsigned long long* bar, int c0, int c1,
                                            unsigned short cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1),
      "h"(cta_mask)
      : "memory");
}

// Store the box in `src` to (c0, c1) of `map`. The writes to `src` need fence_proxy_async()
// in each writing thread and a barrier before one thread issues this; then
// tma_store_commit() and tma_store_wait<0>() before `src` is reused or the CTA exits.
KT_DEVICE_INLINE void tma_store_2d(const TensorMap* map, const void* src, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
          reinterpret_cast<unsigned long long>(map)),
      "r"(smem_u32(src)), "r"(c0), "r"(c1)
      : "memory");
}

KT_DEVICE_INLINE void tma_store_commit() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Wait until at most N committed store groups still read their shared-memory source.
template <int KtN>
KT_DEVICE_INLINE void tma_store_wait() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(KtN) : "memory");
}

// ---------------------------------------------------------------------------
// Clusters
// ---------------------------------------------------------------------------

KT_DEVICE_INLINE unsigned int cluster_ctarank() {
  unsigned int r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

KT_DEVICE_INLINE void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}

KT_DEVICE_INLINE void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// All threads of all CTAs of the cluster.
KT_DEVICE_INLINE void cluster_sync() {
  cluster_arrive();
  cluster_wait();
}

// ---------------------------------------------------------------------------
// Warpgroup register reallocation (sm_90a). Takes effect only when the kernel has a
// register cap at entry (__launch_bounds__(threads, 1)) and each warpgroup role is one
// branch of one if/else; ptxas says so otherwise (warning C7508).
// ---------------------------------------------------------------------------

template <int KtRegs>
KT_DEVICE_INLINE void setmaxnreg_inc() {
  static_assert(KtRegs >= 24 && KtRegs <= 256 && KtRegs % 8 == 0,
                "[ktune] setmaxnreg takes a multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(KtRegs));
}

template <int KtRegs>
KT_DEVICE_INLINE void setmaxnreg_dec() {
  static_assert(KtRegs >= 24 && KtRegs <= 256 && KtRegs % 8 == 0,
                "[ktune] setmaxnreg takes a multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(KtRegs));
}

// ---------------------------------------------------------------------------
// Small conversions for epilogues (no cuda_bf16.h under NVRTC)
// ---------------------------------------------------------------------------

// Two floats rounded to bf16 and packed: `lo` in the low half (the lower address).
KT_DEVICE_INLINE unsigned int pack_bf16x2(float lo, float hi) {
  unsigned int r;
  asm("cvt.rn.bf16x2.f32 %0, %2, %1;" : "=r"(r) : "f"(lo), "f"(hi));
  return r;
}

}  // namespace kt

#endif  // __CUDACC__ || __CUDACC_RTC__

// WGMMA: the instruction, its fences and its register fragments (sm_90a).
#include <ktune_wgmma.cuh>

#endif  // KTUNE_HOPPER_CUH
