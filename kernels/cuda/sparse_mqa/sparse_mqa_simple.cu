// Sparse MQA over the fp8_ds_mla cache (docs/semantics.md §4.1), `simple` implementation: the
// correctness baseline, fp32 CUDA-core code in the host backend's order
// (kernels/host/host_sparse_mqa.cpp). Runs where `tc` and `wgmma` cannot (any alignment).
//
// One CTA (256 threads) per (work item, 16 heads), the item's head groups adjacent in the 1-D grid
// (the second group finds the entries in L2). Per 64-column tile of the item's range (columns
// [k_begin, k_end) clipped to [0, topk)):
//   keys: warp w dequantizes entries w, w + 8, ... (lane l: FP8 bytes [16 l, 16 l + 16) and, lanes
//     0..7, the RoPE bytes) into sK (pitch 1156 bytes: consecutive rows one bank apart); a column
//     whose slot is outside [0, num_slots) is not read, its row is zero and its score -inf;
//   scores: thread t computes column t % 64 against 4 heads, 8-lane dot products combined
//     pairwise, times scale;
//   softmax: warp w owns heads 2w, 2w + 1 (lanes take columns lane, lane + 32): tile max, m_new,
//     factor = exp(m - m_new) (exactly 1 when m is unchanged), p = exp(s - m_new), the tile's sum of
//     the fp32 p in column order by lane 0, P = bf16_rne(p);
//   O: thread t owns dims t and t + 256 of every head: acc = acc * factor + sum_j p_j v_j column
//     by column.
// Every product and sum is a single IEEE operation (__fmul_rn / __fadd_rn: no FMA contraction), so
// the results match the host up to expf / logf ulps. Output: out_lat = bf16(acc / l) and lse = m +
// ln l, or the fp32 partial row item.partial (trusted, docs/semantics.md §6.4); no valid column: 0
// and -inf.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/common/ds_mla_entry.h"
#include "kernels/cuda/common/attention_device.cuh"
#include "kernels/cuda/common/device_io.cuh"
#include "kernels/cuda/common/kernel_launch.cuh"
#include "kernels/cuda/sparse_mqa/sparse_mqa_device.cuh"
#include "kernels/cuda/sparse_mqa/sparse_mqa_impls.h"

namespace mla {
namespace {

using namespace sparse_dev;  // NOLINT: this file's kernel is the header's user

constexpr int kSimpleThreads = 256;
constexpr int kSimpleKPitch = kDl + 2;  // bf16 per sK row: 1156 bytes, consecutive rows 1 bank apart
constexpr int kSimpleDimsPerThread = kDc / kSimpleThreads;  // 2

struct SimpleSmem {
  bf16_t q[kSimpleHeads][kDl];
  bf16_t k[kTile][kSimpleKPitch];
  float score[kSimpleHeads][kTile];  // s, then the fp32 p of the tile
  float prob[kSimpleHeads][kTile];   // bf16_rne(p) widened
  float factor[kSimpleHeads];
  float m[kSimpleHeads];
  float l[kSimpleHeads];
  int32_t valid[kTile];
};

template <bool kVecCache>
__global__ void __launch_bounds__(kSimpleThreads) sparse_mqa_simple_kernel(const SparseArgs a) {
  extern __shared__ __align__(16) uint8_t smem_raw[];
  SimpleSmem& sm = *reinterpret_cast<SimpleSmem*>(smem_raw);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  [[maybe_unused]] const auto [t, h0, kb, ke, ntiles, partial, idx_row] = cta_work(a, kSimpleHeads);

  // Q rows (zero for heads past num_heads).
  for (int i = tid; i < kSimpleHeads * kDl; i += kSimpleThreads) {
    const int r = i / kDl, d = i % kDl, h = h0 + r;
    bf16_t v = 0;
    if (h < a.num_heads) {
      v = d < kDc ? a.q_nope[t * a.q_nope_ts + h * a.q_nope_hs + d] : a.q_pe[t * a.q_pe_ts + h * a.q_pe_hs + (d - kDc)];
    }
    sm.q[r][d] = v;
  }
  if (tid < kSimpleHeads) {
    sm.m[tid] = -INFINITY;
    sm.l[tid] = 0.0f;
  }
  float acc[kSimpleHeads][kSimpleDimsPerThread];
#pragma unroll
  for (int r = 0; r < kSimpleHeads; ++r) {
#pragma unroll
    for (int d = 0; d < kSimpleDimsPerThread; ++d) acc[r][d] = 0.0f;
  }

  for (int32_t c0 = kb; c0 < ke; c0 += kTile) {
    __syncthreads();  // the previous tile is consumed (and Q / stats are initialised)
    // Keys: warp w dequantizes entries w, w + 8, ...; lane l does FP8 bytes [16 l, 16 l + 16).
    for (int e = warp; e < kTile; e += kSimpleThreads / 32) {
      const int32_t col = c0 + e;
      const int32_t slot = col < ke ? idx_row[col] : -1;
      const bool valid = slot_valid(a, slot);
      uint32_t w[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      uint4 rope = make_uint4(0, 0, 0, 0);
      if (valid) {
        const uint8_t* entry = a.cache + entry_offset(a, slot);
        const uint4 q = cuda_io::load16<kVecCache>(entry + DsMlaEntry::kNopeOffset + 16 * lane);
        const float scale = cuda_io::load_f32<kVecCache>(entry + DsMlaEntry::kScaleOffset + 4 * (lane / 8));
        const uint4 lo = dequant8(q.x, q.y, scale), hi = dequant8(q.z, q.w, scale);
        w[0] = lo.x; w[1] = lo.y; w[2] = lo.z; w[3] = lo.w;
        w[4] = hi.x; w[5] = hi.y; w[6] = hi.z; w[7] = hi.w;
        if (lane < 8) rope = cuda_io::load16<kVecCache>(entry + DsMlaEntry::kRopeOffset + 16 * lane);
      }
      uint32_t* row = reinterpret_cast<uint32_t*>(&sm.k[e][0]);  // 4-byte aligned (pitch 1156 bytes)
#pragma unroll
      for (int i = 0; i < 8; ++i) row[8 * lane + i] = w[i];
      if (lane < 8) {
        row[kDc / 2 + 4 * lane + 0] = rope.x;
        row[kDc / 2 + 4 * lane + 1] = rope.y;
        row[kDc / 2 + 4 * lane + 2] = rope.z;
        row[kDc / 2 + 4 * lane + 3] = rope.w;
      }
      if (lane == 0) sm.valid[e] = valid ? 1 : 0;
    }
    __syncthreads();

    // Scores: column j = tid % 64 against heads 4 (tid / 64) .. + 3, the host's dot_f32 order.
    {
      const int j = tid % kTile;
      const uint32_t* krow = reinterpret_cast<const uint32_t*>(&sm.k[j][0]);
      for (int rr = 0; rr < 4; ++rr) {
        const int r = (tid / kTile) * 4 + rr;
        const uint32_t* qrow = reinterpret_cast<const uint32_t*>(&sm.q[r][0]);
        float part[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        for (int d2 = 0; d2 < kDl / 2; d2 += 4) {  // 8 elements per step
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const uint32_t kw = krow[d2 + i], qw = qrow[d2 + i];
            part[2 * i] = __fadd_rn(part[2 * i], __fmul_rn(attn_dev::bf16_lo(qw), attn_dev::bf16_lo(kw)));
            part[2 * i + 1] = __fadd_rn(part[2 * i + 1], __fmul_rn(attn_dev::bf16_hi(qw), attn_dev::bf16_hi(kw)));
          }
        }
        const float dot = __fadd_rn(__fadd_rn(__fadd_rn(part[0], part[4]), __fadd_rn(part[2], part[6])),
                                    __fadd_rn(__fadd_rn(part[1], part[5]), __fadd_rn(part[3], part[7])));
        sm.score[r][j] = __fmul_rn(dot, a.scale);
      }
    }
    __syncthreads();

    // Softmax: warp w does rows 2w, 2w + 1; lanes take columns lane and lane + 32.
    for (int rr = 0; rr < 2; ++rr) {
      const int r = 2 * warp + rr;
      const auto [m, factor] = attn_dev::softmax_tile_row(sm.score[r], sm.prob[r], sm.m[r], sm.valid[lane] != 0,
                                                          sm.valid[lane + 32] != 0, lane);
      __syncwarp();
      if (lane == 0) {
        float l = sm.l[r];
        if (factor != 1.0f) l = __fmul_rn(l, factor);
        float tsum = 0.0f;
        for (int j = 0; j < kTile; ++j) {
          if (sm.valid[j]) tsum = __fadd_rn(tsum, sm.score[r][j]);
        }
        sm.l[r] = __fadd_rn(l, tsum);
        sm.m[r] = m;
        sm.factor[r] = factor;
      }
      __syncwarp();
    }
    __syncthreads();

    // acc[r][e] = acc * factor + sum_j p_j v_j[e], e = tid + 256 d.
#pragma unroll
    for (int r = 0; r < kSimpleHeads; ++r) {
      const float f = sm.factor[r];
      if (f != 1.0f) {
#pragma unroll
        for (int d = 0; d < kSimpleDimsPerThread; ++d) acc[r][d] = __fmul_rn(acc[r][d], f);
      }
    }
    for (int j = 0; j < kTile; ++j) {
      if (!sm.valid[j]) continue;
      float v[kSimpleDimsPerThread];
#pragma unroll
      for (int d = 0; d < kSimpleDimsPerThread; ++d) v[d] = bf16_to_f32(sm.k[j][tid + kSimpleThreads * d]);
#pragma unroll
      for (int r = 0; r < kSimpleHeads; ++r) {
        const float p = sm.prob[r][j];
#pragma unroll
        for (int d = 0; d < kSimpleDimsPerThread; ++d) acc[r][d] = __fadd_rn(acc[r][d], __fmul_rn(p, v[d]));
      }
    }
  }
  __syncthreads();

  // Outputs.
#pragma unroll
  for (int r = 0; r < kSimpleHeads; ++r) {
    const int h = h0 + r;
    if (h >= a.num_heads) break;
    const float l = sm.l[r];
    if (partial < 0) {
      bf16_t* out = a.out_lat + (t * a.num_heads + h) * kDc;
#pragma unroll
      for (int d = 0; d < kSimpleDimsPerThread; ++d) {
        out[tid + kSimpleThreads * d] = f32_to_bf16_rne(normalize(acc[r][d], l));
      }
    } else {
      const int64_t prow = static_cast<int64_t>(partial) * a.num_heads + h;  // trusted
#pragma unroll
      for (int d = 0; d < kSimpleDimsPerThread; ++d) {
        a.partial_out[prow * kDc + tid + kSimpleThreads * d] = normalize(acc[r][d], l);
      }
    }
  }
  if (tid < kSimpleHeads && h0 + tid < a.num_heads) {
    const int h = h0 + tid;
    const float v = row_lse(sm.m[tid], sm.l[tid]);
    if (partial < 0) {
      a.lse[t * a.num_heads + h] = v;
    } else {
      a.partial_lse[static_cast<int64_t>(partial) * a.num_heads + h] = v;
    }
  }
}

}  // namespace

namespace sparse_simple {

int smem_bytes() { return static_cast<int>(sizeof(SimpleSmem)); }

Status launch(const SparseArgs& a, dim3 grid, bool cache_vec, cudaStream_t stream) {
  return launch_with_smem(cache_vec ? sparse_mqa_simple_kernel<true> : sparse_mqa_simple_kernel<false>,
                          "sparse_mqa_simple_kernel", grid, kSimpleThreads, smem_bytes(), stream, a);
}

}  // namespace sparse_simple
}  // namespace mla
