// Launcher of dense MHA over a varlen batch (docs/semantics.md §4.2) on a CUDA stream: bottom-right
// causal or unmasked attention per request, query tile and head, the host backend's algorithm
// (kernels/host/host_dense_mha.cpp). Semantics and precision contract:
// kernels/common/attention_params.h; results equal the host's up to fp32 accumulation order and
// exp / log ulps, except that the `wgmma` kernel takes online-softmax steps of 128 keys where the
// host backend, `simple` and `tc` take 64 (host::dense_mha's softmax_keys: the same softmax, P
// rounded to bf16 against another running max).
//
// launch_dense_mha:
//   1. calls params.validate() and returns its error unchanged;
//   2. returns ok without launching when there is no work (no empty grids);
//   3. runs policy.dense_mha, or falls back: `wgmma` (sm_90a builds, compute capability 9.0 devices
//      that give its kernels the registers its setmaxnreg budget assumes) -> `tc` -> `simple`.
//      `wgmma` needs every input 16-byte aligned with token strides that are multiples of 8
//      elements (TMA) and out 16-byte aligned; `tc` the same inputs (cp.async) and out 4-byte
//      aligned; `simple` runs with any alignment. policy.dense_wgmma_debug other than kNone is an
//      unsupported error where `wgmma` does not run;
//   4. sizes the grid from the host copies of cu_seqlens (the kernels read the device copies and
//      clamp every range), launches asynchronously on `stream` and checks every CUDA call and
//      launch (the message names the file and line). Kernel execution errors surface at the next
//      synchronisation.
// Pointers in the params are device pointers, except cu_seqlens_*_host (host memory).
#pragma once

#include <cuda_runtime.h>

#include "kernels/common/attention_params.h"
#include "kernels/common/status.h"
#include "kernels/kernel_policy.h"

namespace mla {

Status launch_dense_mha(const DenseMhaParams& p, const KernelPolicy& policy, cudaStream_t stream);

// The implementation launch_dense_mha runs on `device` for `requested`: for inputs that meet every
// alignment condition (mla-bench's and the backends' own buffers do), and for these params (their
// alignment included; what a test asserts so that a fallback cannot pass unseen).
Status dense_mha_implementation(DenseMhaImpl requested, int device, DenseMhaImpl* runs);
Status dense_mha_implementation_for(const DenseMhaParams& p, DenseMhaImpl requested, int device, DenseMhaImpl* runs);

}  // namespace mla
