// The dense MHA family's shared constants: what the launcher sizes grids with and what the
// implementations (dense_mha_simple.cu, dense_mha_tc.cu, dense_mha_wgmma.cu) agree on. CUDA-free.
#pragma once

namespace mla {

namespace dense_dev {
// Keys per tile and per online-softmax step of `simple` and `tc` (the host backend's step,
// kAttentionTile).
inline constexpr int kKeyTile = 64;
// Query rows per CTA (grid: ceil(longest request / rows) x requests, x heads).
inline constexpr int kSimpleRows = 16;
inline constexpr int kTcRows = 64;
}  // namespace dense_dev

namespace dense_wgmma {
// Query rows per work item (request, query tile, head).
inline constexpr int kRowsPerCta = 128;
// Keys per online-softmax step: one step per 128-key tile. host::dense_mha(p, kSoftmaxStepKeys) is
// this kernel's algorithm, to the rounding dense_mha_wgmma.cu lists (DenseMhaMatchesHost compares
// the two).
inline constexpr int kSoftmaxStepKeys = 128;
}  // namespace dense_wgmma

}  // namespace mla
