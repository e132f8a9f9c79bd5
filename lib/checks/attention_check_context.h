// What the attention checks receive: the cache-path context plus the scenario's attention data.
#pragma once

#include <vector>

#include "lib/batch/attention_data.h"
#include "lib/checks/check_context.h"

namespace mla {

struct AttentionCheckContext {
  Backend& backend;
  const Scenario& scenario;
  const Batch& batch;
  Injection injection = Injection::kNone;
  const CacheData& cache;
  const AttentionData& data;
  CheckHooks hooks = {};
};

std::vector<CheckResult> run_sparse_mqa_check(const AttentionCheckContext& ctx);
std::vector<CheckResult> run_dense_mha_check(const AttentionCheckContext& ctx);
std::vector<CheckResult> run_forward_check(const AttentionCheckContext& ctx);
std::vector<CheckResult> run_equivalence_check(const AttentionCheckContext& ctx);
std::vector<CheckResult> run_dcp_check(const AttentionCheckContext& ctx);
std::vector<CheckResult> run_determinism_check(const AttentionCheckContext& ctx);
std::vector<CheckResult> run_merge_check(const AttentionCheckContext& ctx);

}  // namespace mla
