// The combine step of sparse MQA (docs/semantics.md §4.1): tokens whose top-k range the work plan
// split over several items (split_offsets[t + 1] > split_offsets[t]) have fp32 partial rows and
// LSEs; this kernel merges them into out_lat and lse exactly as the host does (the same operations
// in the same order: max, weights exp(lse_i - ref) summed in order, sum of w_i * partial_i skipping
// zero weights, division, one rounding). Tokens written directly by their item are left alone. One
// warp per (planned token, head).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/cuda/common/attention_device.cuh"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/device_io.cuh"
#include "kernels/cuda/sparse_mqa/sparse_mqa_device.cuh"
#include "kernels/cuda/sparse_mqa/sparse_mqa_impls.h"

namespace mla {
namespace {

using namespace sparse_dev;  // NOLINT: this file's kernel is the header's user

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

}  // namespace

namespace sparse_combine {

Status launch(const SparseMqaParams& p, cudaStream_t stream) {
  const SparseMqaMetadata& md = p.metadata;
  const CombineArgs c{p.partial_out, p.partial_lse, md.split_offsets, p.num_heads, p.out_lat, p.lse};
  const dim3 grid(static_cast<unsigned>(md.num_tokens_planned),
                  static_cast<unsigned>((p.num_heads + kCombineHeadsPerBlock - 1) / kCombineHeadsPerBlock));
  if (cuda_io::aligned_to(p.partial_out, 16) && cuda_io::aligned_to(p.out_lat, 8)) {
    sparse_mqa_combine_kernel<true><<<grid, kCombineThreads, 0, stream>>>(c);
  } else {
    sparse_mqa_combine_kernel<false><<<grid, kCombineThreads, 0, stream>>>(c);
  }
  MLA_CUDA_CHECK_LAUNCH("sparse_mqa_combine_kernel");
  return Status();
}

}  // namespace sparse_combine
}  // namespace mla
