// The device side of sparse MQA shared by its kernels (sparse_mqa_kernel.cu: simple, tc, combine):
// the argument block, the slot -> entry address math, and the dequantization bit-identical to the
// gather (SPEC 1.2).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/common/attention_params.h"
#include "kernels/common/bf16.h"
#include "kernels/common/ds_mla_entry.h"
#include "kernels/cuda/attention_device.cuh"
#include "kernels/cuda/fp8_codec.cuh"

namespace mla::sparse_dev {

using attn_dev::kFullMask;

constexpr int kDl = DsMlaEntry::kLatentDims;  // 576
constexpr int kDc = DsMlaEntry::kNopeDims;    // 512
constexpr int kEntryBytes = DsMlaEntry::kBytes;
constexpr int kTile = 64;                      // top-k columns per tile

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
// SPEC 1.2 with the gather's conversions (fp8_codec.cuh), bit for bit.
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

// The final row of an item: acc / l (0 when l == 0) and its LSE (attention_device.cuh).
using attn_dev::normalize;
using attn_dev::row_lse;

}  // namespace mla::sparse_dev
