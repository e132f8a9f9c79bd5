// The sparse MQA family's shared constants: what the launcher sizes grids with and what the
// implementations' kernels (sparse_mqa_simple.cu, sparse_mqa_tc.cu, sparse_mqa_wgmma.cu,
// sparse_mqa_crossover.cu) and their staging helpers (sparse_mqa_device.cuh) agree on. CUDA-free.
#pragma once

#include <cstdint>

namespace mla::sparse_dev {

inline constexpr int kTile = 64;  // top-k columns per tile (every implementation)

// Heads per CTA; blockIdx.x = item * head_groups + group with head_groups = ceil(num_heads / heads).
inline constexpr int kSimpleHeads = 16;
inline constexpr int kTcHeads = 64;
inline constexpr int kWgmmaHeads = 64;
inline constexpr int kCrossoverHeads = 64;  // per CTA; the two CTAs of a cluster: 128
// `auto` requests `crossover` from this top-k on (and where the head groups pair), `wgmma` below:
// on an H100 crossover took 0.67-0.82 of wgmma's time at top-k 512, 2048 and 8192 with 128 heads
// (0.97 at batch 1 x 2; every 128-head sparse shape of the attention sweep), while the forward step
// of `mixed_medium` at top-k 128 took 6 % longer with it than with wgmma, with the host's issue of
// the step's launches on its critical path (docs/performance.md, Forward step).
inline constexpr int32_t kCrossoverAutoMinTopk = 512;

// The staging helpers of the tensor-core kernels (`tc` and `wgmma`): 8 warps, 64 heads and
// 64-entry tiles per CTA.
inline constexpr int kStageWarps = 8;
inline constexpr int kStageHeads = 64;

}  // namespace mla::sparse_dev
