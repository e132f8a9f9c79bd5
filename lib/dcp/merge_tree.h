// The order in which the ranks' partial attentions are merged (docs/semantics.md §5): a balanced
// tree of the backend's two-way LSE merge, rank i absorbing rank i + s for s = 1, 2, 4, ..., so
// each output goes through ceil(log2 W) bf16 roundings (folding the ranks one after another would
// put up to W - 1 roundings on rank 0's share). The simulated dcp check and the distributed run
// both merge in this order, so that they compute the same bits from the same partials.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"

namespace mla {

struct DcpMergeStep {
  int32_t into;  // its (out, lse) become the merge of itself and `from`
  int32_t from;
};

// Every step in issue order; empty for world <= 1.
std::vector<DcpMergeStep> dcp_merge_steps(int32_t world);

// Runs dcp_merge_steps(out.size()) on the backend over per-rank partials in backend memory:
// out[r] bf16 [rows, 512], lse[r] float [rows]. The merged result is left in out[0], lse[0]; the
// other ranks' buffers are overwritten along the way. out and lse have one entry per rank.
Status merge_dcp_partials(Backend& backend, const std::vector<bf16_t*>& out, const std::vector<float*>& lse,
                          int64_t rows);

}  // namespace mla
