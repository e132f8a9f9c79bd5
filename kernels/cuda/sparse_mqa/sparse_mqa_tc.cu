// Sparse MQA over the fp8_ds_mla cache (docs/semantics.md §4.1), `tc` implementation: tensor cores
// through mma.sync m16n8k16. Runs where `wgmma` cannot (no sm_90a build or device) when the
// alignment allows (sparse_mqa_impls.h); the semantics of sparse_mqa_simple.cu, with fp32 sums in
// another order.
//
// One CTA (256 threads, 8 warps) per (work item, 64 heads; heads >= num_heads are zero rows whose
// results are dropped), the item's head groups adjacent in the 1-D grid (L2 reuse of the entries).
// Shared memory (dynamic, 226,944 bytes, one CTA per SM):
//   sQ   [64 heads][576] bf16, 1152-byte rows, swizzled        73,728
//   sK   [64 keys][576] bf16 (dequantized), swizzled             73,728
//   sRaw [64][656] raw entries of the next tile (cp.async)       41,984
//   sS   two fp32 [64][72] partial score tiles; P [64][64] bf16 (swizzled) reuses the first 128
//        bytes of each 288-byte row of the second one             36,864
//   factor[64], row_l[64] fp32, valid[2][64] bytes
// Rows are swizzled (16-byte chunk c of row r at chunk c ^ (r & 7)): ldmatrix reads 8 rows at one
// logical chunk without bank conflicts.
// Per tile: (B1) wait for the raw tile, barrier; dequantize sRaw -> sK (the gather's bits); (B2)
// barrier; issue the next tile's cp.async into sRaw (it lands while this tile computes); S = Q K^T
// with mma.sync m16n8k16 — warp w computes rows 32 (w & 1), columns 32 ((w >> 1) & 1), half (w >> 2)
// of the 576-deep sum, and stores its fp32 partial; (B3) barrier; softmax: 4 threads per row, 16
// columns each, m and l kept in registers (identical in the 4); P (bf16) over the row's own scores
// (a warp-level sync: a row is read only by its 4 threads) and the row factors to shared memory;
// (B4) barrier; O += P V — warp w owns O[64 heads][64 w .. 64 w + 63] in 128 fp32 registers per
// thread, V read with ldmatrix.trans from sK.
// The phases of a tile run one after the other; the ldmatrix traffic of the score product makes it
// shared-memory bound, which the `wgmma` kernel removes by reading both operands from shared memory
// in the tensor cores.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/common/ds_mla_entry.h"
#include "kernels/cuda/common/attention_device.cuh"
#include "kernels/cuda/common/kernel_launch.cuh"
#include "kernels/cuda/sparse_mqa/sparse_mqa_device.cuh"
#include "kernels/cuda/sparse_mqa/sparse_mqa_impls.h"

namespace mla {
namespace {

using namespace sparse_dev;  // NOLINT: this file's kernel is the header's user

constexpr int kTcThreads = 256;
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

}  // namespace

namespace sparse_tc {

int smem_bytes() { return kSmemTcBytes; }

Status launch(const SparseArgs& a, dim3 grid, cudaStream_t stream) {
  return launch_with_smem(sparse_mqa_tc_kernel, "sparse_mqa_tc_kernel", grid, kTcThreads, kSmemTcBytes, stream, a);
}

}  // namespace sparse_tc
}  // namespace mla
