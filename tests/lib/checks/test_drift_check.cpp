// The drift check end to end on the host backend: its results, their determinism, the SKIP rules,
// and that a step with a wrong route fails that route's layers and only those.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "kernels/common/bf16.h"
#include "lib/backends/forwarding_backend.h"
#include "lib/run/scenario_run.h"

namespace mla {
namespace {

// 2 decodes (24 and 40 tokens), 2 prefills with cached context, 4 heads, K 64, 3 layers.
Scenario drift_scenario() {
  Scenario s;
  s.name = "drift_probe";
  s.file = "(test)";
  s.seed = 23;
  s.model.heads = 4;
  s.model.topk = 64;
  s.model.block_size = 16;
  s.batch.seq_lens = {24, 40, 30, 50};
  s.batch.query_lens = {1, 1, 12, 20};
  s.attention.workspace_rows = 64;
  s.attention.drift_layers = 3;
  s.checks = {CheckKind::kDrift};
  return s;
}

std::map<std::string, CheckResult> by_id(const ScenarioResult& r) {
  std::map<std::string, CheckResult> m;
  for (const auto& c : r.checks) m[c.id] = c;
  return m;
}

// The dense kernel's output scaled by 1.05: the dense route is 5 % off at every layer.
class ScaledDenseBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status dense_mha(const DenseMhaParams& p) override {
    Status s = inner().dense_mha(p);
    if (!s.ok()) return s;
    const int64_t n = p.total_q * p.num_heads * 128;  // host backend: device memory is host memory
    for (int64_t i = 0; i < n; ++i) p.out[i] = f32_to_bf16_rne(bf16_to_f32(p.out[i]) * 1.05f);
    return s;
  }
};

TEST(DriftCheck, PassesOnTheHostBackendWithOneResultPerRouteAndLayer) {
  auto backend = make_host_backend();
  const ScenarioResult r = run_scenario(drift_scenario(), *backend, Injection::kNone);
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_EQ(r.checks.size(), 6u);
  const auto results = by_id(r);
  for (const char* route : {"dense", "sparse"})
    for (int l = 1; l <= 3; ++l) {
      const std::string id = std::string("drift/") + route + "/layer[" + std::to_string(l) + "]";
      ASSERT_TRUE(results.count(id)) << id;
      const CheckResult& c = results.at(id);
      EXPECT_EQ(c.check, "drift");
      EXPECT_EQ(c.verdict, Verdict::kPass) << id << ": " << c.reason;
      EXPECT_EQ(c.metrics.elements, 34 * 4 * 128) << id;  // 34 new tokens
      EXPECT_EQ(c.metrics.extra.at("stream_elements"), 34.0 * 256) << id;
      EXPECT_EQ(c.metrics.extra.at("layer"), l);
      // Errors are there to be measured: a chain identical to the reference would prove nothing.
      EXPECT_GT(c.metrics.cos_diff, 0.0) << id;
      EXPECT_GT(c.metrics.extra.at("stream_cos_diff"), 0.0) << id;
      EXPECT_LE(c.metrics.cos_diff, c.metrics.cos_tolerance) << id;
      EXPECT_LE(c.metrics.extra.at("stream_cos_diff"), c.metrics.extra.at("stream_cos_tolerance")) << id;
    }
  // Layer 1's inputs are the same in every chain: its output bound is the step's tolerance, which
  // counts the dense step's context merges as the forward check does: the two prefills' 18 + 30
  // context rows fit the 64-row workspace, one chunk, one LSE merge of 2^-18 / 3.
  EXPECT_DOUBLE_EQ(results.at("drift/dense/layer[1]").metrics.cos_tolerance,
                   AttentionTolerances{}.forward.cos + std::ldexp(1.0, -18) / 3.0);
  // The sparse route reads the new tokens back from FP8: further from the reference than dense.
  EXPECT_GT(results.at("drift/sparse/layer[1]").metrics.cos_diff, results.at("drift/dense/layer[1]").metrics.cos_diff);
}

TEST(DriftCheck, IsDeterministic) {
  auto backend = make_host_backend();
  const ScenarioResult a = run_scenario(drift_scenario(), *backend, Injection::kNone);
  const ScenarioResult b = run_scenario(drift_scenario(), *backend, Injection::kNone);
  ASSERT_EQ(a.checks.size(), b.checks.size());
  for (size_t i = 0; i < a.checks.size(); ++i) {
    SCOPED_TRACE(a.checks[i].id);
    EXPECT_EQ(a.checks[i].id, b.checks[i].id);
    EXPECT_EQ(a.checks[i].metrics.cos_diff, b.checks[i].metrics.cos_diff);
    EXPECT_EQ(a.checks[i].metrics.max_abs_err, b.checks[i].metrics.max_abs_err);
    EXPECT_EQ(a.checks[i].metrics.extra.at("stream_cos_diff"), b.checks[i].metrics.extra.at("stream_cos_diff"));
    EXPECT_EQ(a.checks[i].metrics.cos_tolerance, b.checks[i].metrics.cos_tolerance);
  }
  // Another seed draws another stack.
  Scenario other = drift_scenario();
  other.seed = 24;
  const ScenarioResult c = run_scenario(other, *backend, Injection::kNone);
  EXPECT_NE(a.checks[0].metrics.cos_diff, c.checks[0].metrics.cos_diff);
}

TEST(DriftCheck, AWrongDenseStepFailsTheDenseRouteOnly) {
  auto host = make_host_backend();
  ScaledDenseBackend backend(*host);
  const ScenarioResult r = run_scenario(drift_scenario(), backend, Injection::kNone);
  ASSERT_TRUE(r.error.empty()) << r.error;
  for (const auto& c : r.checks) {
    if (c.id.rfind("drift/dense/", 0) == 0) {
      EXPECT_EQ(c.verdict, Verdict::kFail) << c.id;
      EXPECT_NE(c.reason.find("cosine difference"), std::string::npos) << c.reason;
    } else {
      EXPECT_EQ(c.verdict, Verdict::kPass) << c.id << ": " << c.reason;
    }
  }
}

TEST(DriftCheck, BoundsAreNotCheckedWhereTheStepsCosineIsNot) {
  auto host = make_host_backend();
  ScaledDenseBackend backend(*host);
  Scenario s = drift_scenario();
  s.attention.tolerances.forward.cos = -1.0;  // "not checked": the drift bounds derive from it
  const ScenarioResult r = run_scenario(s, backend, Injection::kNone);
  ASSERT_EQ(r.checks.size(), 6u);
  for (const auto& c : r.checks) {
    EXPECT_EQ(c.verdict, Verdict::kPass) << c.id << ": " << c.reason;
    EXPECT_TRUE(std::isnan(c.metrics.cos_tolerance)) << c.id;
  }
}

TEST(DriftCheck, SkipsWithoutASecondRoute) {
  auto backend = make_host_backend();
  Scenario decodes_only = drift_scenario();
  decodes_only.batch.seq_lens = {24, 40};
  decodes_only.batch.query_lens = {1, 1};
  Scenario long_prefill = drift_scenario();
  long_prefill.batch.seq_lens = {24, 40, 30, 70};  // 70 > K 64: the prefills go sparse either way
  for (const Scenario& s : {decodes_only, long_prefill}) {
    const ScenarioResult r = run_scenario(s, *backend, Injection::kNone);
    ASSERT_EQ(r.checks.size(), 1u);
    EXPECT_EQ(r.checks[0].id, "drift");
    EXPECT_EQ(r.checks[0].verdict, Verdict::kSkip);
    EXPECT_FALSE(r.checks[0].reason.empty());
  }
}

}  // namespace
}  // namespace mla
