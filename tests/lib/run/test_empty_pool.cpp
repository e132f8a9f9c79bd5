// A batch whose cache pool has no page (every request has zero tokens and there are no spare
// pages), which the format accepts: materialise leaves the block table's stride padding at -1 (it
// read the first page of an empty pool), and every check runs to PASS or SKIP on the host backend
// (forward/cache reported ERROR, taking the empty cache for a step that did not complete).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "lib/backends/backend_choice.h"
#include "lib/batch/batch.h"
#include "lib/run/scenario_run.h"

namespace mla {
namespace {

Scenario empty_pool() {
  Scenario s;
  s.name = "empty_pool";
  s.model.heads = 16;
  s.model.topk = 64;
  s.batch.seq_lens = {0, 0};
  s.batch.query_lens = {0, 0};
  s.cache.spare_blocks = 0;
  s.cache.num_blocks = 0;
  s.block_table.extra_columns = 0;
  s.block_table.stride_padding = 3;
  GatherCase g;
  g.name = "nothing";
  g.workspace_starts = {0, 0};
  g.num_rows = 0;
  s.gathers = {g};
  ConvertCase c;
  c.name = "all";
  s.converts = {c};
  for (int i = 0; i <= static_cast<int>(kLastCheckKind); ++i) s.checks.push_back(static_cast<CheckKind>(i));
  return s;
}

TEST(EmptyPool, StridePaddingStaysMinusOne) {
  const Scenario s = empty_pool();
  ASSERT_FALSE(validate_scenario(s).has_value());
  const Batch b = materialise(s);
  EXPECT_EQ(b.layout.num_blocks, 0);
  EXPECT_EQ(b.layout.block_table_stride, 3);
  EXPECT_EQ(b.layout.block_table, std::vector<int32_t>(6, -1));
}

TEST(EmptyPool, EveryCheckPassesOrSkipsOnTheHost) {
  std::string error;
  BackendChoice host;
  host.kind = BackendChoice::Kind::kHost;
  auto backend = make_backend(host, &error);
  ASSERT_TRUE(backend) << error;
  const ScenarioResult r = run_scenario(empty_pool(), *backend, Injection::kNone);
  EXPECT_EQ(r.error, "");
  EXPECT_FALSE(r.checks.empty());
  for (const CheckResult& c : r.checks)
    EXPECT_TRUE(c.verdict == Verdict::kPass || c.verdict == Verdict::kSkip) << c.id << ": " << c.reason;
  EXPECT_TRUE(std::any_of(r.checks.begin(), r.checks.end(),
                          [](const CheckResult& c) { return c.id == "forward/cache" && c.verdict == Verdict::kPass; }));
}

}  // namespace
}  // namespace mla
