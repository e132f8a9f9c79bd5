#include "lib/dcp/merge_tree.h"

#include "kernels/common/mla_dims.h"

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
    MergeParams m;
    m.out_a = out[static_cast<size_t>(step.into)];
    m.lse_a = lse[static_cast<size_t>(step.into)];
    m.out_b = out[static_cast<size_t>(step.from)];
    m.lse_b = lse[static_cast<size_t>(step.from)];
    m.out = out[static_cast<size_t>(step.into)];
    m.lse = lse[static_cast<size_t>(step.into)];
    m.rows = rows;
    m.width = kDc;
    const Status s = backend.merge(m);
    if (!s.ok()) return s;
  }
  return Status();
}

}  // namespace mla
