// The merge check (docs/semantics.md §4.2's edge rows): the host merge passes; merges that break
// the rule for non-finite LSEs fail it.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "kernels/common/bf16.h"
#include "lib/backends/forwarding_backend.h"
#include "lib/run/scenario_run.h"
#include "tests/common/small_scenario.h"

namespace mla {
namespace {

enum class MergeBug {
  kNoSanitize,       // +inf and NaN LSEs taken as numbers
  kMultiplyZeroSide, // the side of weight zero multiplied in: 0 * NaN leaks
  kPlusInfEmpty,     // both sides empty: lse +inf (FlashMLA's marker) instead of -inf
};

// A merge written on the host (the backend's memory is host memory) with one bug.
class BrokenMerge final : public ForwardingBackend {
 public:
  BrokenMerge(Backend& inner, MergeBug bug) : ForwardingBackend(inner), bug_(bug) {}
  Status merge(const MergeParams& p) override {
    for (int64_t row = 0; row < p.rows; ++row) {
      float la = p.lse_a[row], lb = p.lse_b[row];
      if (bug_ != MergeBug::kNoSanitize) {
        if (std::isnan(la) || la == INFINITY) la = -INFINITY;
        if (std::isnan(lb) || lb == INFINITY) lb = -INFINITY;
      }
      const float m = std::fmax(la, lb);
      std::vector<bf16_t> a(p.out_a + row * p.width, p.out_a + (row + 1) * p.width);
      if (m == -INFINITY) {
        for (int32_t e = 0; e < p.width; ++e) p.out[row * p.width + e] = a[static_cast<size_t>(e)];
        p.lse[row] = bug_ == MergeBug::kPlusInfEmpty ? INFINITY : -INFINITY;
        continue;
      }
      const float wa = std::exp(la - m), wb = std::exp(lb - m);
      for (int32_t e = 0; e < p.width; ++e) {
        float num = 0.0f;
        const float va = bf16_to_f32(a[static_cast<size_t>(e)]), vb = bf16_to_f32(p.out_b[row * p.width + e]);
        if (bug_ == MergeBug::kMultiplyZeroSide || wa != 0.0f) num += wa * va;
        if (bug_ == MergeBug::kMultiplyZeroSide || wb != 0.0f) num += wb * vb;
        p.out[row * p.width + e] = f32_to_bf16_rne(num / (wa + wb));
      }
      p.lse[row] = m + std::log(wa + wb);
    }
    return Status();
  }

 private:
  MergeBug bug_;
};

Scenario merge_scenario() {
  Scenario s = test::small_scenario("merge_probe", 9, 2, 64, 64, {8}, {1});
  s.checks = {CheckKind::kMerge};
  return s;
}

TEST(MergeCheck, TheHostMergePassesBitForBit) {
  const std::unique_ptr<Backend> host = make_host_backend();
  const ScenarioResult r = run_scenario(merge_scenario(), *host, Injection::kNone);
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_EQ(r.checks.size(), 2u);
  for (const auto& c : r.checks) {
    EXPECT_EQ(c.verdict, Verdict::kPass) << c.id << ": " << c.reason;
    EXPECT_TRUE(c.metrics.bit_exact.value_or(false)) << c.id;
    EXPECT_EQ(c.metrics.extra.at("rows"), 60.0) << c.id;  // 15 LSE pairs x 4 rows
  }
}

TEST(MergeCheck, EachBrokenRuleFails) {
  const std::unique_ptr<Backend> host = make_host_backend();
  for (MergeBug bug : {MergeBug::kNoSanitize, MergeBug::kMultiplyZeroSide, MergeBug::kPlusInfEmpty}) {
    BrokenMerge broken(*host, bug);
    const ScenarioResult r = run_scenario(merge_scenario(), broken, Injection::kNone);
    ASSERT_TRUE(r.error.empty()) << r.error;
    for (const auto& c : r.checks) EXPECT_EQ(c.verdict, Verdict::kFail) << static_cast<int>(bug) << " " << c.id;
  }
}

}  // namespace
}  // namespace mla
