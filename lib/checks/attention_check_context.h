// What the attention checks receive: the cache-path context plus the scenario's attention data.
#pragma once

#include <string>
#include <vector>

#include "lib/batch/attention_data.h"
#include "lib/checks/check_context.h"
#include "lib/pipeline/forward_pipeline.h"
#include "reference/forward_reference.h"

namespace mla {

// The cache-path context (a CheckContext, so the cache-path helpers take it as it is) plus the
// attention data.
struct AttentionCheckContext : CheckContext {
  const AttentionData& data;

  AttentionCheckContext(Backend& backend, const Scenario& scenario, const Batch& batch, Injection injection,
                        const CacheData& cache, const AttentionData& data, CheckHooks hooks = {})
      : CheckContext{backend, scenario, batch, injection, cache, hooks}, data(data) {}
};

std::vector<CheckResult> run_sparse_mqa_check(const AttentionCheckContext& ctx);
std::vector<CheckResult> run_dense_mha_check(const AttentionCheckContext& ctx);
std::vector<CheckResult> run_forward_check(const AttentionCheckContext& ctx);
std::vector<CheckResult> run_equivalence_check(const AttentionCheckContext& ctx);
std::vector<CheckResult> run_dcp_check(const AttentionCheckContext& ctx);
std::vector<CheckResult> run_determinism_check(const AttentionCheckContext& ctx);
std::vector<CheckResult> run_drift_check(const AttentionCheckContext& ctx);  // lib/checks/drift_check.cpp

// The forward step's configuration from the scenario (routing as the scenario asks).
ForwardConfig forward_config(const AttentionCheckContext& ctx);

// A step's cosine budget grows with its context merges: each LSE merge rounds the running output
// to bf16 (relative error up to 2^-9, rms 2^-9 / sqrt(3)), and n of them add an expected relative
// squared error of n 2^-18 / 3, half of which is the cosine difference; doubled for a bound
// (docs/semantics.md §8). A negative cosine (not checked) stays so. The forward check's tolerance
// and the drift check's per-layer own error both count them.
Tolerance with_merges(Tolerance t, int64_t merges);

// Why the batch has no second route to compare (docs/semantics.md §4.3: no prefill, or a prefill
// longer than top-k); "" when its prefills can go either way.
std::string no_dense_route(const Batch& b, int32_t topk);

// The reference's dequantization rule for the backend's sparse_mqa: the rule the backend declares
// (docs/semantics.md §1.2 unless it declares another, §4.1).
ref::ScaleRounding reference_dequant(const Backend& backend);

// The reference step's inputs for a batch, its latents (every cached position's kv_c / k_pe rows,
// new tokens included) and its attention data, routed by the reference's own split rule; its
// sparse route dequantizes the cache by `sparse_dequant`.
ref::ForwardInputs reference_forward_inputs(const Scenario& s, const Batch& b, const CacheData& cache,
                                            const AttentionData& d, bool force_sparse, ref::NewTokenKv kv,
                                            ref::ScaleRounding sparse_dequant);
std::vector<CheckResult> run_merge_check(const AttentionCheckContext& ctx);

}  // namespace mla
