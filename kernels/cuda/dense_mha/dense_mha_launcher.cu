// Dense MHA over a varlen batch (SPEC 4.2): the algorithm of the host's dense_mha
// (kernels/host/host_dense_mha.cpp) on the GPU, in three implementations behind launch_dense_mha
// (attention_launchers.h says how one is chosen): `simple` and `tc` here, `wgmma` (Hopper only) in
// dense_mha_wgmma_kernel.cu.
//
// Request r owns queries [cu_q[r], cu_q[r+1]) and keys [cu_k[r], cu_k[r+1]); query i (0-based in
// the request) sees keys j < visible(i) = nk unmasked, clamp(i + nk - nq + 1, 0, nk) causal
// (bottom-right). q = [q_nope (128), q_pe (64)] of head h, k = [k_nope (128) of head h, k_pe (64,
// shared by heads)], v (128) of head h. Keys in tiles of 64 from key 0 (`simple`, `tc`: the host
// backend's step; `wgmma`: 128); masked scores are -inf; per tile m / l / acc are updated as in
// the host (online softmax in fp32 with exp, tile sums of the fp32 p, P rounded to bf16 for P V);
// out = bf16(acc / l), lse = m + ln l; no visible key: 0, -inf.
// The grid is sized from the host copies of cu_seqlens; the kernels read the device copies and
// clamp every range to [0, total_q) / [0, total_k), so no value there can make them read or write
// out of bounds.
//
// `simple`: one CTA (256 threads) per (request, 16 queries, head); fp32 CUDA-core code in the
// host's order (8-lane dot products, tile sum in key order, acc += p v key by key, single IEEE
// operations). Any alignment.
//
// `tc` (what runs where `wgmma` cannot): one CTA (128 threads, 4 warps) per (request, 64 queries,
// head); warp w owns query rows 16 w .. 16 w + 15 of the tile (FlashAttention-2 style, everything
// per row stays in one warp). Shared memory (dynamic, 106,496 bytes, two CTAs per SM): sQ [64][192]
// bf16, sK[2] [64][192] bf16, sV[2] [64][128] bf16, rows swizzled (attention_device.cuh), K/V double-buffered with cp.async
// (zero-filled past the request's keys). Q fragments stay in registers; S = Q K^T (16 x 64 per warp)
// with mma.sync m16n8k16; the softmax runs on the S fragments (4 lanes share a row: shuffles);
// P is repacked from the S accumulators into A fragments; O (16 x 128 per warp, 64 fp32 registers
// per thread) += P V with V through ldmatrix.trans. Causal CTAs stop after the last key tile their
// last query sees.
//
// `wgmma` (default; sm_90a builds, compute capability 9.0 devices): FlashAttention-3-style, one
// work item per (request, 128 queries, head), run by CTAs of 384 threads (a TMA producer warpgroup
// and two wgmma consumer warpgroups) on a persistent grid that takes items dynamically
// (MLA_DENSE_WGMMA_SCHEDULE = persistent (default) | grid: one CTA per item); key tiles of 128
// loaded and multiplied at once, one online-softmax step per tile (dense_wgmma::kSoftmaxStepKeys:
// the host's dense_mha with softmax_keys = 128); see dense_mha_wgmma_kernel.cu. Built when the
// configured CUDA architectures include 90 (MLA_HAVE_WGMMA); otherwise, or on other devices, it
// falls back to `tc`.
// MLA_DENSE_WGMMA_DEBUG = scores | values makes it write one isolated product instead of the
// attention (dense_mha_wgmma.h; an unsupported error when the wgmma kernel cannot run).
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/common/bf16.h"
#include "kernels/cuda/dense_mha/dense_item_order.h"
#include "kernels/cuda/common/attention_device.cuh"
#include "kernels/cuda/attention_launchers.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/dense_mha/dense_mha_args.h"
#include "kernels/cuda/dense_mha/dense_mha_wgmma.h"

#if !defined(MLA_HAVE_WGMMA)
#define MLA_HAVE_WGMMA 0
#endif

namespace mla {
namespace {

using attn_dev::kFullMask;
using attn_dev::normalize;
using attn_dev::row_lse;

constexpr int kDn = kNopeHeadDim;               // 128
constexpr int kDq = kQkHeadDim;                 // 192
constexpr int kDr = kQkHeadDim - kNopeHeadDim;  // 64
constexpr int kDv = kVHeadDim;                  // 128
constexpr int kKeyTile = 64;


struct Range {
  int64_t begin, count;
};

// [cu[r], cu[r+1]) clamped to [0, total].
__device__ __forceinline__ Range request_range(const int32_t* cu, int r, int64_t total) {
  int64_t b = cu[r], e = cu[r + 1];
  b = b < 0 ? 0 : (b > total ? total : b);
  e = e < b ? b : (e > total ? total : e);
  return Range{b, e - b};
}

// Keys query i sees.
__device__ __forceinline__ int64_t visible_keys(bool causal, int64_t i, int64_t nq, int64_t nk) {
  if (!causal) return nk;
  const int64_t v = i + nk - nq + 1;
  return v < 0 ? 0 : (v > nk ? nk : v);
}


// =================================================================================================
// simple
// =================================================================================================

constexpr int kSimpleThreads = 256;
constexpr int kSimpleRows = 16;                               // queries per CTA
constexpr int kSimpleKPitch = kDq + 2;                        // 194 bf16: rows 1 bank apart
constexpr int kSimpleRowsPerThread = kSimpleRows * kDv / kSimpleThreads;  // 8 (dim tid % 128)

struct SimpleSmem {
  bf16_t q[kSimpleRows][kDq];
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

  for (int i = tid; i < kSimpleRows * kDq; i += kSimpleThreads) {
    const int rr = i / kDq, d = i % kDq;
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
    for (int i = tid; i < kKeyTile * (kDq + kDv); i += kSimpleThreads) {
      const int j = i / (kDq + kDv), d = i % (kDq + kDv);
      const int64_t key = c0 + j;
      bf16_t v = 0;
      if (key < rk.count) {
        const int64_t tk = rk.begin + key;
        if (d < kDn) {
          v = a.k_nope[tk * a.k_nope_stride + static_cast<int64_t>(h) * kDn + d];
        } else if (d < kDq) {
          v = a.k_pe[tk * a.k_pe_stride + (d - kDn)];
        } else {
          v = a.v[tk * a.v_stride + static_cast<int64_t>(h) * kDv + (d - kDq)];
        }
      }
      if (d < kDq) {
        sm.k[j][d] = v;
      } else {
        sm.v[j][d - kDq] = v;
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
        for (int d2 = 0; d2 < kDq / 2; d2 += 4) {
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
      const bool v0 = c0 + lane < vis, v1 = c0 + lane + 32 < vis;
      const float s0 = v0 ? sm.score[row][lane] : -INFINITY;
      const float s1 = v1 ? sm.score[row][lane + 32] : -INFINITY;
      float tmax = fmaxf(fmaxf(-INFINITY, s0), s1);
#pragma unroll
      for (int o = 16; o > 0; o /= 2) tmax = fmaxf(tmax, __shfl_xor_sync(kFullMask, tmax, o));
      float m = sm.m[row];
      const float factor = attn_dev::raise_row_max(m, tmax);
      const float ref = attn_dev::exp_ref(m);
      const float p0 = v0 ? expf(s0 - ref) : 0.0f;
      const float p1 = v1 ? expf(s1 - ref) : 0.0f;
      sm.score[row][lane] = p0;
      sm.score[row][lane + 32] = p1;
      sm.prob[row][lane] = bf16_to_f32(static_cast<bf16_t>(attn_dev::pack_bf16x2(p0, 0.0f) & 0xFFFFu));
      sm.prob[row][lane + 32] = bf16_to_f32(static_cast<bf16_t>(attn_dev::pack_bf16x2(p1, 0.0f) & 0xFFFFu));
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

// =================================================================================================
// tc
// =================================================================================================

constexpr int kTcThreads = 128;
constexpr int kTcRows = 64;                  // queries per CTA
constexpr int kQkRowBytes = kDq * 2;         // 384: 24 chunks
constexpr int kQkChunks = kQkRowBytes / 16;
constexpr int kVRowBytes = kDv * 2;          // 256: 16 chunks
constexpr int kVChunks = kVRowBytes / 16;
constexpr int kSmemQ = 0;
constexpr int kSmemK = kSmemQ + kTcRows * kQkRowBytes;        // two buffers
constexpr int kSmemV = kSmemK + 2 * kKeyTile * kQkRowBytes;   // two buffers
constexpr int kSmemTcBytes = kSmemV + 2 * kKeyTile * kVRowBytes;
constexpr int kKBufBytes = kKeyTile * kQkRowBytes;
constexpr int kVBufBytes = kKeyTile * kVRowBytes;
static_assert(kSmemTcBytes == 106496, "2 CTAs per SM");
static_assert(kDq % 16 == 0 && kDv == 8 * 16, "12 k16 steps for S; 16 n8 tiles of O per warp");

__global__ void __launch_bounds__(kTcThreads) dense_mha_tc_kernel(const DenseArgs a) {
  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t sbase = attn_dev::smem_u32(smem);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, tq = lane % 4, x7 = lane & 7;
  // Within a request, later query tiles (more keys when causal) are scheduled first.
  const int r = blockIdx.x / a.q_tiles, tile = a.q_tiles - 1 - static_cast<int>(blockIdx.x % a.q_tiles);
  const int h = blockIdx.y;
  const Range rq = request_range(a.cu_q, r, a.total_q);
  const Range rk = request_range(a.cu_k, r, a.total_k);
  const int64_t nq = rq.count, nk = rk.count;
  const int64_t i0 = static_cast<int64_t>(tile) * kTcRows;
  if (i0 >= nq) return;
  const int rows = nq - i0 < kTcRows ? static_cast<int>(nq - i0) : kTcRows;
  const int64_t kmax = visible_keys(a.causal, i0 + rows - 1, nq, nk);
  const int n_kt = static_cast<int>((kmax + kKeyTile - 1) / kKeyTile);
  const int64_t H = a.num_heads;

  // This thread's two rows (tile-local): ra = 16 warp + g and ra + 8.
  const int ra = 16 * warp + g;
  const int64_t vis[2] = {visible_keys(a.causal, i0 + ra, nq, nk), visible_keys(a.causal, i0 + ra + 8, nq, nk)};

  if (n_kt == 0) {  // no row of this tile sees a key
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = ra + 8 * half;
      if (row >= rows) continue;
      const int64_t t = rq.begin + i0 + row;
      bf16_t* out = a.out + (t * H + h) * kDv + 2 * tq;
#pragma unroll
      for (int nt = 0; nt < kDv / 8; ++nt) *reinterpret_cast<uint32_t*>(out + 8 * nt) = 0u;
      if (tq == 0) a.lse[t * H + h] = -INFINITY;
    }
    return;
  }

  // Q tile (rows past the request zero-filled).
  for (int i = tid; i < kTcRows * kQkChunks; i += kTcThreads) {
    const int row = i / kQkChunks, c = i % kQkChunks;
    const uint32_t dst = sbase + kSmemQ + attn_dev::swizzled(row, c, kQkRowBytes);
    if (row < rows) {
      const int64_t t = rq.begin + i0 + row;
      const bf16_t* src = c < kDn / 8 ? a.q_nope + t * a.q_nope_stride + h * kDn + 8 * c
                                      : a.q_pe + t * a.q_pe_stride + h * kDr + 8 * (c - kDn / 8);
      attn_dev::cp_async16(dst, src, 16);
    } else {
      attn_dev::cp_async16(dst, a.q_nope, 0);
    }
  }
  // K / V tile kt into buffer buf (keys past the request zero-filled, not read).
  auto issue_kv = [&](int kt, int buf) {
    constexpr int kChunksPerKey = kQkChunks + kVChunks;  // 40
    for (int i = tid; i < kKeyTile * kChunksPerKey; i += kTcThreads) {
      const int j = i / kChunksPerKey, c = i % kChunksPerKey;
      const int64_t key = static_cast<int64_t>(kt) * kKeyTile + j;
      const bool ok = key < nk;
      const int64_t tk = rk.begin + key;
      uint32_t dst;
      const bf16_t* src = a.k_nope;
      if (c < kQkChunks) {
        dst = sbase + kSmemK + buf * kKBufBytes + attn_dev::swizzled(j, c, kQkRowBytes);
        if (ok) {
          src = c < kDn / 8 ? a.k_nope + tk * a.k_nope_stride + h * kDn + 8 * c
                            : a.k_pe + tk * a.k_pe_stride + 8 * (c - kDn / 8);
        }
      } else {
        dst = sbase + kSmemV + buf * kVBufBytes + attn_dev::swizzled(j, c - kQkChunks, kVRowBytes);
        if (ok) src = a.v + tk * a.v_stride + h * kDv + 8 * (c - kQkChunks);
      }
      attn_dev::cp_async16(dst, src, ok ? 16 : 0);
    }
  };
  issue_kv(0, 0);
  attn_dev::cp_async_commit();

  float row_m[2] = {-INFINITY, -INFINITY}, row_l[2] = {0.0f, 0.0f};
  float oacc[kDv / 8][4];
#pragma unroll
  for (int nt = 0; nt < kDv / 8; ++nt) {
#pragma unroll
    for (int c = 0; c < 4; ++c) oacc[nt][c] = 0.0f;
  }
  uint32_t qf[kDq / 16][4];

  const int a_row = 16 * warp + (lane & 7) + 8 * ((lane >> 3) & 1);
  const int a_hi = lane >> 4;
  const int b_row = (lane & 7) + 8 * (lane >> 4);  // + 16 np
  const int b_hi = (lane >> 3) & 1;
  const int v_key = (lane & 7) + 8 * ((lane >> 3) & 1);  // + 16 kk
  const int v_hi = lane >> 4;

  for (int kt = 0; kt < n_kt; ++kt) {
    const int buf = kt & 1;
    if (kt + 1 < n_kt) {
      issue_kv(kt + 1, buf ^ 1);
      attn_dev::cp_async_commit();
      attn_dev::cp_async_wait<1>();
    } else {
      attn_dev::cp_async_wait<0>();
    }
    __syncthreads();  // tile kt (and Q) visible to every warp

    if (kt == 0) {
#pragma unroll
      for (int kk = 0; kk < kDq / 16; ++kk) {
        attn_dev::ldmatrix_x4(qf[kk], sbase + kSmemQ + a_row * kQkRowBytes + (((2 * kk + a_hi) ^ x7) << 4));
      }
    }

    // S (16 rows x 64 keys per warp).
    float s[kKeyTile / 8][4];
#pragma unroll
    for (int nt = 0; nt < kKeyTile / 8; ++nt) {
#pragma unroll
      for (int c = 0; c < 4; ++c) s[nt][c] = 0.0f;
    }
    const uint32_t k_base = sbase + kSmemK + buf * kKBufBytes;
#pragma unroll
    for (int kk = 0; kk < kDq / 16; ++kk) {
#pragma unroll
      for (int np = 0; np < kKeyTile / 16; ++np) {
        uint32_t b[4];
        attn_dev::ldmatrix_x4(b, k_base + (16 * np + b_row) * kQkRowBytes + (((2 * kk + b_hi) ^ x7) << 4));
        attn_dev::mma_bf16_16816(s[2 * np], qf[kk], b[0], b[1]);
        attn_dev::mma_bf16_16816(s[2 * np + 1], qf[kk], b[2], b[3]);
      }
    }

    // Softmax on the fragments: c < 2 is row ra, c >= 2 row ra + 8.
    float tmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < kKeyTile / 8; ++nt) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int64_t key = static_cast<int64_t>(kt) * kKeyTile + 8 * nt + 2 * tq + (c & 1);
        const float x = key < vis[c >> 1] ? s[nt][c] * a.scale : -INFINITY;
        s[nt][c] = x;
        tmax[c >> 1] = fmaxf(tmax[c >> 1], x);
      }
    }
    float factor[2], ref[2];
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      tmax[hh] = fmaxf(tmax[hh], __shfl_xor_sync(kFullMask, tmax[hh], 1));
      tmax[hh] = fmaxf(tmax[hh], __shfl_xor_sync(kFullMask, tmax[hh], 2));
      factor[hh] = attn_dev::raise_row_max(row_m[hh], tmax[hh]);
      row_l[hh] *= factor[hh];
      ref[hh] = attn_dev::exp_ref(row_m[hh]);
    }
    float tsum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int nt = 0; nt < kKeyTile / 8; ++nt) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const float p = expf(s[nt][c] - ref[c >> 1]);
        tsum[c >> 1] += p;
        s[nt][c] = p;
      }
    }
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      tsum[hh] += __shfl_xor_sync(kFullMask, tsum[hh], 1);
      tsum[hh] += __shfl_xor_sync(kFullMask, tsum[hh], 2);
      row_l[hh] += tsum[hh];
    }
    if (factor[0] != 1.0f || factor[1] != 1.0f) {
#pragma unroll
      for (int nt = 0; nt < kDv / 8; ++nt) {
        oacc[nt][0] *= factor[0];
        oacc[nt][1] *= factor[0];
        oacc[nt][2] *= factor[1];
        oacc[nt][3] *= factor[1];
      }
    }

    // O += P V: P from the S fragments (keys 16 kk .. 16 kk + 15 are n tiles 2 kk, 2 kk + 1).
    const uint32_t v_base = sbase + kSmemV + buf * kVBufBytes;
#pragma unroll
    for (int kk = 0; kk < kKeyTile / 16; ++kk) {
      const uint32_t pa[4] = {attn_dev::pack_bf16x2(s[2 * kk][0], s[2 * kk][1]),
                              attn_dev::pack_bf16x2(s[2 * kk][2], s[2 * kk][3]),
                              attn_dev::pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              attn_dev::pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int np = 0; np < kDv / 16; ++np) {
        uint32_t b[4];
        attn_dev::ldmatrix_x4_trans(b, v_base + (16 * kk + v_key) * kVRowBytes + (((2 * np + v_hi) ^ x7) << 4));
        attn_dev::mma_bf16_16816(oacc[2 * np], pa, b[0], b[1]);
        attn_dev::mma_bf16_16816(oacc[2 * np + 1], pa, b[2], b[3]);
      }
    }
    __syncthreads();  // buffer `buf` is refilled by the next iteration's issue
  }

#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = ra + 8 * half;
    if (row >= rows) continue;
    const int64_t t = rq.begin + i0 + row;
    bf16_t* out = a.out + (t * H + h) * kDv + 2 * tq;
#pragma unroll
    for (int nt = 0; nt < kDv / 8; ++nt) {
      *reinterpret_cast<uint32_t*>(out + 8 * nt) = attn_dev::pack_bf16x2(normalize(oacc[nt][2 * half], row_l[half]),
                                                                         normalize(oacc[nt][2 * half + 1], row_l[half]));
    }
    if (tq == 0) a.lse[t * H + h] = row_lse(row_m[half], row_l[half]);
  }
}

// =================================================================================================
// launcher
// =================================================================================================

enum class DenseImpl { kWgmma, kTc, kSimple };

Status requested_impl(DenseImpl* impl) {
  const char* env = std::getenv("MLA_DENSE_MHA_IMPL");
  if (env == nullptr || env[0] == '\0' || std::strcmp(env, "wgmma") == 0) {
    *impl = DenseImpl::kWgmma;
  } else if (std::strcmp(env, "tc") == 0) {
    *impl = DenseImpl::kTc;
  } else if (std::strcmp(env, "simple") == 0) {
    *impl = DenseImpl::kSimple;
  } else {
    return Status::error(std::string("MLA_DENSE_MHA_IMPL is '") + env + "' (expected 'wgmma', 'tc' or 'simple')");
  }
  return Status();
}

Status requested_wgmma_debug(dense_wgmma::Debug* debug) {
  const char* env = std::getenv("MLA_DENSE_WGMMA_DEBUG");
  if (env == nullptr || env[0] == '\0') {
    *debug = dense_wgmma::Debug::kNone;
  } else if (std::strcmp(env, "scores") == 0) {
    *debug = dense_wgmma::Debug::kScores;
  } else if (std::strcmp(env, "values") == 0) {
    *debug = dense_wgmma::Debug::kValues;
  } else {
    return Status::error(std::string("MLA_DENSE_WGMMA_DEBUG is '") + env + "' (expected 'scores' or 'values')");
  }
  return Status();
}

Status requested_wgmma_schedule(dense_wgmma::Schedule* schedule) {
  const char* env = std::getenv("MLA_DENSE_WGMMA_SCHEDULE");
  if (env == nullptr || env[0] == '\0' || std::strcmp(env, "persistent") == 0) {
    *schedule = dense_wgmma::Schedule::kPersistent;
  } else if (std::strcmp(env, "grid") == 0) {
    *schedule = dense_wgmma::Schedule::kGrid;
  } else {
    return Status::error(std::string("MLA_DENSE_WGMMA_SCHEDULE is '") + env + "' (expected 'persistent' or 'grid')");
  }
  return Status();
}

bool aligned_to(const void* p, uintptr_t n) { return reinterpret_cast<uintptr_t>(p) % n == 0; }

// What runs for `impl` (the request) on `device` (`optin` bytes of shared memory per block) with
// inputs that are (not) `aligned` for the cp.async kernels and an output that is (not)
// `out_aligned16` for wgmma's 16-byte stores: wgmma falls back to tc, tc to simple. *no_wgmma says
// why wgmma does not run (nullptr when it does).
DenseImpl choose_impl(DenseImpl impl, bool aligned, bool out_aligned16, int device, int optin,
                      const char** no_wgmma) {
  *no_wgmma = nullptr;
  if (impl != DenseImpl::kWgmma) {
    *no_wgmma = "MLA_DENSE_MHA_IMPL selects another implementation";
  } else if (!aligned) {
    *no_wgmma = "an input is not 16-byte aligned or a token stride not a multiple of 8";
  } else if (!out_aligned16) {
    *no_wgmma = "out is not 16-byte aligned";
  } else {
#if MLA_HAVE_WGMMA
    if (optin < dense_wgmma::smem_bytes()) {
      *no_wgmma = "the device's shared memory per block is too small";
    } else if (!dense_wgmma::runs_on(device)) {
      *no_wgmma = "the device is not compute capability 9.0, or the sm_90a kernel does not load there or was "
                  "not given the 168 registers per thread its setmaxnreg budget assumes";
    }
#else
    (void)device;
    *no_wgmma = "not built (the configured CUDA architectures do not include 90)";
#endif
  }
  if (*no_wgmma == nullptr) return DenseImpl::kWgmma;
  return impl != DenseImpl::kSimple && aligned && optin >= kSmemTcBytes ? DenseImpl::kTc : DenseImpl::kSimple;
}

// tc: 16-byte cp.async from every input, wgmma: TMA tensor maps over them (16-byte aligned
// pointers, token strides multiples of 16 bytes); tc: 4-byte output stores, wgmma: 16-byte ones.
bool inputs_aligned(const DenseMhaParams& p) {
  return aligned_to(p.q_nope, 16) && aligned_to(p.q_pe, 16) && aligned_to(p.k_nope, 16) && aligned_to(p.k_pe, 16) &&
         aligned_to(p.v, 16) && p.q_nope_stride % 8 == 0 && p.q_pe_stride % 8 == 0 && p.k_nope_stride % 8 == 0 &&
         p.k_pe_stride % 8 == 0 && p.v_stride % 8 == 0 && aligned_to(p.out, 4);
}

const char* impl_name(DenseImpl impl) {
  return impl == DenseImpl::kWgmma ? "wgmma" : (impl == DenseImpl::kTc ? "tc" : "simple");
}

// The name of what launch_dense_mha runs on `device` for inputs that are (not) aligned.
Status chosen_name(bool aligned, bool out_aligned16, int device, std::string* name) {
  DenseImpl impl = DenseImpl::kWgmma;
  MLA_RETURN_IF_ERROR(requested_impl(&impl));
  int optin = 0;
  MLA_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  const char* no_wgmma = nullptr;
  *name = impl_name(choose_impl(impl, aligned, out_aligned16, device, optin, &no_wgmma));
  return Status();
}

}  // namespace

Status launch_dense_mha(const DenseMhaParams& p, cudaStream_t stream) {
  MLA_RETURN_IF_ERROR(p.validate());
  if (p.total_q == 0 || p.num_reqs == 0) return Status();
  int64_t max_q = 0;
  for (int32_t r = 0; r < p.num_reqs; ++r) {
    max_q = std::max<int64_t>(max_q, static_cast<int64_t>(p.cu_seqlens_q_host[r + 1]) - p.cu_seqlens_q_host[r]);
  }
  if (max_q == 0) return Status();
  if (p.num_heads > 65535) {
    return Status::error("launch_dense_mha: num_heads " + std::to_string(p.num_heads) + " exceeds the grid's y limit");
  }

  DenseImpl impl = DenseImpl::kWgmma;
  MLA_RETURN_IF_ERROR(requested_impl(&impl));
  dense_wgmma::Debug debug = dense_wgmma::Debug::kNone;
  MLA_RETURN_IF_ERROR(requested_wgmma_debug(&debug));
  dense_wgmma::Schedule schedule = dense_wgmma::Schedule::kPersistent;
  MLA_RETURN_IF_ERROR(requested_wgmma_schedule(&schedule));
  int device = 0, optin = 0;
  MLA_CUDA_CHECK(cudaGetDevice(&device));
  MLA_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));

  DenseArgs args{};
  args.q_nope = p.q_nope;
  args.q_nope_stride = p.q_nope_stride;
  args.q_pe = p.q_pe;
  args.q_pe_stride = p.q_pe_stride;
  args.k_nope = p.k_nope;
  args.k_nope_stride = p.k_nope_stride;
  args.k_pe = p.k_pe;
  args.k_pe_stride = p.k_pe_stride;
  args.v = p.v;
  args.v_stride = p.v_stride;
  args.cu_q = p.cu_seqlens_q;
  args.cu_k = p.cu_seqlens_k;
  args.num_heads = p.num_heads;
  args.total_q = p.total_q;
  args.total_k = p.total_k;
  args.causal = p.causal;
  args.scale = p.scale;
  args.out = p.out;
  args.lse = p.lse;

  // wgmma falls back to tc, tc to simple (inputs_aligned).
  const char* no_wgmma = nullptr;
  const DenseImpl chosen = choose_impl(impl, inputs_aligned(p), aligned_to(p.out, 16), device, optin, &no_wgmma);
  const bool wgmma_ok = chosen == DenseImpl::kWgmma;
  if (debug != dense_wgmma::Debug::kNone && !wgmma_ok) {
    return Status::unsupported(std::string("MLA_DENSE_WGMMA_DEBUG needs the wgmma kernel, which does not run: ") +
                               no_wgmma);
  }
  const bool use_tc = chosen == DenseImpl::kTc;
  const int rows_per_cta = wgmma_ok ? dense_wgmma::kRowsPerCta : (use_tc ? kTcRows : kSimpleRows);
  const int64_t q_tiles = (max_q + rows_per_cta - 1) / rows_per_cta;
  const int64_t blocks = q_tiles * p.num_reqs;
  if (blocks > INT_MAX) {
    return Status::error("launch_dense_mha: " + std::to_string(blocks) + " CTAs exceed the grid's x limit");
  }
  args.q_tiles = static_cast<int32_t>(q_tiles);
  args.num_reqs = p.num_reqs;
  args.tail_heads = 0;
  if (wgmma_ok) {
    // The order the persistent grid's CTAs (dense_wgmma::launch: min(items, SMs)) take the items
    // in. It changes which CTA runs an item, never the item's bits (fewer CTAs under the tests'
    // MLA_DENSE_WGMMA_MAX_CTAS keep this order).
    int sms = 0, l2 = 0;
    MLA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    MLA_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    const int64_t items = blocks * p.num_heads;
    args.tail_heads = dense_tail_heads(p.cu_seqlens_q_host, p.cu_seqlens_k_host, p.num_reqs, p.causal, p.num_heads,
                                       dense_wgmma::kRowsPerCta, dense_wgmma::kSoftmaxStepKeys,
                                       items < sms ? items : sms, l2);
  }
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(p.num_heads));

  if (wgmma_ok) {
#if MLA_HAVE_WGMMA
    MLA_RETURN_IF_ERROR(dense_wgmma::launch(args, debug, schedule, stream));
#endif
  } else if (use_tc) {
    MLA_CUDA_CHECK(
        cudaFuncSetAttribute(dense_mha_tc_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemTcBytes));
    dense_mha_tc_kernel<<<grid, kTcThreads, kSmemTcBytes, stream>>>(args);
    MLA_CUDA_CHECK_LAUNCH("dense_mha_tc_kernel");
  } else {
    const int smem = static_cast<int>(sizeof(SimpleSmem));
    if (optin < smem) {
      return Status::error("launch_dense_mha: the device allows " + std::to_string(optin) +
                           " bytes of shared memory per block; the simple kernel needs " + std::to_string(smem));
    }
    MLA_CUDA_CHECK(cudaFuncSetAttribute(dense_mha_simple_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    dense_mha_simple_kernel<<<grid, kSimpleThreads, smem, stream>>>(args);
    MLA_CUDA_CHECK_LAUNCH("dense_mha_simple_kernel");
  }
  return Status();
}

Status dense_mha_implementation(int device, std::string* name) {
  return chosen_name(/*aligned=*/true, /*out_aligned16=*/true, device, name);
}

Status dense_mha_implementation_for(const DenseMhaParams& p, int device, std::string* name) {
  return chosen_name(inputs_aligned(p), aligned_to(p.out, 16), device, name);
}

bool wgmma_kernels_built() { return MLA_HAVE_WGMMA != 0; }

}  // namespace mla
