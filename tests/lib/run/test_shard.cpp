// --shard I/N (lib/run/shard.h): the spec's refusals; a partition that covers every scenario once,
// is a function of the set of names (not of their order), balances the recorded costs, and is
// stable: adding one scenario moves few others. The costs are the host baseline's durations
// (scenarios/baselines/host-report.json) and a synthetic heavy-tailed suite.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "lib/run/selection.h"
#include "lib/run/shard.h"

namespace mla {
namespace {

TEST(ShardSpec, Parses) {
  const auto ok = [](const std::string& t) { return std::get<ShardSpec>(parse_shard_spec(t)); };
  EXPECT_EQ(ok("1/1").index, 1);
  EXPECT_EQ(ok("3/8").index, 3);
  EXPECT_EQ(ok("3/8").count, 8);
  EXPECT_EQ(ok("100000/100000").count, 100000);
}

TEST(ShardSpec, RefusesWithAReason) {
  const auto bad = [](const std::string& t) { return std::get<std::string>(parse_shard_spec(t)); };
  EXPECT_NE(bad("0/3").find("count from 1"), std::string::npos);
  EXPECT_NE(bad("4/3").find("no shard 4 of 3"), std::string::npos);
  EXPECT_NE(bad("1/0").find("number of shards"), std::string::npos);
  for (const char* t : {"", "3", "/3", "1/", "a/b", "1/3/5", "-1/3", "+1/3", "1 /3", "1/3 ", "1.0/3", "1/1000000000000"})
    EXPECT_NE(bad(t).find("expected I/N"), std::string::npos) << "'" << t << "'";
}

std::map<std::string, double> baseline_costs() {
  auto loaded = load_recorded_costs(std::string(MLA_SOURCE_DIR) + "/scenarios/baselines/host-report.json");
  if (auto* e = std::get_if<std::string>(&loaded)) ADD_FAILURE() << *e;
  return std::get<std::map<std::string, double>>(loaded);
}

std::map<std::string, double> synthetic_costs(uint32_t seed, int n) {
  std::mt19937 gen(seed);
  std::lognormal_distribution<double> d(-1.0, 1.5);
  std::map<std::string, double> c;
  for (int i = 0; i < n; ++i) c["synthetic_" + std::to_string(i)] = d(gen);
  return c;
}

std::vector<std::string> names_of(const std::map<std::string, double>& costs) {
  std::vector<std::string> v;
  for (const auto& [n, c] : costs) v.push_back(n);
  return v;
}

std::map<std::string, int> assignment(const std::vector<std::string>& names, const std::map<std::string, double>& costs,
                                      int n) {
  const ShardPlan p = plan_shards(names, costs, n);
  std::map<std::string, int> a;
  for (size_t i = 0; i < names.size(); ++i) a[names[i]] = p.shard[i];
  return a;
}

TEST(ShardPlan, CoversEveryScenarioOnceWhateverTheOrderOfTheNames) {
  const auto costs = baseline_costs();
  std::vector<std::string> names = names_of(costs);
  ASSERT_GT(names.size(), 50u);
  for (int n : {1, 2, 3, 4, 8, 200}) {
    const ShardPlan p = plan_shards(names, costs, n);
    ASSERT_EQ(p.shard.size(), names.size());
    for (int k : p.shard) ASSERT_TRUE(k >= 0 && k < n);
    const auto sorted = assignment(names, costs, n);
    std::vector<std::string> shuffled = names;
    std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(n));
    EXPECT_EQ(assignment(shuffled, costs, n), sorted) << n << " shards";
  }
}

// The largest shard against what no partition can beat: the largest scenario, and the mean.
void expect_balanced(const std::map<std::string, double>& costs, int n, double slack, const std::string& what) {
  const std::vector<std::string> names = names_of(costs);
  const ShardPlan p = plan_shards(names, costs, n);
  const double total = std::accumulate(p.cost.begin(), p.cost.end(), 0.0);
  const double bound = std::max(total / n, *std::max_element(p.cost.begin(), p.cost.end()));
  const double worst = *std::max_element(p.load.begin(), p.load.end());
  EXPECT_LE(worst, slack * bound) << what << ", " << n << " shards: largest shard " << worst << " s, bound " << bound
                                  << " s (mean " << total / n << " s)";
  // The construction's own guarantee: a shard without a heavy scenario (one above half the mean)
  // exceeds the mean by at most the largest light scenario.
  double largest_light = 0.0;
  std::vector<bool> has_heavy(static_cast<size_t>(n), false);
  for (size_t i = 0; i < p.cost.size(); ++i) {
    if (p.cost[i] > total / n / 2) has_heavy[static_cast<size_t>(p.shard[i])] = true;
    else largest_light = std::max(largest_light, p.cost[i]);
  }
  for (int k = 0; k < n; ++k) {
    if (has_heavy[static_cast<size_t>(k)]) continue;
    EXPECT_LE(p.load[static_cast<size_t>(k)], total / n + largest_light + 1e-9) << what << ", shard " << k << " of " << n;
  }
}

TEST(ShardPlan, BalancesTheRecordedCosts) {
  const auto costs = baseline_costs();
  for (int n : {2, 3, 4, 8}) expect_balanced(costs, n, 1.15, "host baseline");
  for (uint32_t seed : {1u, 2u, 3u})
    for (int n : {2, 3, 4, 8, 16}) expect_balanced(synthetic_costs(seed, 300), n, 1.15, "synthetic " + std::to_string(seed));
}

TEST(ShardPlan, ScenariosWithoutARecordedCostCountAtTheMedian) {
  const std::map<std::string, double> costs = {{"a", 1.0}, {"b", 3.0}, {"c", 10.0}, {"zero", 0.0}};
  const ShardPlan p = plan_shards({"a", "b", "c", "new", "zero"}, costs, 2);
  // Recorded (floored at kMinScenarioCost): 1, 3, 10, 0.05 -> median (1 + 3) / 2.
  EXPECT_EQ(p.estimated, (std::vector<bool>{false, false, false, true, false}));
  EXPECT_DOUBLE_EQ(p.cost[3], 2.0);
  EXPECT_DOUBLE_EQ(p.cost[4], kMinScenarioCost);
  const ShardPlan none = plan_shards({"x", "y"}, {}, 2);
  EXPECT_EQ(none.cost, (std::vector<double>{1.0, 1.0}));
}

// Adding one scenario to a suite (each scenario of it in turn, as the one added last) moves few of
// the others: on average at most N / 2 + 1, usually none or one (the median), and never half of
// them. A partition by position in the sorted names or a greedy by cost moves tens.
void expect_stable(const std::map<std::string, double>& costs, int n, const std::string& what) {
  const std::vector<std::string> all = names_of(costs);
  const auto with_all = assignment(all, costs, n);
  std::vector<int> moved;
  for (const std::string& added : all) {
    std::vector<std::string> before;
    for (const auto& s : all)
      if (s != added) before.push_back(s);
    const auto without = assignment(before, costs, n);
    int m = 0;
    for (const auto& s : before) m += without.at(s) != with_all.at(s);
    moved.push_back(m);
  }
  std::vector<int> sorted = moved;
  std::sort(sorted.begin(), sorted.end());
  const double mean = std::accumulate(moved.begin(), moved.end(), 0.0) / moved.size();
  EXPECT_LE(mean, n / 2.0 + 1) << what << ", " << n << " shards";
  EXPECT_LE(sorted[sorted.size() / 2], 1) << what << ", " << n << " shards: median moved";
  EXPECT_LT(sorted.back(), static_cast<int>(all.size()) / 2) << what << ", " << n << " shards: most moved";
}

TEST(ShardPlan, AddingAScenarioMovesFewOthers) {
  const auto costs = baseline_costs();
  for (int n : {2, 3, 4, 8}) expect_stable(costs, n, "host baseline");
  for (int n : {2, 3, 4, 8}) expect_stable(synthetic_costs(7, 200), n, "synthetic");
}

TEST(ShardSelection, TheShardsOfTheSuiteAreDisjointAndCoverIt) {
  SelectionOptions o;
  o.scenario_dir = std::string(MLA_SOURCE_DIR) + "/scenarios/suite";
  auto selected = select_scenarios(o);
  ASSERT_TRUE(std::holds_alternative<std::vector<Scenario>>(selected));
  const auto& all = std::get<std::vector<Scenario>>(selected);
  std::vector<std::string> seen;
  for (int i = 1; i <= 3; ++i) {
    auto part = select_shard(std::to_string(i) + "/3", "", o.scenario_dir, all);
    ASSERT_TRUE(std::holds_alternative<ShardSelection>(part)) << std::get<std::string>(part);
    const ShardSelection& s = std::get<ShardSelection>(part);
    EXPECT_EQ(s.info.index, i);
    EXPECT_EQ(s.info.count, 3);
    EXPECT_EQ(s.info.selection.size(), all.size());
    EXPECT_NE(s.info.costs.find("host-report.json"), std::string::npos);  // the default, found beside the suite
    EXPECT_FALSE(s.scenarios.empty());
    // In the suite's order.
    for (size_t k = 1; k < s.scenarios.size(); ++k) EXPECT_LT(s.scenarios[k - 1].file, s.scenarios[k].file);
    for (const auto& sc : s.scenarios) seen.push_back(sc.name);
  }
  std::sort(seen.begin(), seen.end());
  std::vector<std::string> want;
  for (const auto& s : all) want.push_back(s.name);
  std::sort(want.begin(), want.end());
  EXPECT_EQ(seen, want);
  EXPECT_NE(std::get<std::string>(select_shard("", "x.json", o.scenario_dir, all)).find("needs --shard"), std::string::npos);
  EXPECT_NE(std::get<std::string>(select_shard("1/2", "/nonexistent.json", o.scenario_dir, all)).find("cannot read"),
            std::string::npos);
}

}  // namespace
}  // namespace mla
