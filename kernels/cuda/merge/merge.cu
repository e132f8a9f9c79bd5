// The two-way LSE merge (docs/semantics.md §4.2), the host merge (kernels/host/host_merge.cpp)
// element for element: NaN and +inf LSEs are treated as -inf; with m = max(lse_a, lse_b),
// wa = exp(lse_a - m), wb = exp(lse_b - m): out = bf16((wa a + wb b) / (wa + wb)) where a side of weight 0 adds nothing
// (its values are never multiplied, so a NaN row there does not leak), lse = m + ln(wa + wb); both
// -inf: out = out_a, lse = -inf. The products and sums are single IEEE operations in the host's
// order (__fmul_rn / __fadd_rn: never contracted into an FMA), so the results differ from the
// host's only through expf / logf.
//
// Work split: one warp per row (grid-stride over rows). Every lane reads the row's two LSEs, then
// __syncwarp(), and only then lane 0 writes the merged LSE: lse may alias lse_a or lse_b. Each
// element is read and written by the same lane, so out may alias out_a or out_b.
// Vector variant: 8 bf16 (16 bytes) per access when out_a, out_b, out are 16-byte aligned and the
// width is a multiple of 8; scalar otherwise (same results).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/common/online_softmax.h"
#include "kernels/cuda/common/attention_device.cuh"
#include "kernels/cuda/merge/merge_launcher.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/device_io.cuh"

namespace mla {
namespace {

constexpr int kMergeThreads = 256;
constexpr int kMergeRowsPerBlock = kMergeThreads / 32;

struct MergeArgs {
  const bf16_t* out_a;
  const float* lse_a;
  const bf16_t* out_b;
  const float* lse_b;
  bf16_t* out;
  float* lse;
  int64_t rows;
  int32_t width;
};

__device__ __forceinline__ float merge_element(float wa, float wb, float total, float a, float b) {
  float num = 0.0f;
  if (wa != 0.0f) num = __fadd_rn(num, __fmul_rn(wa, a));
  if (wb != 0.0f) num = __fadd_rn(num, __fmul_rn(wb, b));
  return __fdiv_rn(num, total);
}

template <bool kVec>
__global__ void __launch_bounds__(kMergeThreads) merge_kernel(const MergeArgs m) {
  const int lane = threadIdx.x % 32;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kMergeRowsPerBlock;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kMergeRowsPerBlock + threadIdx.x / 32; row < m.rows;
       row += step) {
    const float la = lse_sanitize(m.lse_a[row]);
    const float lb = lse_sanitize(m.lse_b[row]);
    __syncwarp();  // every lane has read the LSEs before lane 0 may overwrite one (aliasing)
    const bf16_t* a = m.out_a + row * m.width;
    const bf16_t* b = m.out_b + row * m.width;
    bf16_t* out = m.out + row * m.width;
    float wa = 0.0f, wb = 0.0f, merged = 0.0f;
    if (!lse_merge2_weights(la, lb, &wa, &wb, &merged)) {
      // Both empty: out = out_a as is.
      if (out != a) {
        if constexpr (kVec) {
          for (int v = lane; v < m.width / 8; v += 32) {
            reinterpret_cast<uint4*>(out)[v] = reinterpret_cast<const uint4*>(a)[v];
          }
        } else {
          for (int e = lane; e < m.width; e += 32) out[e] = a[e];
        }
      }
      if (lane == 0) m.lse[row] = -INFINITY;
      continue;
    }
    const float total = wa + wb;
    if constexpr (kVec) {
      for (int v = lane; v < m.width / 8; v += 32) {
        const uint4 xa = reinterpret_cast<const uint4*>(a)[v];
        const uint4 xb = reinterpret_cast<const uint4*>(b)[v];
        const uint32_t wa4[4] = {xa.x, xa.y, xa.z, xa.w};
        const uint32_t wb4[4] = {xb.x, xb.y, xb.z, xb.w};
        uint32_t r[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const float lo = merge_element(wa, wb, total, attn_dev::bf16_lo(wa4[k]), attn_dev::bf16_lo(wb4[k]));
          const float hi = merge_element(wa, wb, total, attn_dev::bf16_hi(wa4[k]), attn_dev::bf16_hi(wb4[k]));
          r[k] = attn_dev::pack_bf16x2(lo, hi);
        }
        reinterpret_cast<uint4*>(out)[v] = make_uint4(r[0], r[1], r[2], r[3]);
      }
    } else {
      for (int e = lane; e < m.width; e += 32) {
        const float x = merge_element(wa, wb, total, bf16_to_f32(a[e]), bf16_to_f32(b[e]));
        out[e] = static_cast<bf16_t>(attn_dev::pack_bf16x2(x, 0.0f) & 0xFFFFu);
      }
    }
    if (lane == 0) m.lse[row] = merged;
  }
}

}  // namespace

Status launch_merge(const MergeParams& p, cudaStream_t stream) {
  MLA_RETURN_IF_ERROR(p.validate());
  if (p.rows == 0) return Status();
  const MergeArgs args{p.out_a, p.lse_a, p.out_b, p.lse_b, p.out, p.lse, p.rows, p.width};
  const unsigned grid = cuda_io::grid_blocks(p.rows, kMergeRowsPerBlock);
  const bool vec = p.width % 8 == 0 && cuda_io::aligned16(p.out_a) && cuda_io::aligned16(p.out_b) &&
                   cuda_io::aligned16(p.out);
  if (vec) {
    merge_kernel<true><<<grid, kMergeThreads, 0, stream>>>(args);
  } else {
    merge_kernel<false><<<grid, kMergeThreads, 0, stream>>>(args);
  }
  MLA_CUDA_CHECK_LAUNCH("merge_kernel");
  return Status();
}

}  // namespace mla
