// Pinned values reach the backend exactly as written, and the reference gets the same inputs: the
// convert check's req_id and indices, the sparse kernel's slots, the forward step's picks.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "lib/backends/forwarding_backend.h"
#include "lib/run/scenario_run.h"
#include "tests/common/small_scenario.h"

namespace mla {
namespace {

// Records the req_id and indices of every convert call and the indices of every sparse-MQA call
// (host memory: the inner backend is the host backend).
class InputRecorder final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status convert(const ConvertParams& p) override {
    req_ids.emplace_back(p.req_id, p.req_id + p.num_tokens);
    std::vector<int32_t> rows;
    for (int64_t t = 0; t < p.indices_rows; ++t)
      rows.insert(rows.end(), p.indices + t * p.indices_row_stride, p.indices + t * p.indices_row_stride + p.topk);
    indices.push_back(rows);
    return inner().convert(p);
  }
  Status sparse_mqa(const SparseMqaParams& p) override {
    std::vector<int32_t> rows;
    for (int64_t t = 0; t < p.num_tokens; ++t)
      rows.insert(rows.end(), p.indices + t * p.indices_row_stride, p.indices + t * p.indices_row_stride + p.topk);
    sparse_indices.push_back(rows);
    return inner().sparse_mqa(p);
  }
  std::vector<std::vector<int32_t>> req_ids, indices, sparse_indices;
};

Scenario base() { return test::small_scenario("pinned_inputs", 3, 4, 4, 16, {40, 20, 30}, {1, 1, 2}); }

TEST(PinnedInputs, ConvertTakesReqIdAndIndicesAsWritten) {
  Scenario s = base();
  ConvertCase c;
  c.name = "pinned";
  c.rows = ConvertRows::kAll;
  c.req_id = std::vector<int32_t>{2, 0, 7, 1};
  c.indices = IndexRows{{-123456, 114514, INT32_MAX, 48}, {}, {0, 1}, {INT32_MIN, 47, 15, 16}};
  s.converts = {c};
  s.checks = {CheckKind::kConvert};
  const std::unique_ptr<Backend> host = make_host_backend();
  InputRecorder rec(*host);
  const ScenarioResult r = run_scenario(s, rec, Injection::kNone);
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_EQ(r.checks.size(), 1u);
  EXPECT_EQ(r.checks[0].verdict, Verdict::kPass) << r.checks[0].reason;
  ASSERT_EQ(rec.req_ids.size(), 1u);
  EXPECT_EQ(rec.req_ids[0], *c.req_id);
  EXPECT_EQ(rec.indices[0], (std::vector<int32_t>{-123456, 114514, INT32_MAX, 48, -1, -1, -1, -1, 0, 1, -1, -1,
                                                  INT32_MIN, 47, 15, 16}));
}

TEST(PinnedInputs, SparseKernelTakesPinnedSlotsAndPinnedPicksUnmixed) {
  Scenario s = base();
  s.checks = {CheckKind::kSparseMqa};
  // Slots: the pool holds 3 + 2 + 2 pages + 4 spare = 11 pages of 16 slots: capacity 176.
  s.attention.sparse_mqa_slots = IndexRows{{176, 175, 0}, {INT32_MAX}, {}, {-1, 3, 177, 17}};
  const std::unique_ptr<Backend> host = make_host_backend();
  {
    InputRecorder rec(*host);
    const ScenarioResult r = run_scenario(s, rec, Injection::kNone);
    ASSERT_TRUE(r.error.empty()) << r.error;
    for (const auto& c : r.checks) EXPECT_NE(c.verdict, Verdict::kError) << c.id << ": " << c.reason;
    ASSERT_FALSE(rec.sparse_indices.empty());
    for (const auto& got : rec.sparse_indices)
      EXPECT_EQ(got, (std::vector<int32_t>{176, 175, 0, -1, INT32_MAX, -1, -1, -1, -1, -1, -1, -1, -1, 3, 177, 17}));
  }
  // Pinned picks: converted by the reference, nothing mixed in (every unpicked column stays -1).
  s.attention.sparse_mqa_slots.reset();
  s.attention.topk_positions = IndexRows{{0, 39}, {-1}, {}, {29, 28, 0, INT32_MAX}};
  InputRecorder rec(*host);
  const ScenarioResult r = run_scenario(s, rec, Injection::kNone);
  ASSERT_TRUE(r.error.empty()) << r.error;
  for (const auto& c : r.checks) EXPECT_FALSE(is_failure(c.verdict)) << c.id << ": " << c.reason;
  ASSERT_FALSE(rec.sparse_indices.empty());
  const std::vector<int32_t>& got = rec.sparse_indices.front();
  ASSERT_EQ(got.size(), 16u);
  for (size_t j : {2u, 3u, 4u, 5u, 6u, 7u, 8u, 9u, 10u, 11u, 15u}) EXPECT_EQ(got[j], -1) << j;
  for (size_t j : {0u, 1u, 12u, 13u, 14u}) EXPECT_GE(got[j], 0) << j;
}

TEST(PinnedInputs, TheForwardStepConvertsThePinnedPicks) {
  Scenario s = base();
  s.checks = {CheckKind::kForward};
  s.attention.force_sparse = true;
  s.attention.topk_positions = IndexRows{{0, 39}, {-1}, {}, {29, 28, 0, INT32_MAX}};
  const std::unique_ptr<Backend> host = make_host_backend();
  InputRecorder rec(*host);
  const ScenarioResult r = run_scenario(s, rec, Injection::kNone);
  ASSERT_TRUE(r.error.empty()) << r.error;
  for (const auto& c : r.checks) EXPECT_EQ(c.verdict, Verdict::kPass) << c.id << ": " << c.reason;
  ASSERT_EQ(rec.indices.size(), 1u);
  EXPECT_EQ(rec.indices[0], (std::vector<int32_t>{0, 39, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 29, 28, 0, INT32_MAX}));
}

TEST(PinnedInputs, ThePinnedDecodeCountSplitsTheForwardStep) {
  Scenario s = base();
  s.batch.query_lens = {1, 1, 1};
  s.batch.num_decodes = 1;  // requests 1 and 2 are 1-token prefills, dense (they fit in top-k 64)
  s.model.topk = 64;
  s.checks = {CheckKind::kForward, CheckKind::kEquivalence};
  const std::unique_ptr<Backend> host = make_host_backend();
  const ScenarioResult r = run_scenario(s, *host, Injection::kNone);
  ASSERT_TRUE(r.error.empty()) << r.error;
  for (const auto& c : r.checks) EXPECT_EQ(c.verdict, Verdict::kPass) << c.id << ": " << c.reason;
  ASSERT_FALSE(r.checks.empty());
  EXPECT_EQ(r.checks[0].metrics.extra.at("num_decodes"), 1.0);
  EXPECT_EQ(r.checks[0].metrics.extra.at("sparse_tokens"), 1.0);
  EXPECT_EQ(r.checks[0].metrics.extra.at("prefills_dense"), 1.0);
}

}  // namespace
}  // namespace mla
