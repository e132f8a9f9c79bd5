// The device side of sparse MQA shared by its kernels (sparse_mqa_simple.cu, sparse_mqa_tc.cu,
// sparse_mqa_wgmma.cu, sparse_mqa_combine.cu): the argument block, the slot -> entry address math, the
// dequantization bit-identical to the gather (docs/semantics.md §1.2), and the staging of Q and of key tiles that
// the tensor-core kernels share.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/common/attention_params.h"
#include "kernels/common/bf16.h"
#include "kernels/common/ds_mla_entry.h"
#include "kernels/cuda/common/attention_device.cuh"
#include "kernels/cuda/common/fp8_codec.cuh"
#include "kernels/cuda/sparse_mqa/sparse_mqa_config.h"

namespace mla::sparse_dev {

using attn_dev::kFullMask;

constexpr int kEntryBytes = DsMlaEntry::kBytes;

struct SparseArgs {
  const bf16_t* q_nope;  // [T, H, 512] with strides
  int64_t q_nope_ts, q_nope_hs;
  const bf16_t* q_pe;    // [T, H, 64] with strides
  int64_t q_pe_ts, q_pe_hs;
  int32_t num_heads;
  const int32_t* indices;
  int64_t indices_row_stride;
  int32_t topk;
  const uint8_t* cache;
  int64_t num_slots;
  int32_t block_size;
  int64_t page_stride;
  float scale;
  bf16_t* out_lat;       // [T, H, 512]
  float* lse;            // [T, H]
  const SparseMqaWorkItem* items;
  float* partial_out;    // [P, H, 512]
  float* partial_lse;    // [P, H]
  bool q_vec;            // q pointers 16-byte aligned, strides multiples of 8 elements
  int32_t head_groups;   // CTAs per work item: blockIdx.x = item * head_groups + group
  int32_t blocks;        // work items x head_groups (a persistent kernel's loop bound)
};

// Byte offset of a valid slot's entry from the cache base.
__device__ __forceinline__ int64_t entry_offset(const SparseArgs& a, int32_t slot) {
  const uint32_t s = static_cast<uint32_t>(slot), b = static_cast<uint32_t>(a.block_size);
  return static_cast<int64_t>(s / b) * a.page_stride + static_cast<int64_t>(s % b) * kEntryBytes;
}

__device__ __forceinline__ bool slot_valid(const SparseArgs& a, int32_t slot) {
  return slot >= 0 && static_cast<int64_t>(slot) < a.num_slots;
}

// 8 FP8 bytes (two words, byte i of the pair = element i) times `scale` -> 8 bf16 as a uint4:
// docs/semantics.md §1.2 with the gather's conversions (fp8_codec.cuh), bit for bit.
__device__ __forceinline__ uint4 dequant8(uint32_t w0, uint32_t w1, float scale) {
  const float2 f0 = cuda_codec::e4m3x2_to_f32x2(w0);
  const float2 f1 = cuda_codec::e4m3x2_to_f32x2(w0 >> 16);
  const float2 f2 = cuda_codec::e4m3x2_to_f32x2(w1);
  const float2 f3 = cuda_codec::e4m3x2_to_f32x2(w1 >> 16);
  return make_uint4(cuda_codec::f32x2_to_bf16x2(__fmul_rn(f0.x, scale), __fmul_rn(f0.y, scale)),
                    cuda_codec::f32x2_to_bf16x2(__fmul_rn(f1.x, scale), __fmul_rn(f1.y, scale)),
                    cuda_codec::f32x2_to_bf16x2(__fmul_rn(f2.x, scale), __fmul_rn(f2.y, scale)),
                    cuda_codec::f32x2_to_bf16x2(__fmul_rn(f3.x, scale), __fmul_rn(f3.y, scale)));
}

// What a CTA of `heads` heads works on: block = item * a.head_groups + head group (the head
// groups of one item are adjacent blocks, so the second one finds the entries in L2). block is
// blockIdx.x where the grid has one CTA per block; a persistent kernel passes each block it loops
// over.
struct CtaWork {
  int64_t t;               // query token (trusted: failure mode 4)
  int h0;                  // first head
  int32_t kb, ke;          // columns [kb, ke) of the item, clipped to [0, topk)
  int ntiles;              // 64-column tiles in [kb, ke)
  int32_t partial;         // < 0: final output; else the fp32 partial row (trusted)
  const int32_t* idx_row;  // the token's indices
};
__device__ __forceinline__ CtaWork cta_work(const SparseArgs& a, int heads, int32_t block) {
  const SparseMqaWorkItem item = a.items[block / a.head_groups];
  CtaWork w;
  w.t = item.token;
  w.h0 = (block % a.head_groups) * heads;
  w.kb = max(item.k_begin, 0);
  w.ke = min(item.k_end, a.topk);
  w.ntiles = w.ke > w.kb ? (w.ke - w.kb + kTile - 1) / kTile : 0;
  w.partial = item.partial;
  w.idx_row = a.indices + w.t * a.indices_row_stride;
  return w;
}
__device__ __forceinline__ CtaWork cta_work(const SparseArgs& a, int heads) {
  return cta_work(a, heads, static_cast<int32_t>(blockIdx.x));
}

// --- the staging steps of the tensor-core kernels (`tc` and `wgmma`: kStageWarps warps,
// kStageHeads heads and kTile-entry tiles per CTA, sparse_mqa_config.h). `Offset` maps (row,
// 16-byte chunk) of a Q / K tile to its byte offset (each kernel's shared-memory layout).

// Lanes 0..7 of warp w: the slot of entry 8 w + lane of tile `tile` of columns [kb, ke) (-1 past
// the range and on lanes >= 8).
__device__ __forceinline__ int32_t tile_slot(const int32_t* idx_row, int32_t kb, int32_t ke, int tile, int warp,
                                             int lane) {
  const int32_t col = kb + tile * kTile + warp * 8 + (lane & 7);
  return (lane < 8 && col < ke) ? __ldg(idx_row + col) : -1;
}

// Warp w issues the cp.async of entries 8 w .. 8 w + 7 of tile `tile` (`slot` from tile_slot) into
// the raw tile at shared address `raw` (41 chunks of 16 bytes each; an invalid entry is zero-filled
// and not read) and records their validity in valid[(tile & 1) * kTile + entry].
__device__ __forceinline__ void issue_raw_tile(const SparseArgs& a, uint32_t raw, uint8_t* valid, int tile,
                                               int32_t slot, int warp, int lane) {
  const bool ok = slot_valid(a, slot);  // lanes >= 8 hold -1
  const int64_t off = ok ? entry_offset(a, slot) : 0;
  if (lane < 8) valid[(tile & 1) * kTile + warp * 8 + lane] = ok ? 1 : 0;
#pragma unroll
  for (int e8 = 0; e8 < 8; ++e8) {
    const int64_t o = __shfl_sync(kFullMask, off, e8);
    const int v = __shfl_sync(kFullMask, ok ? 1 : 0, e8);
    const uint8_t* src = a.cache + (v ? o : 0);
    const int bytes = v ? 16 : 0;
    const uint32_t dst = raw + (warp * 8 + e8) * kEntryBytes;
    attn_dev::cp_async16(dst + 16 * lane, v ? src + 16 * lane : src, bytes);
    if (lane < kEntryBytes / 16 - 32) {
      attn_dev::cp_async16(dst + 16 * (32 + lane), v ? src + 16 * (32 + lane) : src, bytes);
    }
  }
}

// Q rows of token t, heads h0 .. h0 + 63 (zero rows past num_heads) into the tile at `q` (generic
// pointer) / `q_shared` (its shared address): cp.async when a.q_vec, plain loads and stores
// otherwise. All kStageWarps warps.
template <class Offset>
__device__ __forceinline__ void load_q_tile(const SparseArgs& a, int64_t t, int h0, uint8_t* q, uint32_t q_shared,
                                            Offset offset, int tid) {
  for (int i = tid; i < kStageHeads * (kDl / 8); i += 32 * kStageWarps) {
    const int r = i / (kDl / 8), c = i % (kDl / 8), h = h0 + r;
    const uint32_t off = offset(r, c);
    if (h < a.num_heads) {
      const bf16_t* src = c < kDc / 8 ? a.q_nope + t * a.q_nope_ts + h * a.q_nope_hs + 8 * c
                                      : a.q_pe + t * a.q_pe_ts + h * a.q_pe_hs + 8 * (c - kDc / 8);
      if (a.q_vec) {
        attn_dev::cp_async16(q_shared + off, src, 16);
      } else {
        uint32_t w[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) w[k] = static_cast<uint32_t>(src[2 * k]) | (static_cast<uint32_t>(src[2 * k + 1]) << 16);
        *reinterpret_cast<uint4*>(q + off) = make_uint4(w[0], w[1], w[2], w[3]);
      }
    } else {
      *reinterpret_cast<uint4*>(q + off) = make_uint4(0, 0, 0, 0);
    }
  }
}

// The raw tile at `raw` -> bf16 keys in the tile at `k` (docs/semantics.md §1.2, the gather's bits; RoPE copied).
// Entry e = warp + 8 j; a lane dequantizes chunks lane and lane + 32 (8 values each). All
// kStageWarps warps.
template <class Offset>
__device__ __forceinline__ void dequant_tile(const uint8_t* raw_tile, uint8_t* k, Offset offset, int tid) {
  const int warp = tid / 32, lane = tid % 32;
#pragma unroll 2
  for (int j = 0; j < kTile / kStageWarps; ++j) {
    const int e = warp + kStageWarps * j;
    const uint8_t* raw = raw_tile + e * kEntryBytes;
    const float* scales = reinterpret_cast<const float*>(raw + DsMlaEntry::kScaleOffset);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int c = lane + 32 * half;
      const uint2 q = *reinterpret_cast<const uint2*>(raw + 8 * c);
      const uint4 v = dequant8(q.x, q.y, scales[c / (DsMlaEntry::kTileDims / 8)]);
      *reinterpret_cast<uint4*>(k + offset(e, c)) = v;
    }
  }
  // RoPE: 64 entries x 8 chunks, copied.
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int job = tid + 32 * kStageWarps * j, e = job / 8, c = job % 8;
    const uint4 v = *reinterpret_cast<const uint4*>(raw_tile + e * kEntryBytes + DsMlaEntry::kRopeOffset + 16 * c);
    *reinterpret_cast<uint4*>(k + offset(e, kDc / 8 + c)) = v;
  }
}
static_assert(kStageWarps * 32 * 2 == kTile * 8, "the RoPE copy: two 16-byte chunks per thread");

// The final row of an item: acc / l (0 when l == 0) and its LSE (attention_device.cuh).
using attn_dev::normalize;
using attn_dev::row_lse;

}  // namespace mla::sparse_dev
