// The `wgmma` implementation of sparse MQA (sparse_mqa_wgmma_kernel.cu, built only for sm_90a when
// MLA_HAVE_WGMMA is 1), called by launch_sparse_mqa (sparse_mqa_kernel.cu), which owns the choice
// between implementations, validation, the combine step and grid sizing.
#pragma once

#include <cuda_runtime.h>

#include "kernels/common/status.h"
#include "kernels/cuda/sparse_mqa/sparse_mqa_device.cuh"

namespace mla::sparse_wgmma {

// Heads per CTA (a.head_groups = ceil(num_heads / kHeadsPerCta)).
inline constexpr int kHeadsPerCta = 64;

// Dynamic shared memory per CTA (bytes).
int smem_bytes();

// True when `device` is compute capability 9.0 and the sm_90a image of the kernel loads there.
// Cached per device; clears the runtime error a failed probe leaves.
bool runs_on(int device);

// One CTA (256 threads) per (work item, group of 64 heads): grid = num_items * a.head_groups.
// Contract on top of SparseMqaParams::validate(): the cache 16-byte aligned with a page stride
// that is a multiple of 16, out_lat 4-byte and partial_out 8-byte aligned (q any alignment, as
// a.q_vec says).
Status launch(const sparse_dev::SparseArgs& a, dim3 grid, cudaStream_t stream);

}  // namespace mla::sparse_wgmma
