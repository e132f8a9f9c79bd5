// Launcher of the two-way LSE merge (docs/semantics.md §4.2) on a CUDA stream (merge.cu): calls
// params.validate() and returns its error unchanged, launches nothing when there are no rows,
// launches asynchronously on `stream` and checks the launch. One warp per row; out may alias out_a
// / out_b and lse may alias lse_a / lse_b. Pointers are device pointers.
#pragma once

#include <cuda_runtime.h>

#include "kernels/common/attention_params.h"
#include "kernels/common/status.h"

namespace mla {

Status launch_merge(const MergeParams& p, cudaStream_t stream);

}  // namespace mla
