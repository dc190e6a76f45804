// ktune_wgmma.cuh: WGMMA (wgmma.mma_async, sm_90a) for Hopper kernels, and the register
// fragments an attention kernel moves between two of them.
//
//     #include <ktune_hopper.cuh>      // includes this header (and ktune.cuh)
//
// Written from the PTX ISA ("Asynchronous Warpgroup Level Matrix Multiply-Accumulate": the
// m64nNk16 shapes, "Register Fragments" and "Matrix Descriptor Format"). A header of its own
// because the instruction family is a concept of its own: fences, commit groups, the A-from-
// shared ("SS") and A-from-registers ("RS") forms, for bf16 and fp16 inputs with an f32
// accumulator, and the descriptors of the two shared-memory layouts a kernel feeds it:
// K-major (ktune_hopper.cuh: kt::wgmma_desc_kmajor) and MN-major (kt::wgmma_desc_mnmajor,
// here), which is how a row-major V tile is the B operand of P * V.
//
// Like the rest of ktune, no system header (NVRTC has none); the descriptor encoders compile
// under a host compiler too. The instructions need the arch-specific target sm_90a (a cell
// says --arch sm_90a, which builds with nvcc).

#ifndef KTUNE_WGMMA_CUH
#define KTUNE_WGMMA_CUH

#include <ktune_hopper.cuh>

namespace kt {

// Descriptor of an MN-major operand tile with a 128-byte swizzle, as TMA writes a tile of a
// row-major array whose rows run along K and whose columns (contiguous) run along N: e.g. the
// V tile (kv rows x head-dim columns) as the B operand of O += P * V, where K is the kv index
// and N the head dimension. TMA brings such a tile in panels of 64 16-bit columns (one
// 128-byte swizzle span per row), `panel_bytes` apart. In the canonical MN-major SW128 layout
// (PTX ISA: 8 x 8 core matrices, 16-byte rows) the 64 contiguous N elements of one row and the
// 8 rows below it form one 1024-byte swizzle atom; the stride byte offset is the step to the
// next 8 rows along K (1024 bytes: rows are 128 bytes apart) and the leading byte offset the
// step to the next 64 elements along N (the next panel). Use with imm-trans-b = 1 and advance
// smem_addr by 16 rows (2048 bytes) per k16 step.
KT_HD constexpr unsigned long long wgmma_desc_mnmajor_sw128(unsigned int smem_addr,
                                                            unsigned int panel_bytes) {
  return wgmma_desc<128>(smem_addr, panel_bytes, 1024u);
}

// The k position, within a 32-wide block, at which wgmma_a_from_acc_e4m3 puts accumulator
// column `col` (0..31): column 16h + 8a + 2q + e goes to 16h + 4q + 2a + e. A kernel writes
// row `col` of the B operand (e.g. kv row `col` of a transposed V tile) at that position.
KT_HD constexpr int wgmma_e4m3_k_of(int col) {
  return (col & 16) | ((col & 6) << 1) | ((col & 8) >> 2) | (col & 1);
}

// An 8-bit V tile (BN kv rows of D bytes, swizzle span D) transposed into V^T (D rows of BN
// bytes, span BN) for the e4m3 P * V, in units of 4 kv rows (x, x+1, x+8, x+9 with
// x = 32(ku/8) + 16(ku/4 % 2) + 2(ku % 4)) by 4 columns (4 dq .. 4 dq + 3): each lane loads a
// unit as 4 words and stores it as 4 words of V^T rows 4 dq .. 4 dq + 3 at byte 4 ku (the
// order wgmma_e4m3_k_of asks for). vt_unit gives lane `lane` of warp step `step` its unit.
// The plain lane-major order (dq fastest) puts a warp's 32 stores in 2 banks' worth of rows:
// 16-way bank conflicts at D = 128, 8-way at D = 64, which made the transpose, not the tensor
// cores, the limiter of the fp8 kernel. These orders make each of a warp's loads and stores
// hit 32 banks, or 16 banks twice where a row is 64 bytes (a 4-byte word's row parity is the
// same for every lane of one instruction there, so 2-way is the least). The steps of a stage
// are 0 .. BN * D / 512 - 1; every unit is visited once.
struct VtUnit {
  int ku, dq;
};
// (Template parameters are named so that no cell macro can collide: tunables are macros, and a
// GEMM cell's BN is one.)
template <int KtD, int KtBn>
KT_HD constexpr VtUnit vt_unit(int lane, int step) {
  static_assert((KtD == 64 || KtD == 128) && (KtBn == 64 || KtBn == 128), "D and BN: 64 or 128");
  if (KtBn == 128 && KtD == 128) return VtUnit{lane, lane ^ (8 * (lane & 3)) ^ step};
  if (KtBn == 128) return VtUnit{lane, (lane ^ step) & 15};
  if (KtD == 128) return VtUnit{(lane ^ step) & 15, lane ^ (8 * ((lane ^ step) & 3))};
  return VtUnit{lane & 15, (lane & 15) ^ ((lane >> 4) | (step << 1))};
}

}  // namespace kt

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

namespace kt {

// ---------------------------------------------------------------------------
// Fences and groups
// ---------------------------------------------------------------------------

// Before the first wgmma of a batch: orders earlier register / shared-memory accesses.
KT_DEVICE_INLINE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

KT_DEVICE_INLINE void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

// Wait until at most N committed wgmma groups are pending.
template <int KtN>
KT_DEVICE_INLINE void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(KtN) : "memory");
}

// Keep the compiler from moving accesses to the accumulators (or A fragments) across an
// asynchronous wgmma, which it sees as an ordinary asm statement: call before wgmma_fence()
// and after wgmma_wait<>() on the registers involved.
template <int KtR>
KT_DEVICE_INLINE void wgmma_fence_operand(float (&d)[KtR]) {
#pragma unroll
  for (int i = 0; i < KtR; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

template <int KtR>
KT_DEVICE_INLINE void wgmma_fence_operand(unsigned int (&a)[KtR]) {
#pragma unroll
  for (int i = 0; i < KtR; ++i) asm volatile("" : "+r"(a[i])::"memory");
}

// ---------------------------------------------------------------------------
// The instruction: m64nNk16, f32 accumulator, bf16 or fp16 inputs, N in {64, 128, 176, 192,
// 256} (176 and 192: the kv tiles FlashAttention-3 found best for head dim 128)
// ---------------------------------------------------------------------------

#define KT_F8(d, i)                                                                          \
  "+f"(d[i + 0]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]),          \
      "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])

// Accumulator operand lists: %0 .. %(N/2 - 1).
#define KT_WGMMA_D64 \
  "%0, %1, %2, %3, %4, %5, %6, %7" ", " \
  "%8, %9, %10, %11, %12, %13, %14, %15" ", " \
  "%16, %17, %18, %19, %20, %21, %22, %23" ", " \
  "%24, %25, %26, %27, %28, %29, %30, %31"
#define KT_WGMMA_D128 KT_WGMMA_D64 ", " \
  "%32, %33, %34, %35, %36, %37, %38, %39" ", " \
  "%40, %41, %42, %43, %44, %45, %46, %47" ", " \
  "%48, %49, %50, %51, %52, %53, %54, %55" ", " \
  "%56, %57, %58, %59, %60, %61, %62, %63"
#define KT_WGMMA_D176 KT_WGMMA_D128 ", " \
  "%64, %65, %66, %67, %68, %69, %70, %71" ", " \
  "%72, %73, %74, %75, %76, %77, %78, %79" ", " \
  "%80, %81, %82, %83, %84, %85, %86, %87"
#define KT_WGMMA_D192 KT_WGMMA_D176 ", " \
  "%88, %89, %90, %91, %92, %93, %94, %95"
#define KT_WGMMA_D256 KT_WGMMA_D128 ", " \
  "%64, %65, %66, %67, %68, %69, %70, %71" ", " \
  "%72, %73, %74, %75, %76, %77, %78, %79" ", " \
  "%80, %81, %82, %83, %84, %85, %86, %87" ", " \
  "%88, %89, %90, %91, %92, %93, %94, %95" ", " \
  "%96, %97, %98, %99, %100, %101, %102, %103" ", " \
  "%104, %105, %106, %107, %108, %109, %110, %111" ", " \
  "%112, %113, %114, %115, %116, %117, %118, %119" ", " \
  "%120, %121, %122, %123, %124, %125, %126, %127"
#define KT_WGMMA_ARGS64(d) KT_F8(d, 0), KT_F8(d, 8), KT_F8(d, 16), KT_F8(d, 24)
#define KT_WGMMA_ARGS128(d) KT_WGMMA_ARGS64(d), KT_F8(d, 32), KT_F8(d, 40), KT_F8(d, 48), \
                            KT_F8(d, 56)
#define KT_WGMMA_ARGS176(d) KT_WGMMA_ARGS128(d), KT_F8(d, 64), KT_F8(d, 72), KT_F8(d, 80)
#define KT_WGMMA_ARGS192(d) KT_WGMMA_ARGS176(d), KT_F8(d, 88)
#define KT_WGMMA_ARGS256(d) KT_WGMMA_ARGS128(d), KT_F8(d, 64), KT_F8(d, 72), KT_F8(d, 80), \
                            KT_F8(d, 88), KT_F8(d, 96), KT_F8(d, 104), KT_F8(d, 112),        \
                            KT_F8(d, 120)

// "wgmma.mma_async.sync.aligned.m64n<N>k16.f32.<T>.<T> d, a-desc, b-desc, scale-d,
//  imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b": A and B from shared memory; scale-d a
// predicate (0: D = A*B, 1: D += A*B); trans-a 0 (A K-major); trans-b (0: B stored N x K,
// K-major; 1: B stored K x N, MN-major).
#define KT_WGMMA_SS_ASM(KtN, T, DREGS, A, B, S, TB)                                         \
  "{\n .reg .pred p;\n setp.ne.b32 p, %" #S ", 0;\n"                                        \
  " wgmma.mma_async.sync.aligned.m64n" #KtN "k16.f32." T "." T " {" DREGS "}, %" #A ", %" #B \
  ", p, 1, 1, 0, %" #TB ";\n}\n"

// "... d, {a0, a1, a2, a3}, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-b": A from
// four 32-bit registers per thread (two 16-bit values each, see wgmma_a_from_acc), B from
// shared memory.
#define KT_WGMMA_RS_ASM(KtN, T, DREGS, A0, A1, A2, A3, B, S, TB)                           \
  "{\n .reg .pred p;\n setp.ne.b32 p, %" #S ", 0;\n"                                        \
  " wgmma.mma_async.sync.aligned.m64n" #KtN "k16.f32." T "." T " {" DREGS "}, {%" #A0      \
  ", %" #A1 ", %" #A2 ", %" #A3 "}, %" #B ", p, 1, 1, %" #TB ";\n}\n"

// The 8-bit forms, m64nNk32 with e4m3 inputs: no transpose immediates (PTX allows 8-bit
// operands only K-major), so a V tile must be transposed in shared memory for P * V.
#define KT_WGMMA_SS8_ASM(KtN, DREGS, A, B, S)                                               \
  "{\n .reg .pred p;\n setp.ne.b32 p, %" #S ", 0;\n"                                        \
  " wgmma.mma_async.sync.aligned.m64n" #KtN "k32.f32.e4m3.e4m3 {" DREGS "}, %" #A ", %" #B  \
  ", p, 1, 1;\n}\n"
#define KT_WGMMA_RS8_ASM(KtN, DREGS, A0, A1, A2, A3, B, S)                                  \
  "{\n .reg .pred p;\n setp.ne.b32 p, %" #S ", 0;\n"                                        \
  " wgmma.mma_async.sync.aligned.m64n" #KtN "k32.f32.e4m3.e4m3 {" DREGS "}, {%" #A0 ", %" #A1 \
  ", %" #A2 ", %" #A3 "}, %" #B ", p, 1, 1;\n}\n"

//: Input element types of wgmma<N, TYPE>: bfloat16, IEEE half (k16 per instruction) and
//: float8 e4m3 (k32 per instruction, both operands K-major).
enum WgmmaType { WG_BF16 = 0, WG_F16 = 1, WG_E4M3 = 2 };

template <int KtN, int KtType>
struct Wgmma {
  static_assert(KtN == 64 || KtN == 128 || KtN == 176 || KtN == 192 || KtN == 256,
                "[ktune] wgmma_bf16<N> / wgmma_ss / wgmma_rs: N must be 64, 128, 176, 192 or 256");
};

// One specialisation per N: the operand numbers after the N/2 accumulators differ.
#define KT_WGMMA_DEFINE(KtN, DL, DA, A, B, S, TB, R0, R1, R2, R3, RB, RS, RTB)              \
  template <int KtType>                                                                      \
  struct Wgmma<KtN, KtType> {                                                                \
    template <int KtTransB>                                                                  \
    static KT_DEVICE_INLINE void ss(float (&d)[KtN / 2], unsigned long long a,               \
                                    unsigned long long b, int scale_d) {                     \
      static_assert(KtType != WG_E4M3 || KtTransB == 0, "[ktune] 8-bit wgmma: B is K-major"); \
      if constexpr (KtType == WG_E4M3)                                                       \
        asm volatile(KT_WGMMA_SS8_ASM(KtN, DL, A, B, S)                                      \
                     : DA(d) : "l"(a), "l"(b), "r"(scale_d));                                \
      else if constexpr (KtType == WG_F16)                                                   \
        asm volatile(KT_WGMMA_SS_ASM(KtN, "f16", DL, A, B, S, TB)                            \
                     : DA(d) : "l"(a), "l"(b), "r"(scale_d), "n"(KtTransB));                 \
      else                                                                                   \
        asm volatile(KT_WGMMA_SS_ASM(KtN, "bf16", DL, A, B, S, TB)                           \
                     : DA(d) : "l"(a), "l"(b), "r"(scale_d), "n"(KtTransB));                 \
    }                                                                                        \
    template <int KtTransB>                                                                  \
    static KT_DEVICE_INLINE void rs(float (&d)[KtN / 2], const unsigned int (&a)[4],         \
                                    unsigned long long b, int scale_d) {                     \
      static_assert(KtType != WG_E4M3 || KtTransB == 0, "[ktune] 8-bit wgmma: B is K-major"); \
      if constexpr (KtType == WG_E4M3)                                                       \
        asm volatile(KT_WGMMA_RS8_ASM(KtN, DL, R0, R1, R2, R3, RB, RS)                       \
                     : DA(d)                                                                 \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d));    \
      else if constexpr (KtType == WG_F16)                                                   \
        asm volatile(KT_WGMMA_RS_ASM(KtN, "f16", DL, R0, R1, R2, R3, RB, RS, RTB)            \
                     : DA(d)                                                                 \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d),     \
                       "n"(KtTransB));                                                       \
      else                                                                                   \
        asm volatile(KT_WGMMA_RS_ASM(KtN, "bf16", DL, R0, R1, R2, R3, RB, RS, RTB)           \
                     : DA(d)                                                                 \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d),     \
                       "n"(KtTransB));                                                       \
    }                                                                                        \
  };

KT_WGMMA_DEFINE(64, KT_WGMMA_D64, KT_WGMMA_ARGS64, 32, 33, 34, 35, 32, 33, 34, 35, 36, 37, 38)
KT_WGMMA_DEFINE(128, KT_WGMMA_D128, KT_WGMMA_ARGS128, 64, 65, 66, 67, 64, 65, 66, 67, 68, 69,
                70)
KT_WGMMA_DEFINE(176, KT_WGMMA_D176, KT_WGMMA_ARGS176, 88, 89, 90, 91, 88, 89, 90, 91, 92, 93,
                94)
KT_WGMMA_DEFINE(192, KT_WGMMA_D192, KT_WGMMA_ARGS192, 96, 97, 98, 99, 96, 97, 98, 99, 100, 101,
                102)
KT_WGMMA_DEFINE(256, KT_WGMMA_D256, KT_WGMMA_ARGS256, 128, 129, 130, 131, 128, 129, 130, 131,
                132, 133, 134)

// D (64 x N, f32, N/2 registers per thread of the warpgroup) = or += A (64 x 16) * B (16 x N),
// both from shared memory (64 x 32 * 32 x N for WG_E4M3). Accumulator layout per thread t of the warpgroup (warp w = t / 32,
// lane l): register 4 * j + 2 * h + e holds row 16 * w + l / 4 + 8 * h, column
// 8 * j + 2 * (l % 4) + e.
template <int KtN, int KtType = WG_BF16, int KtTransB = 0>
KT_DEVICE_INLINE void wgmma_ss(float (&d)[KtN / 2], unsigned long long desc_a,
                               unsigned long long desc_b, int scale_d) {
  Wgmma<KtN, KtType>::template ss<KtTransB>(d, desc_a, desc_b, scale_d);
}

// The bf16 SS form under the name the GEMM examples use: wgmma_bf16<N, TRANS_B>.
template <int KtN, int KtTransB = 0>
KT_DEVICE_INLINE void wgmma_bf16(float (&d)[KtN / 2], unsigned long long desc_a,
                                 unsigned long long desc_b, int scale_d) {
  Wgmma<KtN, WG_BF16>::template ss<KtTransB>(d, desc_a, desc_b, scale_d);
}

// D = or += A * B with A (64 x 16) in registers: a[0..3] as wgmma_a_from_acc packs them.
template <int KtN, int KtType = WG_F16, int KtTransB = 0>
KT_DEVICE_INLINE void wgmma_rs(float (&d)[KtN / 2], const unsigned int (&a)[4],
                               unsigned long long desc_b, int scale_d) {
  Wgmma<KtN, KtType>::template rs<KtTransB>(d, a, desc_b, scale_d);
}

// ---------------------------------------------------------------------------
// Register fragments: an f32 accumulator becomes the A operand of the next wgmma
// ---------------------------------------------------------------------------

// Two floats rounded to fp16 and packed, `lo` in the low half.
KT_DEVICE_INLINE unsigned int pack_f16x2(float lo, float hi) {
  unsigned int r;
  asm("cvt.rn.f16x2.f32 %0, %2, %1;" : "=r"(r) : "f"(lo), "f"(hi));
  return r;
}

// The A fragment (m64 x k16) of k16 block `kb` of an f32 accumulator S (m64 x N): in the PTX
// register fragment layouts, a thread's accumulator registers 8 kb .. 8 kb + 7 (columns
// 16 kb .. 16 kb + 15 of its two rows) are exactly the values its A registers of that k block
// hold, in the order a0 = (row, k 0-1), a1 = (row + 8, k 0-1), a2 = (row, k 8-9),
// a3 = (row + 8, k 8-9) of its quad's columns. So P = softmax(S) feeds P * V with no trip
// through shared memory (FlashAttention-3's "RS" GEMM).
template <int KtType = WG_F16, int KtR>
KT_DEVICE_INLINE void wgmma_a_from_acc(unsigned int (&a)[4], const float (&s)[KtR], int kb) {
  const int i = 8 * kb;
  if constexpr (KtType == WG_F16) {
    a[0] = pack_f16x2(s[i + 0], s[i + 1]);
    a[1] = pack_f16x2(s[i + 2], s[i + 3]);
    a[2] = pack_f16x2(s[i + 4], s[i + 5]);
    a[3] = pack_f16x2(s[i + 6], s[i + 7]);
  } else {
    a[0] = pack_bf16x2(s[i + 0], s[i + 1]);
    a[1] = pack_bf16x2(s[i + 2], s[i + 3]);
    a[2] = pack_bf16x2(s[i + 4], s[i + 5]);
    a[3] = pack_bf16x2(s[i + 6], s[i + 7]);
  }
}

// Four floats rounded to e4m3 (satfinite) and packed, `b0` in the lowest byte.
KT_DEVICE_INLINE unsigned int pack_e4m3x4(float b0, float b1, float b2, float b3) {
  unsigned short lo, hi;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;" : "=h"(lo) : "f"(b0), "f"(b1));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;" : "=h"(hi) : "f"(b2), "f"(b3));
  unsigned int r;
  asm("mov.b32 %0, {%1, %2};" : "=r"(r) : "h"(lo), "h"(hi));
  return r;
}

// The e4m3 A fragment (m64 x k32) of k32 block `kb` of an f32 accumulator, with the k index
// permuted: a k32 A register holds 4 consecutive k of one row (a0: row, k 4q..4q+3 for quad
// lane q; a1: row + 8; a2, a3: k + 16), but the accumulator gives a thread columns 2q, 2q + 1
// of each 8-column chunk. Rather than shuffle, a thread packs what it has, so A's k position
// 16h + 4q + 2a + e holds column 16h + 8a + 2q + e of the block. A product over k is the same
// under any permutation applied to both sides, so B's rows must follow it: see
// wgmma_e4m3_k_of (the transposed V tile is written in this order).
template <int KtR>
KT_DEVICE_INLINE void wgmma_a_from_acc_e4m3(unsigned int (&a)[4], const float (&s)[KtR], int kb) {
  const int i = 16 * kb;  // four 8-column chunks of 4 registers
  a[0] = pack_e4m3x4(s[i + 0], s[i + 1], s[i + 4], s[i + 5]);
  a[1] = pack_e4m3x4(s[i + 2], s[i + 3], s[i + 6], s[i + 7]);
  a[2] = pack_e4m3x4(s[i + 8], s[i + 9], s[i + 12], s[i + 13]);
  a[3] = pack_e4m3x4(s[i + 10], s[i + 11], s[i + 14], s[i + 15]);
}

// Max and sum across the four threads of a quad (lanes 4q .. 4q + 3), which hold one row's
// columns between them in the accumulator layout.
KT_DEVICE_INLINE float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

KT_DEVICE_INLINE float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// 2^x with the SFU's approximation (MUFU.EX2), as softmax kernels use it; -inf gives 0.
KT_DEVICE_INLINE float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 2^x for x <= 0 on the FMA pipe instead of the SFU: round x to k + f (f in [-0.5, 0.5]) with
// the 1.5 * 2^23 trick, a degree-3 polynomial for 2^f (minimax on relative error, 7.5e-5,
// below fp16's half ulp of 4.9e-4), and k added to the exponent bits. MUFU.EX2 runs at 16 per
// clock per SM on sm_90, the FMA pipe at 128, so a softmax that is bound by the SFU can move a
// fraction of its exponentials here (FlashAttention-4's trick). x below -126 gives ~0
// (-inf included), which is what a masked score needs.
KT_DEVICE_INLINE float exp2_poly(float x) {
  x = fmaxf(x, -126.f);
  const float t = x + 12582912.f;  // round(x) in the low mantissa bits of t
  const float f = x - (t - 12582912.f);
  const float p = fmaf(fmaf(fmaf(0.05517167f, f, 0.24261113f), f, 0.69326097f), f, 0.99992806f);
  return __int_as_float(__float_as_int(p) + (__float_as_int(t) << 23));
}

// ---------------------------------------------------------------------------
// Named barriers: a subset of the CTA's warps meets (e.g. two consumer warpgroups taking
// turns at the tensor cores). IDs 1..15 (0 is __syncthreads'); `threads` a multiple of 32.
// ---------------------------------------------------------------------------

KT_DEVICE_INLINE void named_barrier_sync(unsigned int id, unsigned int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

KT_DEVICE_INLINE void named_barrier_arrive(unsigned int id, unsigned int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace kt

#endif  // __CUDACC__ || __CUDACC_RTC__

#endif  // KTUNE_WGMMA_CUH
