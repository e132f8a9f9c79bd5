// The implementations of dense MHA behind launch_dense_mha (dense_mha_launcher.cu, which owns
// validation, the choice between them and grid sizing): each launches its kernel for a DenseArgs
// block already filled and checked by the launcher. Host-only declarations.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/status.h"
#include "kernels/cuda/dense_mha/dense_mha_args.h"
#include "kernels/cuda/dense_mha/dense_mha_config.h"
#include "kernels/kernel_policy.h"

namespace mla {

// dense_mha_simple.cu: fp32 CUDA-core code, any alignment. grid = (args.q_tiles * requests, heads)
// with query tiles of dense_dev::kSimpleRows.
namespace dense_simple {
int smem_bytes();  // dynamic shared memory per CTA
Status launch(const DenseArgs& args, dim3 grid, cudaStream_t stream);
}  // namespace dense_simple

// dense_mha_tc.cu: mma.sync, query tiles of dense_dev::kTcRows. Contract on top of
// DenseMhaParams::validate(): every input 16-byte aligned with token strides that are multiples of
// 8 elements (cp.async), out 4-byte aligned.
namespace dense_tc {
int smem_bytes();
Status launch(const DenseArgs& args, dim3 grid, cudaStream_t stream);
}  // namespace dense_tc

// dense_mha_wgmma.cu, built only for sm_90a when MLA_HAVE_WGMMA is 1: FlashAttention-3 style.
namespace dense_wgmma {

// Debug outputs (KernelPolicy::dense_wgmma_debug), each isolating one product. Only key tile 0
// (keys 0..127 of the request) is used, unmasked, and lse is written as 0 (requests without keys:
// out 0 and lse -inf as usual):
//   kScores: out[t, h, j] = bf16(scale * q_t . k_j) for j < 128 (0 for keys past the request):
//            the S = Q K^T wgmma (Q / K shared-memory layout and K-major descriptors) alone.
//   kValues: out[t, h, :] = v[j] with j = (query index in the request) % 128 (0 past the
//            request's keys): P = identity through the register-A / MN-major-V wgmma alone.
using Debug = DenseWgmmaDebug;
// How CTAs take the work items (launch()). The Debug kernels always run kGrid.
using Schedule = DenseWgmmaSchedule;

// Dynamic shared memory per CTA (bytes).
int smem_bytes();

// True when `device` is compute capability 9.0, the sm_90a image of the kernels loads there and
// they were allocated the register count their setmaxnreg budget assumes (168 per thread).
// Clears the runtime error a failed probe leaves.
bool runs_on(int device);

// The work: one item per (request, 128-query tile, head), args.q_tiles * args.num_reqs *
// args.num_heads items (args.q_tiles counts tiles of kRowsPerCta, args.num_reqs the requests). By
// default a persistent grid of min(items, SMs) CTAs takes the items dynamically (an atomic counter
// and per-CTA item slots in device memory, one set per (device, stream), allocated on first use:
// launches on one stream run in order, so they never share it while running; each launch leaves
// the counters at zero for the next). Schedule::kGrid: one CTA per item in a 1-D grid, looping
// over items past INT_MAX of them. `max_ctas` > 0 caps the CTAs of either schedule (a test hook:
// the loop over items then runs on small problems). Contract on top of DenseMhaParams::validate():
// every input pointer 16-byte aligned and every token stride a multiple of 8 elements (what the
// TMA tensor maps need), out 16-byte aligned. An error if the driver cannot encode the tensor maps.
Status launch(const DenseArgs& args, Debug debug, Schedule schedule, int64_t max_ctas, cudaStream_t stream);

}  // namespace dense_wgmma

}  // namespace mla
