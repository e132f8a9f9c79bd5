// The `wgmma` implementation of dense MHA (dense_mha_wgmma_kernel.cu, built only for sm_90a when
// MLA_HAVE_WGMMA is 1), called by launch_dense_mha (dense_mha_kernel.cu), which owns the
// choice between implementations, validation and grid sizing. Host-only declarations.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/status.h"
#include "kernels/cuda/dense_mha/dense_mha_args.h"

namespace mla::dense_wgmma {

inline constexpr int kRowsPerCta = 128;

// Keys per online-softmax step: one step per 128-key tile (the host backend, `simple` and `tc`
// step per kAttentionTile = 64). host::dense_mha(p, kSoftmaxStepKeys) is this kernel's algorithm,
// to the rounding the kernel's header lists (DenseMhaMatchesHost compares the two).
inline constexpr int kSoftmaxStepKeys = 128;

// Debug outputs (MLA_DENSE_WGMMA_DEBUG, read by the launcher), each isolating one product. Only
// key tile 0 (keys 0..127 of the request) is used, unmasked, and lse is written as 0 (requests
// without keys: out 0 and lse -inf as usual):
//   kScores: out[t, h, j] = bf16(scale * q_t . k_j) for j < 128 (0 for keys past the request):
//            the S = Q K^T wgmma (Q / K shared-memory layout and K-major descriptors) alone.
//   kValues: out[t, h, :] = v[j] with j = (query index in the request) % 128 (0 past the
//            request's keys): P = identity through the register-A / MN-major-V wgmma alone.
enum class Debug { kNone, kScores, kValues };

// How CTAs take the work items (launch()). The Debug kernels always run kGrid.
enum class Schedule { kPersistent, kGrid };

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
// over items past INT_MAX of them. MLA_DENSE_WGMMA_MAX_CTAS (a test hook) caps the CTAs of either
// schedule, so that the loop over items runs on small problems. Contract on top of
// DenseMhaParams::validate(): every input pointer 16-byte aligned and every token stride a
// multiple of 8 elements (what the TMA tensor maps need), out 16-byte aligned. An error if the
// driver cannot encode the tensor maps.
Status launch(const DenseArgs& args, Debug debug, Schedule schedule, cudaStream_t stream);

}  // namespace mla::dense_wgmma
