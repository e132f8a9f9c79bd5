// Sparse MQA over the fp8_ds_mla cache (SPEC 4.1) and the combine of split tokens: the algorithm of
// the host backend (kernels/host/host_sparse_mqa.cpp) on the GPU, in three implementations behind
// launch_sparse_mqa (attention_launchers.h says how one is chosen).
//
// Common to all, per work item (token t = item.token, trusted; columns [k_begin, k_end) clipped to
// [0, topk)), per head h:
//   - columns in tiles of 64 starting at k_begin; a column is valid when its slot is in
//     [0, num_slots); an invalid column is never read from the cache (its shared-memory row is
//     zero-filled) and its score is -inf;
//   - keys are the dequantized entries (SPEC 1.2: bf16_rne(e4m3 * scale) with one fp32 multiply,
//     RoPE bits as stored — the gather's bits), values their first 512 elements;
//   - s = (q . k) * scale in fp32; per tile: tile max over valid s, m_new = max(m, tile max),
//     factor = exp(m - m_new) (1 when m is unchanged), l = l * factor + sum of the tile's fp32
//     p = exp(s - m); acc = acc * factor + sum bf16_rne(p) * v;
//   - item.partial < 0: out_lat = bf16(acc / l), lse = m + ln l; item.partial >= 0: fp32 partials at
//     row item.partial (trusted); no valid column: 0 and -inf.
// Combine (one warp per (planned token, head)): tokens with split_offsets[t+1] > split_offsets[t]
// merge their partials exactly as the host does (same operations in the same order).
//
// `simple` (the baseline): one CTA (256 threads) per (work item, 16 heads), the item's head groups
// adjacent in the 1-D grid. Everything in fp32 on CUDA cores, in the host's order: 8-lane dot
// products combined pairwise, the tile sum in column order, acc += p * v column by column with
// single IEEE operations (no FMA contraction). Matches the host up to expf/logf ulps. Any alignment.
//
// `wgmma` (default on Hopper; sparse_mqa_wgmma_kernel.cu): the `tc` kernel's tiles and steps with
// both products on warpgroup MMA.
//
// `tc` (where `wgmma` cannot run, or MLA_SPARSE_MQA_IMPL=tc): one CTA (256 threads, 8 warps) per
// (work item, 64 heads; heads >= num_heads are zero rows whose results are dropped), the item's
// head groups adjacent in the 1-D grid (L2 reuse). Shared memory (dynamic, 226,944 bytes, one CTA per SM):
//   sQ   [64 heads][576] bf16, 1152-byte rows, swizzled        73,728
//   sK   [64 keys][576] bf16 (dequantized), swizzled             73,728
//   sRaw [64][656] raw entries of the next tile (cp.async)       41,984
//   sS   two fp32 [64][72] partial score tiles; P [64][64] bf16 (swizzled) reuses the first 128
//        bytes of each 288-byte row of the second one             36,864
//   factor[64], row_l[64] fp32, valid[2][64] bytes
// Per tile: (B1) wait for the raw tile, barrier; dequantize sRaw -> sK; (B2) barrier; issue the
// next tile's cp.async into sRaw (it lands while this tile computes); S = Q K^T with mma.sync
// m16n8k16 — warp w computes rows 32 (w & 1), columns 32 ((w >> 1) & 1), half (w >> 2) of the
// 576-deep sum, and stores its fp32 partial; (B3) barrier; softmax: 4 threads per row, 16
// columns each, m and l kept in registers (identical in the 4); P (bf16) over the row's own scores
// (a warp-level sync: a row is read only by its 4 threads) and the row factors to shared memory;
// (B4) barrier; O += P V — warp w owns O[64 heads][64 w .. 64 w + 63] in 128 fp32 registers per
// thread, V read with ldmatrix.trans from sK.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/common/bf16.h"
#include "kernels/common/ds_mla_entry.h"
#include "kernels/cuda/common/attention_device.cuh"
#include "kernels/cuda/attention_launchers.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/device_io.cuh"
#include "kernels/cuda/common/fp8_codec.cuh"
#include "kernels/cuda/sparse_mqa/sparse_mqa_device.cuh"
#include "kernels/cuda/sparse_mqa/sparse_mqa_wgmma.h"

#if !defined(MLA_HAVE_WGMMA)
#define MLA_HAVE_WGMMA 0
#endif

namespace mla {
namespace {

using namespace sparse_dev;  // NOLINT: the kernels of this file are the header's users

// =================================================================================================
// simple
// =================================================================================================

constexpr int kSimpleThreads = 256;
constexpr int kSimpleHeads = 16;
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
      const bool v0 = sm.valid[lane] != 0, v1 = sm.valid[lane + 32] != 0;
      const float s0 = v0 ? sm.score[r][lane] : -INFINITY;
      const float s1 = v1 ? sm.score[r][lane + 32] : -INFINITY;
      float tmax = fmaxf(fmaxf(-INFINITY, s0), s1);
#pragma unroll
      for (int o = 16; o > 0; o /= 2) tmax = fmaxf(tmax, __shfl_xor_sync(kFullMask, tmax, o));
      float m = sm.m[r];
      const float factor = attn_dev::raise_row_max(m, tmax);
      const float ref = attn_dev::exp_ref(m);
      const float p0 = v0 ? expf(s0 - ref) : 0.0f;
      const float p1 = v1 ? expf(s1 - ref) : 0.0f;
      sm.score[r][lane] = p0;
      sm.score[r][lane + 32] = p1;
      sm.prob[r][lane] = bf16_to_f32(static_cast<bf16_t>(attn_dev::pack_bf16x2(p0, 0.0f) & 0xFFFFu));
      sm.prob[r][lane + 32] = bf16_to_f32(static_cast<bf16_t>(attn_dev::pack_bf16x2(p1, 0.0f) & 0xFFFFu));
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

// =================================================================================================
// tc
// =================================================================================================

constexpr int kTcThreads = 256;
constexpr int kTcHeads = 64;
constexpr int kRowBytes = kDl * 2;          // 1152: a swizzled bf16 row of sQ / sK (72 chunks)
constexpr int kSPitch = 72;                 // floats per row of a score partial
constexpr int kPRowBytes = kTile * 2;       // 128: a swizzled bf16 row of P (8 chunks)

constexpr int kSmemQ = 0;
constexpr int kSmemK = kSmemQ + kTcHeads * kRowBytes;
constexpr int kSmemRaw = kSmemK + kTile * kRowBytes;
constexpr int kSmemS = kSmemRaw + kTile * kEntryBytes;
constexpr int kSmemP = kSmemS + kTcHeads * kSPitch * 4;  // P [64][64] bf16 in the second partial's rows
constexpr int kPRowPitch = kSPitch * 4;                   // 288: 8 rows of an ldmatrix, swizzled, hit 8 bank groups
constexpr int kSmemFactor = kSmemS + 2 * kTcHeads * kSPitch * 4;
constexpr int kSmemRowL = kSmemFactor + kTcHeads * 4;
constexpr int kSmemValid = kSmemRowL + kTcHeads * 4;
constexpr int kSmemTcBytes = kSmemValid + 2 * kTile;

static_assert(kSmemRaw % 16 == 0 && kEntryBytes % 16 == 0, "cp.async destinations are 16-byte aligned");
static_assert(kSmemS % 16 == 0 && kSmemValid % 4 == 0, "aligned shared-memory regions");
static_assert(kPRowBytes <= kSPitch * 4 && kSPitch * 4 % 16 == 0, "a P row fits in its row of the second score partial");
static_assert(kTcThreads == 32 * kStageWarps && kTcHeads == kStageHeads, "the staging helpers' CTA shape");
static_assert(kSmemTcBytes <= 232448, "one CTA fits Hopper's 227 KB of shared memory per block");
static_assert(kDl % 32 == 0 && kDc == 8 * 64, "576 = 2 x 288 (two k halves of 18 k16 steps); 8 warps x 64 dims of O");

__global__ void __launch_bounds__(kTcThreads, 1) sparse_mqa_tc_kernel(const SparseArgs a) {
  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t sbase = attn_dev::smem_u32(smem);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, tq = lane % 4, x7 = lane & 7;

  const auto [t, h0, kb, ke, ntiles, partial, idx_row] = cta_work(a, kTcHeads);

  float* s_factor = reinterpret_cast<float*>(smem + kSmemFactor);
  float* s_rowl = reinterpret_cast<float*>(smem + kSmemRowL);
  uint8_t* s_valid = smem + kSmemValid;
  const auto tile_off = [](int row, int chunk) { return attn_dev::swizzled(row, chunk, kRowBytes); };  // sQ / sK
  // Softmax state of row r = tid / 4 (identical in its 4 threads).
  float row_m = -INFINITY, row_l = 0.0f;
  const int sm_row = tid / 4, sm_q = tid % 4;

  // O accumulators: warp owns dims [64 warp, 64 warp + 64); [m tile][n tile][c].
  float oacc[4][8][4];
#pragma unroll
  for (int mt = 0; mt < 4; ++mt) {
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int c = 0; c < 4; ++c) oacc[mt][nt][c] = 0.0f;
    }
  }

  int32_t slot_next = -1;
  if (ntiles > 0) {
    load_q_tile(a, t, h0, smem + kSmemQ, sbase + kSmemQ, tile_off, tid);
    issue_raw_tile(a, sbase + kSmemRaw, s_valid, 0, tile_slot(idx_row, kb, ke, 0, warp, lane), warp, lane);
    attn_dev::cp_async_commit();
  }

  // Per-warp roles of the score product.
  const int mw = warp & 1, nw = (warp >> 1) & 1, kh = warp >> 2;
  const int a_row = 32 * mw + (lane & 7) + 8 * ((lane >> 3) & 1);  // + 16 mt
  const int a_hi = lane >> 4;
  const int b_row = 32 * nw + (lane & 7) + 8 * (lane >> 4);        // + 16 np
  const int b_hi = (lane >> 3) & 1;
  // Roles of the P V product (A = P rows, B = V^T via ldmatrix.trans).
  const int p_row = (lane & 7) + 8 * ((lane >> 3) & 1);  // + 16 mt
  const int p_hi = lane >> 4;
  const int v_key = (lane & 7) + 8 * ((lane >> 3) & 1);  // + 16 kk
  const int v_hi = lane >> 4;

  for (int tile = 0; tile < ntiles; ++tile) {
    const bool has_next = tile + 1 < ntiles;
    if (has_next) slot_next = tile_slot(idx_row, kb, ke, tile + 1, warp, lane);  // overlaps the waits

    attn_dev::cp_async_wait<0>();
    __syncthreads();  // B1: raw tile (and Q) landed; the previous P V is done with sK and P

    dequant_tile(smem + kSmemRaw, smem + kSmemK, tile_off, tid);
    __syncthreads();  // B2: sK ready, sRaw free

    if (has_next) {
      issue_raw_tile(a, sbase + kSmemRaw, s_valid, tile + 1, slot_next, warp, lane);
      attn_dev::cp_async_commit();
    }

    // S partial: rows 32 mw + [0, 32), columns 32 nw + [0, 32), depth 288 kh + [0, 288).
    {
      float sacc[2][4][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
          for (int c = 0; c < 4; ++c) sacc[mt][nt][c] = 0.0f;
        }
      }
#pragma unroll
      for (int kk = 0; kk < kDl / 32; ++kk) {
        const int c0 = kh * (kDl / 16) + 2 * kk;  // chunk of this k16 step
        uint32_t af[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          attn_dev::ldmatrix_x4(af[mt], sbase + kSmemQ + (a_row + 16 * mt) * kRowBytes + (((c0 + a_hi) ^ x7) << 4));
        }
        uint32_t bfr[2][4];
#pragma unroll
        for (int np = 0; np < 2; ++np) {
          attn_dev::ldmatrix_x4(bfr[np], sbase + kSmemK + (b_row + 16 * np) * kRowBytes + (((c0 + b_hi) ^ x7) << 4));
        }
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
          for (int np = 0; np < 2; ++np) {
            attn_dev::mma_bf16_16816(sacc[mt][2 * np], af[mt], bfr[np][0], bfr[np][1]);
            attn_dev::mma_bf16_16816(sacc[mt][2 * np + 1], af[mt], bfr[np][2], bfr[np][3]);
          }
        }
      }
      float* s_part = reinterpret_cast<float*>(smem + kSmemS) + kh * kTcHeads * kSPitch;
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          const int row = 32 * mw + 16 * mt + g, col = 32 * nw + 8 * nt + 2 * tq;
          *reinterpret_cast<float2*>(s_part + row * kSPitch + col) = make_float2(sacc[mt][nt][0], sacc[mt][nt][1]);
          *reinterpret_cast<float2*>(s_part + (row + 8) * kSPitch + col) = make_float2(sacc[mt][nt][2], sacc[mt][nt][3]);
        }
      }
    }
    __syncthreads();  // B3: both score partials stored

    // Softmax: row sm_row, columns 4 sm_q + 16 k + j (k, j < 4).
    uint32_t pk[8];
    float factor = 1.0f;
    {
      const float* s0 = reinterpret_cast<const float*>(smem + kSmemS) + sm_row * kSPitch;
      const float* s1 = s0 + kTcHeads * kSPitch;
      const uint8_t* valid = s_valid + (tile & 1) * kTile;
      float s[16];
      float tmax = -INFINITY;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int col = 4 * sm_q + 16 * k;
        const float4 x0 = *reinterpret_cast<const float4*>(s0 + col);
        const float4 x1 = *reinterpret_cast<const float4*>(s1 + col);
        const uint32_t vb = *reinterpret_cast<const uint32_t*>(valid + col);
        const float sum[4] = {x0.x + x1.x, x0.y + x1.y, x0.z + x1.z, x0.w + x1.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          s[4 * k + j] = ((vb >> (8 * j)) & 0xFFu) ? sum[j] * a.scale : -INFINITY;
          tmax = fmaxf(tmax, s[4 * k + j]);
        }
      }
      tmax = fmaxf(tmax, __shfl_xor_sync(kFullMask, tmax, 1));
      tmax = fmaxf(tmax, __shfl_xor_sync(kFullMask, tmax, 2));
      factor = attn_dev::raise_row_max(row_m, tmax);
      row_l *= factor;
      const float ref = attn_dev::exp_ref(row_m);
      float tsum = 0.0f;
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float p0 = expf(s[2 * k] - ref), p1 = expf(s[2 * k + 1] - ref);
        tsum += p0;
        tsum += p1;
        pk[k] = attn_dev::pack_bf16x2(p0, p1);
      }
      tsum += __shfl_xor_sync(kFullMask, tsum, 1);
      tsum += __shfl_xor_sync(kFullMask, tsum, 2);
      row_l += tsum;
    }
    // P row r overwrites the first 128 bytes of row r of the second score partial. Only the 4
    // threads of row r (lanes of one warp) read that row: once the warp is past this point, all of
    // them have their scores in registers.
    __syncwarp();
    {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int chunk = 2 * k + (sm_q >> 1);
        *reinterpret_cast<uint2*>(smem + kSmemP + attn_dev::swizzled(sm_row, chunk, kPRowPitch) + 8 * (sm_q & 1)) =
            make_uint2(pk[2 * k], pk[2 * k + 1]);
      }
      if (sm_q == 0) s_factor[sm_row] = factor;
    }
    __syncthreads();  // B4: P and the factors are visible

    // O = O * factor + P V.
    {
      float f[4][2];
      bool ones = true;
#pragma unroll
      for (int mt = 0; mt < 4; ++mt) {
        f[mt][0] = s_factor[16 * mt + g];
        f[mt][1] = s_factor[16 * mt + g + 8];
        ones = ones && f[mt][0] == 1.0f && f[mt][1] == 1.0f;
      }
      if (!__all_sync(kFullMask, ones)) {
#pragma unroll
        for (int mt = 0; mt < 4; ++mt) {
#pragma unroll
          for (int nt = 0; nt < 8; ++nt) {
            oacc[mt][nt][0] *= f[mt][0];
            oacc[mt][nt][1] *= f[mt][0];
            oacc[mt][nt][2] *= f[mt][1];
            oacc[mt][nt][3] *= f[mt][1];
          }
        }
      }
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk) {
        uint32_t pa[4][4];
#pragma unroll
        for (int mt = 0; mt < 4; ++mt) {
          attn_dev::ldmatrix_x4(pa[mt], sbase + kSmemP + (16 * mt + p_row) * kPRowPitch + (((2 * kk + p_hi) ^ x7) << 4));
        }
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          uint32_t vb[4];
          attn_dev::ldmatrix_x4_trans(
              vb, sbase + kSmemK + (16 * kk + v_key) * kRowBytes + (((8 * warp + 2 * np + v_hi) ^ x7) << 4));
#pragma unroll
          for (int mt = 0; mt < 4; ++mt) {
            attn_dev::mma_bf16_16816(oacc[mt][2 * np], pa[mt], vb[0], vb[1]);
            attn_dev::mma_bf16_16816(oacc[mt][2 * np + 1], pa[mt], vb[2], vb[3]);
          }
        }
      }
    }
  }

  // Epilogue: l per row to shared memory, then O / l.
  if (sm_q == 0) {
    s_rowl[sm_row] = row_l;
    const int h = h0 + sm_row;
    if (h < a.num_heads) {
      const float v = row_lse(row_m, row_l);
      if (partial < 0) {
        a.lse[t * a.num_heads + h] = v;
      } else {
        a.partial_lse[static_cast<int64_t>(partial) * a.num_heads + h] = v;
      }
    }
  }
  __syncthreads();
#pragma unroll
  for (int mt = 0; mt < 4; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = 16 * mt + g + 8 * half, h = h0 + row;
      if (h >= a.num_heads) continue;
      const float l = s_rowl[row];
      if (partial < 0) {
        bf16_t* out = a.out_lat + (t * a.num_heads + h) * kDc + 64 * warp + 2 * tq;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          *reinterpret_cast<uint32_t*>(out + 8 * nt) =
              attn_dev::pack_bf16x2(normalize(oacc[mt][nt][2 * half], l), normalize(oacc[mt][nt][2 * half + 1], l));
        }
      } else {
        float* out = a.partial_out + (static_cast<int64_t>(partial) * a.num_heads + h) * kDc + 64 * warp + 2 * tq;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          *reinterpret_cast<float2*>(out + 8 * nt) =
              make_float2(normalize(oacc[mt][nt][2 * half], l), normalize(oacc[mt][nt][2 * half + 1], l));
        }
      }
    }
  }
}

// =================================================================================================
// combine
// =================================================================================================

constexpr int kCombineThreads = 256;
constexpr int kCombineHeadsPerBlock = kCombineThreads / 32;

struct CombineArgs {
  const float* partial_out;  // [P, H, 512]
  const float* partial_lse;  // [P, H]
  const int32_t* split_offsets;
  int32_t num_heads;
  bf16_t* out_lat;
  float* lse;
};

// Warp per (token, head); lane l owns elements 4 l + 128 j + c (j, c < 4). The host's operations in
// the host's order: max, weights exp(lse_i - ref) summed in order, sum of w_i * partial_i skipping
// zero weights, division, one rounding.
template <bool kVec>
__global__ void __launch_bounds__(kCombineThreads) sparse_mqa_combine_kernel(const CombineArgs a) {
  const int lane = threadIdx.x % 32;
  const int64_t t = blockIdx.x;
  const int h = blockIdx.y * kCombineHeadsPerBlock + threadIdx.x / 32;
  if (h >= a.num_heads) return;
  const int64_t first = a.split_offsets[t], last = a.split_offsets[t + 1];
  if (last <= first) return;  // one split: written directly by the item
  const int64_t H = a.num_heads;
  float m = -INFINITY;
  for (int64_t i = first; i < last; ++i) m = fmaxf(m, a.partial_lse[i * H + h]);
  const float ref = attn_dev::exp_ref(m);
  float total = 0.0f;
  for (int64_t i = first; i < last; ++i) total = __fadd_rn(total, expf(a.partial_lse[i * H + h] - ref));
  bf16_t* out = a.out_lat + (t * H + h) * kDc;
  if (total == 0.0f) {
    for (int e = lane; e < kDc; e += 32) out[e] = 0;
    if (lane == 0) a.lse[t * H + h] = -INFINITY;
    return;
  }
  float acc[4][4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[j][c] = 0.0f;
  }
  for (int64_t i = first; i < last; ++i) {
    const float w = expf(a.partial_lse[i * H + h] - ref);
    if (w == 0.0f) continue;
    const float* src = a.partial_out + (i * H + h) * kDc + 4 * lane;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float x[4];
      if constexpr (kVec) {
        const float4 v = *reinterpret_cast<const float4*>(src + 128 * j);
        x[0] = v.x; x[1] = v.y; x[2] = v.z; x[3] = v.w;
      } else {
#pragma unroll
        for (int c = 0; c < 4; ++c) x[c] = src[128 * j + c];
      }
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[j][c] = __fadd_rn(acc[j][c], __fmul_rn(w, x[c]));
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    bf16_t* dst = out + 4 * lane + 128 * j;
    const uint32_t lo = attn_dev::pack_bf16x2(__fdiv_rn(acc[j][0], total), __fdiv_rn(acc[j][1], total));
    const uint32_t hi = attn_dev::pack_bf16x2(__fdiv_rn(acc[j][2], total), __fdiv_rn(acc[j][3], total));
    if constexpr (kVec) {
      *reinterpret_cast<uint2*>(dst) = make_uint2(lo, hi);
    } else {
      dst[0] = static_cast<bf16_t>(lo & 0xFFFFu);
      dst[1] = static_cast<bf16_t>(lo >> 16);
      dst[2] = static_cast<bf16_t>(hi & 0xFFFFu);
      dst[3] = static_cast<bf16_t>(hi >> 16);
    }
  }
  if (lane == 0) a.lse[t * H + h] = ref + logf(total);
}

// =================================================================================================
// launcher
// =================================================================================================

enum class SparseImpl { kWgmma, kTc, kSimple };

Status requested_impl(SparseImpl* impl) {
  const char* env = std::getenv("MLA_SPARSE_MQA_IMPL");
  if (env == nullptr || env[0] == '\0' || std::strcmp(env, "wgmma") == 0) {
    *impl = SparseImpl::kWgmma;
  } else if (std::strcmp(env, "tc") == 0) {
    *impl = SparseImpl::kTc;
  } else if (std::strcmp(env, "simple") == 0) {
    *impl = SparseImpl::kSimple;
  } else {
    return Status::error(std::string("MLA_SPARSE_MQA_IMPL is '") + env + "' (expected 'wgmma', 'tc' or 'simple')");
  }
  return Status();
}

bool aligned_to(const void* p, uintptr_t n) { return reinterpret_cast<uintptr_t>(p) % n == 0; }

// What runs for `impl` (the request) on `device` (`optin` bytes of shared memory per block) with
// inputs that are (not) `aligned`. wgmma and tc need 16-byte cp.async from the cache, 4-byte bf16x2
// output stores, 8-byte partial stores and their shared memory; wgmma also an sm_90a build and
// device. wgmma falls back to tc, tc to simple.
SparseImpl choose_impl(SparseImpl impl, bool aligned, int device, int optin) {
#if MLA_HAVE_WGMMA
  if (impl == SparseImpl::kWgmma && aligned && optin >= sparse_wgmma::smem_bytes() && sparse_wgmma::runs_on(device)) {
    return SparseImpl::kWgmma;
  }
#else
  (void)device;
#endif
  return impl != SparseImpl::kSimple && aligned && optin >= kSmemTcBytes ? SparseImpl::kTc : SparseImpl::kSimple;
}

// The alignment the cp.async kernels need (choose_impl).
bool cache_aligned(const SparseMqaParams& p) { return aligned_to(p.cache.data, 16) && p.cache.page_stride_bytes % 16 == 0; }
bool inputs_aligned(const SparseMqaParams& p) {
  return cache_aligned(p) && aligned_to(p.out_lat, 4) && aligned_to(p.partial_out, 8);
}

const char* impl_name(SparseImpl impl) {
  return impl == SparseImpl::kWgmma ? "wgmma" : (impl == SparseImpl::kTc ? "tc" : "simple");
}

// The name of what launch_sparse_mqa runs on `device` for inputs that are (not) aligned.
Status chosen_name(bool aligned, int device, std::string* name) {
  SparseImpl impl = SparseImpl::kWgmma;
  MLA_RETURN_IF_ERROR(requested_impl(&impl));
  int optin = 0;
  MLA_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  *name = impl_name(choose_impl(impl, aligned, device, optin));
  return Status();
}

}  // namespace

Status launch_sparse_mqa(const SparseMqaParams& p, cudaStream_t stream) {
  MLA_RETURN_IF_ERROR(p.validate());
  const SparseMqaMetadata& md = p.metadata;
  if (md.num_items == 0 && md.num_tokens_planned == 0) return Status();

  SparseArgs args{};
  args.q_nope = p.q_nope_lat;
  args.q_nope_ts = p.q_nope_token_stride;
  args.q_nope_hs = p.q_nope_head_stride;
  args.q_pe = p.q_pe;
  args.q_pe_ts = p.q_pe_token_stride;
  args.q_pe_hs = p.q_pe_head_stride;
  args.num_heads = p.num_heads;
  args.indices = p.indices;
  args.indices_row_stride = p.indices_row_stride;
  args.topk = p.topk;
  args.cache = p.cache.data;
  args.num_slots = p.cache.num_slots();
  args.block_size = p.cache.block_size;
  args.page_stride = p.cache.page_stride_bytes;
  args.scale = p.scale;
  args.out_lat = p.out_lat;
  args.lse = p.lse;
  args.items = md.items;
  args.partial_out = p.partial_out;
  args.partial_lse = p.partial_lse;
  args.q_vec = aligned_to(p.q_nope_lat, 16) && aligned_to(p.q_pe, 16) && p.q_nope_token_stride % 8 == 0 &&
               p.q_nope_head_stride % 8 == 0 && p.q_pe_token_stride % 8 == 0 && p.q_pe_head_stride % 8 == 0;
  const bool cache_vec = cache_aligned(p);

  if (md.num_items > 0) {
    SparseImpl impl = SparseImpl::kWgmma;
    MLA_RETURN_IF_ERROR(requested_impl(&impl));
    int device = 0, optin = 0;
    MLA_CUDA_CHECK(cudaGetDevice(&device));
    MLA_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    const SparseImpl chosen = choose_impl(impl, inputs_aligned(p), device, optin);
    const bool use_wgmma = chosen == SparseImpl::kWgmma, use_tc = chosen == SparseImpl::kTc;
    const int heads_per_cta = use_wgmma ? sparse_wgmma::kHeadsPerCta : (use_tc ? kTcHeads : kSimpleHeads);
    args.head_groups = (p.num_heads + heads_per_cta - 1) / heads_per_cta;
    const int64_t blocks = static_cast<int64_t>(md.num_items) * args.head_groups;
    if (blocks > INT_MAX) {
      return Status::error("launch_sparse_mqa: " + std::to_string(blocks) + " CTAs exceed the grid's x limit");
    }
    const dim3 grid(static_cast<unsigned>(blocks));
    if (use_wgmma) {
#if MLA_HAVE_WGMMA
      MLA_RETURN_IF_ERROR(sparse_wgmma::launch(args, grid, stream));
#endif
    } else if (use_tc) {
      MLA_CUDA_CHECK(cudaFuncSetAttribute(sparse_mqa_tc_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          kSmemTcBytes));
      sparse_mqa_tc_kernel<<<grid, kTcThreads, kSmemTcBytes, stream>>>(args);
      MLA_CUDA_CHECK_LAUNCH("sparse_mqa_tc_kernel");
    } else {
      const int smem = static_cast<int>(sizeof(SimpleSmem));
      if (optin < smem) {
        return Status::error("launch_sparse_mqa: the device allows " + std::to_string(optin) +
                             " bytes of shared memory per block; the simple kernel needs " + std::to_string(smem));
      }
      if (cache_vec) {
        MLA_CUDA_CHECK(cudaFuncSetAttribute(sparse_mqa_simple_kernel<true>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        sparse_mqa_simple_kernel<true><<<grid, kSimpleThreads, smem, stream>>>(args);
      } else {
        MLA_CUDA_CHECK(cudaFuncSetAttribute(sparse_mqa_simple_kernel<false>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        sparse_mqa_simple_kernel<false><<<grid, kSimpleThreads, smem, stream>>>(args);
      }
      MLA_CUDA_CHECK_LAUNCH("sparse_mqa_simple_kernel");
    }
  }

  if (md.num_tokens_planned > 0) {
    const CombineArgs c{p.partial_out, p.partial_lse, md.split_offsets, p.num_heads, p.out_lat, p.lse};
    const dim3 grid(static_cast<unsigned>(md.num_tokens_planned),
                    static_cast<unsigned>((p.num_heads + kCombineHeadsPerBlock - 1) / kCombineHeadsPerBlock));
    if (aligned_to(p.partial_out, 16) && aligned_to(p.out_lat, 8)) {
      sparse_mqa_combine_kernel<true><<<grid, kCombineThreads, 0, stream>>>(c);
    } else {
      sparse_mqa_combine_kernel<false><<<grid, kCombineThreads, 0, stream>>>(c);
    }
    MLA_CUDA_CHECK_LAUNCH("sparse_mqa_combine_kernel");
  }
  return Status();
}

Status sparse_mqa_implementation(int device, std::string* name) { return chosen_name(/*aligned=*/true, device, name); }

Status sparse_mqa_implementation_for(const SparseMqaParams& p, int device, std::string* name) {
  return chosen_name(inputs_aligned(p), device, name);
}

}  // namespace mla
