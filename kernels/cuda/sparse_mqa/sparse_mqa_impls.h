// The implementations of sparse MQA behind launch_sparse_mqa (sparse_mqa_launcher.cu, which owns
// validation, the choice between them, grid sizing and the combine step): each launches its
// kernel for a SparseArgs block already filled and checked by the launcher, one CTA per (work
// item, head group): grid = num_items * a.head_groups (heads per CTA: sparse_mqa_config.h).
// Host-only declarations.
#pragma once

#include <cuda_runtime.h>

#include "kernels/common/attention_params.h"
#include "kernels/common/status.h"
#include "kernels/cuda/sparse_mqa/sparse_mqa_device.cuh"

namespace mla {

// sparse_mqa_simple.cu: fp32 CUDA-core code, any alignment. `cache_vec`: the cache base is 16-byte
// aligned and the page stride a multiple of 16 (16-byte loads of the entries).
namespace sparse_simple {
int smem_bytes();  // dynamic shared memory per CTA
Status launch(const sparse_dev::SparseArgs& a, dim3 grid, bool cache_vec, cudaStream_t stream);
}  // namespace sparse_simple

// sparse_mqa_tc.cu: mma.sync. Contract on top of SparseMqaParams::validate(): the cache 16-byte
// aligned with a page stride that is a multiple of 16, out_lat 4-byte and partial_out 8-byte
// aligned (q any alignment, as a.q_vec says).
namespace sparse_tc {
int smem_bytes();
Status launch(const sparse_dev::SparseArgs& a, dim3 grid, cudaStream_t stream);
}  // namespace sparse_tc

// sparse_mqa_wgmma.cu, built only for sm_90a when MLA_HAVE_WGMMA is 1: warpgroup MMA. The `tc`
// contract.
namespace sparse_wgmma {
int smem_bytes();
// True when `device` is compute capability 9.0 and the sm_90a image of the kernel loads there.
// Cached per device; clears the runtime error a failed probe leaves.
bool runs_on(int device);
Status launch(const sparse_dev::SparseArgs& a, dim3 grid, cudaStream_t stream);
}  // namespace sparse_wgmma

// sparse_mqa_crossover.cu, built only for sm_90a when MLA_HAVE_WGMMA is 1: warpgroup MMA with the
// key dequantization split between the two CTAs of a cluster (clusters of 2 adjacent CTAs: the
// grid's head_groups must be even, else launch returns an error without launching). The `tc`
// contract.
namespace sparse_crossover {
int smem_bytes();
// True when `device` is compute capability 9.0, the sm_90a image of the kernel loads there with
// the register count its setmaxnreg budget assumes, and a cluster of two of its CTAs fits. Cached
// per device; clears the runtime error a failed probe leaves.
bool runs_on(int device);
Status launch(const sparse_dev::SparseArgs& a, dim3 grid, cudaStream_t stream);
}  // namespace sparse_crossover

// sparse_mqa_combine.cu: merges the fp32 partials of the tokens whose top-k range the plan split
// (split_offsets[t + 1] > split_offsets[t]) into out_lat and lse; one warp per (planned token, head).
namespace sparse_combine {
Status launch(const SparseMqaParams& p, cudaStream_t stream);
}  // namespace sparse_combine

}  // namespace mla
