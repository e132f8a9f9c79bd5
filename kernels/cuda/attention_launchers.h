// Launchers of the attention kernels (SPEC 4, 5) on a CUDA stream. Each one:
//   1. calls params.validate() and returns its error unchanged;
//   2. returns ok without launching when there is no work (no empty grids);
//   3. launches asynchronously on `stream` and checks every CUDA / cuBLAS call and launch (the
//      message names the file and line).
// Kernel execution errors surface at the next synchronisation. Pointers in the params are device
// pointers (cu_seqlens_*_host of DenseMhaParams: host memory). Semantics and precision contract:
// kernels/common/attention_params.h; same algorithm as the host backend (kernels/host/), results
// equal to accumulation order (fp32 sums in a different order, exp/log to a few ulps), except that
// the dense `wgmma` kernel takes online-softmax steps of 128 keys where the host backend takes 64
// (host::dense_mha's softmax_keys: the same softmax, P rounded to bf16 against another running max).
//
// Implementation choice (read from the environment at every call):
//   MLA_SPARSE_MQA_IMPL = wgmma (default) | tc | simple
//   MLA_DENSE_MHA_IMPL  = wgmma (default) | tc | simple
//   MLA_DENSE_WGMMA_SCHEDULE = persistent (default) | grid   (the wgmma dense kernel's grid:
//                              dense_mha_wgmma.h)
// `tc` is the tensor-core kernel (mma.sync); it falls back to `simple` (plain fp32 FMA code, the
// correctness baseline) when an operand's alignment or the device does not allow it. `wgmma` is
// the Hopper kernel (warpgroup MMA; for dense MHA FlashAttention-3 style), compiled only for
// sm_90a when the configured CUDA architectures include 90; it falls back to `tc` (and so on)
// when it is not built, the device is not compute capability 9.0, or alignment or shared memory
// do not allow it. Any other value is an error. MLA_DENSE_WGMMA_DEBUG = scores | values makes the
// wgmma kernel write one isolated product instead (kernels/cuda/dense_mha_wgmma.h), and is an
// unsupported error when that kernel cannot run.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/common/attention_params.h"
#include "kernels/common/status.h"

namespace mla {

// gemm_cublas.cu: row-major strided-batched C = A op(B), bf16 in and out, fp32 compute
// (cuBLAS, CUBLAS_COMPUTE_32F, reduced-precision reductions disallowed). Sets the handle's
// stream, pointer mode and math mode for the call. stride_a / stride_b may be 0 (shared operand).
Status launch_gemm(const GemmParams& p, cudaStream_t stream, cublasHandle_t handle);

// sparse_mqa_kernel.cu: sparse MQA over the fp8_ds_mla cache per work item (one CTA per item and
// group of heads), then the combine of split tokens. Trusts the metadata (failure mode 4).
Status launch_sparse_mqa(const SparseMqaParams& p, cudaStream_t stream);

// The implementation ("wgmma", "tc" or "simple") launch_sparse_mqa / launch_dense_mha run on
// `device` for inputs that meet every alignment condition (mla-bench's and the backends' own
// buffers do), under the current MLA_SPARSE_MQA_IMPL / MLA_DENSE_MHA_IMPL; an error names a bad
// value. Lets reports say which kernels ran.
Status sparse_mqa_implementation(int device, std::string* name);
Status dense_mha_implementation(int device, std::string* name);
// The implementation launch_sparse_mqa / launch_dense_mha would run for these params (their
// alignment included) on `device`: what a test asserts so that a fallback cannot pass unseen.
Status sparse_mqa_implementation_for(const SparseMqaParams& p, int device, std::string* name);
Status dense_mha_implementation_for(const DenseMhaParams& p, int device, std::string* name);
// Whether this build has the sm_90a `wgmma` kernels (the configured architectures include 90).
bool wgmma_kernels_built();

// dense_mha_kernel.cu: varlen dense MHA, bottom-right causal or unmasked, grid sized from the host
// copies of cu_seqlens (one work item per request, query tile and head; the wgmma kernel runs them
// on a persistent grid).
Status launch_dense_mha(const DenseMhaParams& p, cudaStream_t stream);

// merge_kernel.cu: the two-way LSE merge, one warp per row (out may alias out_a / out_b, lse may
// alias lse_a / lse_b).
Status launch_merge(const MergeParams& p, cudaStream_t stream);

}  // namespace mla
