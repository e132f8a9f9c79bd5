// The steps the two warpgroup-MMA sparse MQA kernels (sparse_mqa_wgmma.cu, sparse_mqa_crossover.cu)
// share around their matrix products: the online-softmax step of a 64-column tile and the write of
// an item's rows. Both kernels hold a 64-head x 64-column tile in two warpgroups: warpgroup wg owns
// S[64 heads][columns 32 wg .. 32 wg + 31] (m64n32 accumulators) and O[64][dims 256 wg .. 256 wg +
// 255] (2 x m64n128); a thread holds rows row0 = 16 (warp % 4) + lane / 4 and row1 = row0 + 8 of
// both (m64 fragment layout, wgmma_device.cuh), tq = lane % 4. Every bf16 tile is stored in
// 128-byte-swizzled column blocks of [64 rows][64 bf16] = 8 KiB (wgmma_device.cuh). The product
// issues exist only where MLA_WGMMA_ENABLED (sm_90a device passes).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/common/attention_device.cuh"
#include "kernels/cuda/common/wgmma_device.cuh"
#include "kernels/cuda/sparse_mqa/sparse_mqa_device.cuh"

namespace mla::sparse_dev {

inline constexpr int kWgmmaBlockBytes = 64 * 128;  // one swizzled column block: 64 rows x 64 bf16
using attn_dev::kLog2e;

#if MLA_WGMMA_ENABLED

// Issues and commits S[64][32 wg .. 32 wg + 31] = Q K^T over the 576 depth (36 k16 steps x
// m64n32k16): q / k the shared addresses of the Q tile ([64 heads][576], 9 blocks) and the K tile
// ([64 columns][576]), both K-major (SBO 1024; k16 step kk: + 8 KiB (kk / 4) + 32 B (kk % 4)).
__device__ __forceinline__ void issue_scores(float (&s)[16], uint32_t q, uint32_t k, int wg) {
  wgmma::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kDl / 16; ++kk) {
    const uint32_t step = (kk / 4) * kWgmmaBlockBytes + (kk % 4) * 32;
    const uint64_t da = wgmma::desc_sw128(q + step, 16, 1024);
    const uint64_t db = wgmma::desc_sw128(k + step + 32 * wg * 128, 16, 1024);
    wgmma::wgmma_m64n32k16_ss(s, da, db, kk > 0 ? 1 : 0);
  }
  wgmma::wgmma_commit();
}

// Issues and commits O[64][256 wg .. 256 wg + 255] += P V (4 k16 steps x 2 m64n128k16): p the
// shared address of P ([64][64], K-major), k that of the K tile whose first 512 dims are V
// (MN-major with the transpose bit: SBO 1024 = next 8 keys, LBO 8 KiB = next 64 dims; k16 step
// kk: + 2 KiB kk).
__device__ __forceinline__ void issue_values(float (&o)[2][64], uint32_t p, uint32_t k, int wg) {
  wgmma::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kTile / 16; ++kk) {
    const uint64_t da = wgmma::desc_sw128(p + 32 * kk, 16, 1024);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const uint32_t b = k + (4 * wg + 2 * j) * kWgmmaBlockBytes + 16 * kk * 128;
      wgmma::wgmma_m64n128k16_ss_bt(o[j], da, wgmma::desc_sw128(b, kWgmmaBlockBytes, 1024), 1);
    }
  }
  wgmma::wgmma_commit();
}

#endif  // MLA_WGMMA_ENABLED

// This thread's place in the two warpgroups' tile.
struct WgmmaRows {
  int wg;          // warpgroup: S columns 32 wg .., O dims 256 wg ..
  int row0, row1;  // rows of S, P and O
  int tq;          // lane % 4
};

// One online-softmax step over this warpgroup's S accumulators s (s[4 i + 2 half + c]: row
// (half ? row1 : row0), column 32 wg + 8 i + 2 tq + c). valid(i, c): that column is valid (else
// its score is -inf). The row's tile max is exchanged with the other warpgroup through s_max
// ([2][64] floats) around sync() (the barrier of both warpgroups; after it both have waited for
// their P V of the previous tile), so both compute the same m and factor; row_l is this
// warpgroup's sum over its columns. Writes P = bf16(p) at p_base ([64][64] bf16, K-major, 128-byte
// swizzle) and rescales o by the factor. p = 2^((x - m) log2 e) and the factor 2^((m_old - m_new)
// log2 e) by ex2.approx (MUFU.EX2, about 2 ulp; -inf -> +0, subnormal results flushed to zero), as
// the dense `wgmma` kernel does: expf's range reduction (six more instructions per score) sits on
// the path every tile waits for. m stays in natural units (the LSE is m + log l).
template <class Valid, class Sync>
__device__ __forceinline__ void softmax_step(float (&s)[16], Valid valid, float scale, float* s_max, uint8_t* p_base,
                                             const WgmmaRows& r, float (&row_m)[2], float (&row_l)[2],
                                             float (&o)[2][64], Sync sync) {
  constexpr int kHeads = kWgmmaHeads;
  float tmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        float& x = s[4 * i + 2 * half + c];
        x = valid(i, c) ? x * scale : -INFINITY;
        tmax[half] = fmaxf(tmax[half], x);
      }
    }
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    tmax[half] = fmaxf(tmax[half], __shfl_xor_sync(kFullMask, tmax[half], 1));
    tmax[half] = fmaxf(tmax[half], __shfl_xor_sync(kFullMask, tmax[half], 2));
  }
  if (r.tq == 0) {
    s_max[r.wg * kHeads + r.row0] = tmax[0];
    s_max[r.wg * kHeads + r.row1] = tmax[1];
  }
  sync();  // both warpgroups' tile maxima visible
  float factor[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = half ? r.row1 : r.row0;
    factor[half] =
        attn_dev::raise_row_max(row_m[half], fmaxf(tmax[half], s_max[(1 - r.wg) * kHeads + row]), attn_dev::exp_by_ex2);
    row_l[half] *= factor[half];
  }
  float tsum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float ref2 = attn_dev::exp_ref(row_m[half]) * kLog2e;
      const float p0 = attn_dev::ex2_approx(fmaf(s[4 * i + 2 * half], kLog2e, -ref2));
      const float p1 = attn_dev::ex2_approx(fmaf(s[4 * i + 2 * half + 1], kLog2e, -ref2));
      tsum[half] += p0;
      tsum[half] += p1;
      const int row = half ? r.row1 : r.row0;
      *reinterpret_cast<uint32_t*>(p_base + attn_dev::swizzled(row, 4 * r.wg + i, 128) + 4 * r.tq) =
          attn_dev::pack_bf16x2(p0, p1);
    }
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    tsum[half] += __shfl_xor_sync(kFullMask, tsum[half], 1);
    tsum[half] += __shfl_xor_sync(kFullMask, tsum[half], 2);
    row_l[half] += tsum[half];
  }
  // O *= factor (rows row0 / row1 are this thread's accumulator rows too).
  if (!__all_sync(kFullMask, factor[0] == 1.0f && factor[1] == 1.0f)) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        o[j][4 * i + 0] *= factor[0];
        o[j][4 * i + 1] *= factor[0];
        o[j][4 * i + 2] *= factor[1];
        o[j][4 * i + 3] *= factor[1];
      }
    }
  }
}

// The item's rows once every P V has finished (o final): l = the two warpgroups' sums (exchanged
// through s_sum, [2][64] floats, around sync()); out_lat = bf16(O / l) and lse (partial < 0), or
// the fp32 partial row and its LSE. Heads h0 + row past num_heads are not written.
template <class Sync>
__device__ __forceinline__ void write_item_rows(const SparseArgs& a, int64_t t, int h0, int32_t partial,
                                                const float (&o)[2][64], const float (&row_m)[2],
                                                const float (&row_l)[2], float* s_sum, const WgmmaRows& r, Sync sync) {
  constexpr int kHeads = kWgmmaHeads;
  if (r.tq == 0) {
    s_sum[r.wg * kHeads + r.row0] = row_l[0];
    s_sum[r.wg * kHeads + r.row1] = row_l[1];
  }
  sync();
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = half ? r.row1 : r.row0, h = h0 + row;
    if (h >= a.num_heads) continue;
    const float l = s_sum[row] + s_sum[kHeads + row];
    if (r.wg == 0 && r.tq == 0) {
      const float v = row_lse(row_m[half], l);
      if (partial < 0) {
        a.lse[t * a.num_heads + h] = v;
      } else {
        a.partial_lse[static_cast<int64_t>(partial) * a.num_heads + h] = v;
      }
    }
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int col0 = 256 * r.wg + 128 * j + 2 * r.tq;
      if (partial < 0) {
        bf16_t* out = a.out_lat + (t * a.num_heads + h) * kDc + col0;
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          *reinterpret_cast<uint32_t*>(out + 8 * i) = attn_dev::pack_bf16x2(normalize(o[j][4 * i + 2 * half], l),
                                                                            normalize(o[j][4 * i + 2 * half + 1], l));
        }
      } else {
        float* out = a.partial_out + (static_cast<int64_t>(partial) * a.num_heads + h) * kDc + col0;
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          *reinterpret_cast<float2*>(out + 8 * i) =
              make_float2(normalize(o[j][4 * i + 2 * half], l), normalize(o[j][4 * i + 2 * half + 1], l));
        }
      }
    }
  }
}

}  // namespace mla::sparse_dev
