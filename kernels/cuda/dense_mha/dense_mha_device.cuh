// The device side shared by the dense MHA kernels `simple` and `tc` (dense_mha_simple.cu,
// dense_mha_tc.cu): a request's clamped token range and the keys a query sees.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/attention_params.h"
#include "kernels/cuda/common/attention_device.cuh"
#include "kernels/cuda/dense_mha/dense_mha_args.h"
#include "kernels/cuda/dense_mha/dense_mha_config.h"

namespace mla::dense_dev {

using attn_dev::kFullMask;
using attn_dev::normalize;
using attn_dev::row_lse;

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

}  // namespace mla::dense_dev
