// Dense MHA over a varlen batch (docs/semantics.md §4.2), `simple` implementation: the
// correctness baseline, fp32 CUDA-core code in the host backend's order
// (kernels/host/host_dense_mha.cpp). Runs where `tc` and `wgmma` cannot (any alignment).
//
// One CTA (256 threads) per (request, 16 queries, head). Keys in tiles of 64 from key 0 (the host's
// softmax step); a query sees keys j < visible(i) (all nk unmasked, clamp(i + nk - nq + 1, 0, nk)
// causal: bottom-right), masked scores are -inf, and the CTA stops after the last tile its last
// query sees. Per tile: scores as 8-lane dot products combined pairwise, times scale; tile max,
// m_new, factor = exp(m - m_new), the tile's sum of the fp32 p in key order, P = bf16_rne(p);
// acc = acc * factor + sum_j p_j v_j key by key. Every product and sum is a single IEEE operation
// (no FMA contraction). out = bf16(acc / l), lse = m + ln l; no visible key: 0 and -inf.
// cu_seqlens come from device memory: every range is clamped to [0, total_q) / [0, total_k)
// (request_range), so no value there can make the kernel read or write out of bounds.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/cuda/common/attention_device.cuh"
#include "kernels/cuda/common/kernel_launch.cuh"
#include "kernels/cuda/dense_mha/dense_mha_device.cuh"
#include "kernels/cuda/dense_mha/dense_mha_impls.h"

namespace mla {
namespace {

using namespace dense_dev;  // NOLINT: this file's kernel is the header's user

constexpr int kSimpleThreads = 256;
constexpr int kSimpleKPitch = kDqk + 2;                        // 194 bf16: rows 1 bank apart
constexpr int kSimpleRowsPerThread = kSimpleRows * kDv / kSimpleThreads;  // 8 (dim tid % 128)

struct SimpleSmem {
  bf16_t q[kSimpleRows][kDqk];
  bf16_t k[kKeyTile][kSimpleKPitch];
  bf16_t v[kKeyTile][kDv];
  float score[kSimpleRows][kKeyTile];
  float prob[kSimpleRows][kKeyTile];
  float factor[kSimpleRows];
  float m[kSimpleRows];
  float l[kSimpleRows];
  int64_t vis[kSimpleRows];  // visible keys of each row (0 for rows past the request)
};

__global__ void __launch_bounds__(kSimpleThreads) dense_mha_simple_kernel(const DenseArgs a) {
  extern __shared__ __align__(16) uint8_t smem_raw[];
  SimpleSmem& sm = *reinterpret_cast<SimpleSmem*>(smem_raw);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int r = blockIdx.x / a.q_tiles, tile = blockIdx.x % a.q_tiles, h = blockIdx.y;
  const Range rq = request_range(a.cu_q, r, a.total_q);
  const Range rk = request_range(a.cu_k, r, a.total_k);
  const int64_t i0 = static_cast<int64_t>(tile) * kSimpleRows;
  if (i0 >= rq.count) return;
  const int rows = rq.count - i0 < kSimpleRows ? static_cast<int>(rq.count - i0) : kSimpleRows;
  const int64_t kmax = visible_keys(a.causal, i0 + rows - 1, rq.count, rk.count);

  for (int i = tid; i < kSimpleRows * kDqk; i += kSimpleThreads) {
    const int rr = i / kDqk, d = i % kDqk;
    bf16_t v = 0;
    if (rr < rows) {
      const int64_t tq = rq.begin + i0 + rr;
      v = d < kDn ? a.q_nope[tq * a.q_nope_stride + static_cast<int64_t>(h) * kDn + d]
                  : a.q_pe[tq * a.q_pe_stride + static_cast<int64_t>(h) * kDr + (d - kDn)];
    }
    sm.q[rr][d] = v;
  }
  if (tid < kSimpleRows) {
    sm.m[tid] = -INFINITY;
    sm.l[tid] = 0.0f;
    sm.vis[tid] = tid < rows ? visible_keys(a.causal, i0 + tid, rq.count, rk.count) : 0;
  }
  float acc[kSimpleRowsPerThread];
#pragma unroll
  for (int i = 0; i < kSimpleRowsPerThread; ++i) acc[i] = 0.0f;
  const int dim = tid % kDv, row0 = (tid / kDv) * kSimpleRowsPerThread;

  for (int64_t c0 = 0; c0 < kmax; c0 += kKeyTile) {
    __syncthreads();  // previous tile consumed; Q and stats initialised
    for (int i = tid; i < kKeyTile * (kDqk + kDv); i += kSimpleThreads) {
      const int j = i / (kDqk + kDv), d = i % (kDqk + kDv);
      const int64_t key = c0 + j;
      bf16_t v = 0;
      if (key < rk.count) {
        const int64_t tk = rk.begin + key;
        if (d < kDn) {
          v = a.k_nope[tk * a.k_nope_stride + static_cast<int64_t>(h) * kDn + d];
        } else if (d < kDqk) {
          v = a.k_pe[tk * a.k_pe_stride + (d - kDn)];
        } else {
          v = a.v[tk * a.v_stride + static_cast<int64_t>(h) * kDv + (d - kDqk)];
        }
      }
      if (d < kDqk) {
        sm.k[j][d] = v;
      } else {
        sm.v[j][d - kDqk] = v;
      }
    }
    __syncthreads();

    // Scores: key j = tid % 64 against rows 4 (tid / 64) .. + 3, the host's dot_f32 order.
    {
      const int j = tid % kKeyTile;
      const uint32_t* krow = reinterpret_cast<const uint32_t*>(&sm.k[j][0]);
      for (int rr = 0; rr < 4; ++rr) {
        const int row = (tid / kKeyTile) * 4 + rr;
        const uint32_t* qrow = reinterpret_cast<const uint32_t*>(&sm.q[row][0]);
        float part[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        for (int d2 = 0; d2 < kDqk / 2; d2 += 4) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const uint32_t kw = krow[d2 + i], qw = qrow[d2 + i];
            part[2 * i] = __fadd_rn(part[2 * i], __fmul_rn(attn_dev::bf16_lo(qw), attn_dev::bf16_lo(kw)));
            part[2 * i + 1] = __fadd_rn(part[2 * i + 1], __fmul_rn(attn_dev::bf16_hi(qw), attn_dev::bf16_hi(kw)));
          }
        }
        const float dot = __fadd_rn(__fadd_rn(__fadd_rn(part[0], part[4]), __fadd_rn(part[2], part[6])),
                                    __fadd_rn(__fadd_rn(part[1], part[5]), __fadd_rn(part[3], part[7])));
        sm.score[row][j] = __fmul_rn(dot, a.scale);
      }
    }
    __syncthreads();

    // Softmax: warp w does rows 2 w, 2 w + 1; lanes take keys lane and lane + 32.
    for (int rr = 0; rr < 2; ++rr) {
      const int row = 2 * warp + rr;
      const int64_t vis = sm.vis[row];
      const auto [m, factor] =
          attn_dev::softmax_tile_row(sm.score[row], sm.prob[row], sm.m[row], c0 + lane < vis, c0 + lane + 32 < vis, lane);
      __syncwarp();
      if (lane == 0) {
        float l = sm.l[row];
        if (factor != 1.0f) l = __fmul_rn(l, factor);
        float tsum = 0.0f;
        for (int j = 0; j < kKeyTile && c0 + j < vis; ++j) tsum = __fadd_rn(tsum, sm.score[row][j]);
        sm.l[row] = __fadd_rn(l, tsum);
        sm.m[row] = m;
        sm.factor[row] = factor;
      }
      __syncwarp();
    }
    __syncthreads();

#pragma unroll
    for (int i = 0; i < kSimpleRowsPerThread; ++i) {
      const float f = sm.factor[row0 + i];
      if (f != 1.0f) acc[i] = __fmul_rn(acc[i], f);
    }
#pragma unroll
    for (int i = 0; i < kSimpleRowsPerThread; ++i) {
      const int64_t vis = sm.vis[row0 + i];
      for (int j = 0; j < kKeyTile && c0 + j < vis; ++j) {
        acc[i] = __fadd_rn(acc[i], __fmul_rn(sm.prob[row0 + i][j], bf16_to_f32(sm.v[j][dim])));
      }
    }
  }
  __syncthreads();

  const int64_t H = a.num_heads;
#pragma unroll
  for (int i = 0; i < kSimpleRowsPerThread; ++i) {
    const int row = row0 + i;
    if (row >= rows) break;
    const int64_t tq = rq.begin + i0 + row;
    a.out[(tq * H + h) * kDv + dim] = f32_to_bf16_rne(normalize(acc[i], sm.l[row]));
  }
  if (tid < rows) {
    const int64_t tq = rq.begin + i0 + tid;
    a.lse[tq * H + h] = row_lse(sm.m[tid], sm.l[tid]);
  }
}

}  // namespace

namespace dense_simple {

int smem_bytes() { return static_cast<int>(sizeof(SimpleSmem)); }

Status launch(const DenseArgs& args, dim3 grid, cudaStream_t stream) {
  return launch_with_smem(dense_mha_simple_kernel, "dense_mha_simple_kernel", grid, kSimpleThreads, smem_bytes(), stream,
                          args);
}

}  // namespace dense_simple
}  // namespace mla
