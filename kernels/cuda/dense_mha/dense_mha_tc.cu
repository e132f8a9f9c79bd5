// Dense MHA over a varlen batch (docs/semantics.md §4.2), `tc` implementation: FlashAttention-2
// style on mma.sync m16n8k16. Runs where `wgmma` cannot (no sm_90a build or device, or out not
// 16-byte aligned) when the inputs allow cp.async (dense_mha_impls.h); the semantics of
// dense_mha_simple.cu (64-key softmax steps), with fp32 sums in another order.
//
// One CTA (128 threads, 4 warps) per (request, 64 queries, head); warp w owns query rows 16 w ..
// 16 w + 15 of the tile, so everything per row stays in one warp. Shared memory (dynamic, 106,496
// bytes, two CTAs per SM): sQ [64][192] bf16, sK[2] [64][192] bf16, sV[2] [64][128] bf16, rows
// swizzled (attention_device.cuh); K / V double-buffered with cp.async, zero-filled past the
// request's keys. Q fragments stay in registers; S = Q K^T (16 x 64 per warp) with m16n8k16; the
// softmax runs on the S fragments (4 lanes share a row: shuffles); P is repacked from the S
// accumulators into A fragments; O (16 x 128 per warp, 64 fp32 registers per thread) += P V with V
// through ldmatrix.trans. Causal CTAs stop after the last key tile their last query sees; within a
// request the later (longer) query tiles are scheduled first. Every range read from cu_seqlens is
// clamped (request_range).
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

constexpr int kTcThreads = 128;
constexpr int kQkRowBytes = kDqk * 2;         // 384: 24 chunks
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
static_assert(kDqk % 16 == 0 && kDv == 8 * 16, "12 k16 steps for S; 16 n8 tiles of O per warp");

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
  uint32_t qf[kDqk / 16][4];

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
      for (int kk = 0; kk < kDqk / 16; ++kk) {
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
    for (int kk = 0; kk < kDqk / 16; ++kk) {
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

}  // namespace

namespace dense_tc {

int smem_bytes() { return kSmemTcBytes; }

Status launch(const DenseArgs& args, dim3 grid, cudaStream_t stream) {
  return launch_with_smem(dense_mha_tc_kernel, "dense_mha_tc_kernel", grid, kTcThreads, kSmemTcBytes, stream, args);
}

}  // namespace dense_tc
}  // namespace mla
