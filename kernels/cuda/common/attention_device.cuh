// Device building blocks of the attention kernels (kernels/cuda/sparse_mqa/, dense_mha/):
// warp-level bf16 tensor-core MMA (mma.sync m16n8k16, fp32 accumulate), ldmatrix, cp.async with
// zero fill, and the XOR swizzle of shared-memory rows. sm_80+ instructions; the project builds for
// sm_90.
//
// Fragment layouts of mma.m16n8k16 (g = lane / 4, t = lane % 4):
//   A (16 x 16, row-major) a[0] = (g, 2t..2t+1)   a[1] = (g+8, 2t..)   a[2] = (g, 2t+8..)   a[3] = (g+8, 2t+8..)
//   B (16 x 8, k x n)      b[0] = (k 2t..2t+1, n g)                     b[1] = (k 2t+8.., n g)
//   C (16 x 8, fp32)       c[0..1] = (g, 2t..2t+1)                      c[2..3] = (g+8, 2t..2t+1)
// Each 32-bit register holds two bf16, the lower column (or k) in the low half.
//
// Swizzle: shared-memory rows are whole 16-byte chunks; chunk c of row r is stored at chunk
// c ^ (r & 7) (the XOR touches the low 3 bits only, so a row of 8n chunks stays in place as a set).
// ldmatrix reads 8 consecutive rows at one logical chunk: after the swizzle those are 8 different
// 16-byte bank groups whatever the row pitch (a multiple of 128 bytes here), so no bank conflicts.
// ldmatrix carries a "memory" clobber: the compiler keeps it after the plain shared-memory stores
// (and the barrier) that produced its tile.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/bf16.h"

namespace mla::attn_dev {

inline constexpr unsigned kFullMask = 0xFFFFFFFFu;
inline constexpr float kLog2e = 1.4426950408889634f;  // log2(e) rounded to float: e^x = 2^(x log2 e)

// 2^x (MUFU.EX2: about 2 ulp, subnormal results flushed to zero, -inf -> +0).
__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// e^d as 2^(d log2 e) by ex2_approx: the rescale factor of the `wgmma` kernels' online softmax
// (raise_row_max's exp_of).
__device__ __forceinline__ float exp_by_ex2(float d) { return ex2_approx(d * kLog2e); }

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Byte offset of logical 16-byte chunk `chunk` of row `row` in a swizzled tile with `row_bytes`
// bytes per row.
__device__ __forceinline__ uint32_t swizzled(int row, int chunk, int row_bytes) {
  return static_cast<uint32_t>(row * row_bytes + ((chunk ^ (row & 7)) << 4));
}

// 16 bytes global -> shared, asynchronous. src_bytes 16 copies, 0 writes 16 zero bytes and reads
// nothing (src must still be a valid global address; callers pass a base pointer). .cg: cached in
// L2 only.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// c += a * b, bf16 operands, fp32 accumulators.
__device__ __forceinline__ void mma_bf16_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two fp32 as bf16x2 (round to nearest even), lo in the low half.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// The final row of an attention output (docs/semantics.md §4): out = acc / l with an IEEE
// division, 0 when no key was visible (l == 0); lse = m + ln l, -inf when no key was visible.
__device__ __forceinline__ float normalize(float acc, float l) { return l == 0.0f ? 0.0f : __fdiv_rn(acc, l); }
__device__ __forceinline__ float row_lse(float m, float l) { return l == 0.0f ? -INFINITY : m + logf(l); }

// The online softmax's running row max (docs/semantics.md §4): m = max(m, tile_max); returns the
// factor exp(m_old - m_new) that rescales l and the accumulators, exactly 1 when m did not change.
// (When it changes, m_new > m_old >= -inf, so m_new is not -inf; the factor is 0 after a row's
// first valid tile.)
// exp_of(d) computes the factor from d = m_old - m_new (< 0, or -inf); the overload without it uses
// expf.
template <typename ExpOf>
__device__ __forceinline__ float raise_row_max(float& m, float tile_max, ExpOf exp_of) {
  const float m_new = fmaxf(m, tile_max);
  if (m_new == m) return 1.0f;
  const float factor = exp_of(m - m_new);
  m = m_new;
  return factor;
}
__device__ __forceinline__ float raise_row_max(float& m, float tile_max) {
  return raise_row_max(m, tile_max, [](float d) { return expf(d); });
}

// What p = exp(s - ref) subtracts: the row max, or 0 while the row has no valid score (m = -inf), so
// that masked scores (-inf) give p = 0 rather than NaN.
__device__ __forceinline__ float exp_ref(float m) { return m == -INFINITY ? 0.0f : m; }

__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }

// --- The `simple` kernels' softmax step (dense_mha_simple.cu, sparse_mqa_simple.cu) --------------

// The row max after a tile and the factor exp(m_old - m_new) (raise_row_max).
struct RowMaxStep {
  float m;
  float factor;
};

// One row of a 64-column tile, the whole warp: lane takes columns lane and lane + 32 (v0 / v1:
// whether they are valid; an invalid score counts as -inf). Raises the row max m_old to the tile
// max, overwrites the scores with the fp32 p = exp(s - m_new) (0 where invalid) and writes
// bf16_rne(p) widened to prob. m_old is read after the warp's max reduction.
__device__ __forceinline__ RowMaxStep softmax_tile_row(float* score, float* prob, const float& m_old, bool v0, bool v1,
                                                       int lane) {
  const float s0 = v0 ? score[lane] : -INFINITY;
  const float s1 = v1 ? score[lane + 32] : -INFINITY;
  float tmax = fmaxf(fmaxf(-INFINITY, s0), s1);
#pragma unroll
  for (int o = 16; o > 0; o /= 2) tmax = fmaxf(tmax, __shfl_xor_sync(kFullMask, tmax, o));
  float m = m_old;
  const float factor = raise_row_max(m, tmax);
  const float ref = exp_ref(m);
  const float p0 = v0 ? expf(s0 - ref) : 0.0f;
  const float p1 = v1 ? expf(s1 - ref) : 0.0f;
  score[lane] = p0;
  score[lane + 32] = p1;
  prob[lane] = bf16_to_f32(static_cast<bf16_t>(pack_bf16x2(p0, 0.0f) & 0xFFFFu));
  prob[lane + 32] = bf16_to_f32(static_cast<bf16_t>(pack_bf16x2(p1, 0.0f) & 0xFFFFu));
  return {m, factor};
}

}  // namespace mla::attn_dev
