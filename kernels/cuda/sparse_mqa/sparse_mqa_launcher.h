// Launcher of sparse MQA over the fp8_ds_mla cache (docs/semantics.md §4.1) on a CUDA stream: the
// host backend's algorithm (kernels/host/host_sparse_mqa.cpp) per work item and group of heads,
// then the combine of the tokens the plan split. Semantics and precision contract:
// kernels/common/attention_params.h; results equal the host's up to fp32 accumulation order and
// exp / log ulps. Trusts the metadata (docs/semantics.md §6.4).
//
// launch_sparse_mqa:
//   1. calls params.validate() and returns its error unchanged;
//   2. returns ok without launching when there is no work (no empty grids);
//   3. resolves `auto` (the default) to `crossover` where the 64-head groups come in pairs and
//      topk >= kCrossoverAutoMinTopk (512; sparse_mqa_config.h gives the measurements behind it),
//      else to `wgmma`;
//   4. runs the requested implementation, or falls back: `crossover` (sm_90a builds, compute
//      capability 9.0 devices, an even number of 64-head groups, e.g. 128 heads) -> `wgmma`
//      (sm_90a builds, compute capability 9.0 devices) -> `tc` -> `simple`. `crossover`, `wgmma`
//      and `tc` need the cache 16-byte aligned with a page stride that is a multiple of 16,
//      out_lat 4-byte and partial_out 8-byte aligned, and their shared memory; `simple` runs with
//      any alignment;
//   5. launches asynchronously on `stream` and checks every launch (the message names the file and
//      line). Kernel execution errors surface at the next synchronisation.
// Pointers in the params are device pointers.
#pragma once

#include <cuda_runtime.h>

#include "kernels/common/attention_params.h"
#include "kernels/common/status.h"
#include "kernels/kernel_policy.h"

namespace mla {

Status launch_sparse_mqa(const SparseMqaParams& p, SparseMqaImpl requested, cudaStream_t stream);

// The implementation launch_sparse_mqa runs on `device` for `requested`: for inputs that meet
// every alignment condition (mla-bench's and the backends' own buffers do) with a head count and
// top-k that every implementation takes and for which `auto` requests `crossover` (an even number
// of 64-head groups, top-k >= 512), and for these params (their alignment, head count and top-k
// included; what a test asserts so that a fallback cannot pass unseen).
Status sparse_mqa_implementation(SparseMqaImpl requested, int device, SparseMqaImpl* runs);
Status sparse_mqa_implementation_for(const SparseMqaParams& p, SparseMqaImpl requested, int device,
                                     SparseMqaImpl* runs);

}  // namespace mla
