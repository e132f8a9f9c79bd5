#include "lib/dcp/merge_tree.h"

#include "kernels/common/mla_dims.h"
#include "lib/pipeline/attention_call.h"

namespace mla {

std::vector<DcpMergeStep> dcp_merge_steps(int32_t world) {
  std::vector<DcpMergeStep> steps;
  for (int32_t s = 1; s < world; s *= 2)
    for (int32_t i = 0; i + s < world; i += 2 * s) steps.push_back({i, i + s});
  return steps;
}

Status merge_dcp_partials(Backend& backend, const std::vector<bf16_t*>& out, const std::vector<float*>& lse,
                          int64_t rows) {
  if (out.size() != lse.size()) return Status::error("merge_dcp_partials: as many LSE buffers as outputs needed");
  for (const DcpMergeStep& step : dcp_merge_steps(static_cast<int32_t>(out.size()))) {
    const size_t into = static_cast<size_t>(step.into), from = static_cast<size_t>(step.from);
    const Status s = backend.merge(merge_in_place_params(out[into], lse[into], out[from], lse[from], rows, kDc));
    if (!s.ok()) return s;
  }
  return Status();
}

}  // namespace mla
