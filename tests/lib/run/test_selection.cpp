// lib/run/selection: which scenarios and checks a run covers (mla-check's --scenario, --filter,
// --exclude-tag, --check, --seed), and the refusals, each naming what was wrong.
#include "lib/run/selection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "tests/common/temp_dir.h"

namespace mla {
namespace {

using test::TempDir;

const std::string kSuite = std::string(MLA_SOURCE_DIR) + "/scenarios/suite";

std::string scenario_text(const std::string& name, const std::string& tags, const std::string& checks) {
  return R"({"schema": "mla-scenario/1", "name": ")" + name + R"(", "tags": [)" + tags +
         R"(], "batch": {"seq_lens": [40, 20], "query_lens": [1, 20]}, "checks": [)" + checks + "]}";
}

std::vector<Scenario> selected(const SelectionOptions& o) {
  auto r = select_scenarios(o);
  if (auto* e = std::get_if<SelectionError>(&r)) {
    ADD_FAILURE() << "unexpected refusal: " << e->message;
    return {};
  }
  return std::get<std::vector<Scenario>>(std::move(r));
}

std::string refusal(const SelectionOptions& o) {
  auto r = select_scenarios(o);
  if (auto* e = std::get_if<SelectionError>(&r)) return e->message;
  ADD_FAILURE() << "selection was expected to be refused";
  return "";
}

std::vector<std::string> names(const std::vector<Scenario>& v) {
  std::vector<std::string> out;
  for (const auto& s : v) out.push_back(s.name);
  return out;
}

TEST(Selection, TheWholeSuiteInPathOrder) {
  SelectionOptions o;
  o.scenario_dir = kSuite;
  const auto all = selected(o);
  ASSERT_EQ(all.size(), list_scenario_files(kSuite).size());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].file, list_scenario_files(kSuite)[i]);
}

TEST(Selection, ScenarioArgumentsArePathsOrShippedNamesInTheOrderGiven) {
  TempDir dir;
  const std::string mine = dir.write("mine.json", scenario_text("mine", "", R"("pack")"));
  SelectionOptions o;
  o.scenario_dir = kSuite;
  o.scenario_args = {"gather_block_size_1", mine};
  EXPECT_EQ(names(selected(o)), (std::vector<std::string>{"gather_block_size_1", "mine"}));
}

TEST(Selection, AnUnknownScenarioIsRefusedByName) {
  SelectionOptions o;
  o.scenario_dir = kSuite;
  o.scenario_args = {"no_such_scenario"};
  const std::string m = refusal(o);
  EXPECT_NE(m.find("--scenario no_such_scenario"), std::string::npos) << m;
  EXPECT_NE(m.find(kSuite), std::string::npos) << m;
}

TEST(Selection, AnInvalidFileIsRefusedWithItsPathAndProblem) {
  TempDir dir;
  const std::string bad = dir.write("bad.json", R"({"schema": "mla-scenario/1", "name": "bad", "nonsense": 1})");
  SelectionOptions o;
  o.scenario_dir = dir.path();
  const std::string m = refusal(o);
  EXPECT_NE(m.find(bad), std::string::npos) << m;
  EXPECT_NE(m.find("/nonsense"), std::string::npos) << m;
}

TEST(Selection, FilterIsAGlobOrASubstring) {
  TempDir dir;
  dir.write("a.json", scenario_text("alpha_one", "", R"("pack")"));
  dir.write("b.json", scenario_text("beta_one", "", R"("pack")"));
  dir.write("c.json", scenario_text("alpha_two", "", R"("pack")"));
  SelectionOptions o;
  o.scenario_dir = dir.path();
  o.filter = "alpha_*";
  EXPECT_EQ(names(selected(o)), (std::vector<std::string>{"alpha_one", "alpha_two"}));
  o.filter = "_one";
  EXPECT_EQ(names(selected(o)), (std::vector<std::string>{"alpha_one", "beta_one"}));
  o.filter = "gamma";
  EXPECT_NE(refusal(o).find("no scenario matches --filter 'gamma'"), std::string::npos);
}

TEST(Selection, ExcludedTagsLeaveTheirScenariosOut) {
  TempDir dir;
  dir.write("a.json", scenario_text("tagged", R"("gpu-only", "x")", R"("pack")"));
  dir.write("b.json", scenario_text("plain", R"("x")", R"("pack")"));
  SelectionOptions o;
  o.scenario_dir = dir.path();
  o.exclude_tags = {"gpu-only"};
  EXPECT_EQ(names(selected(o)), (std::vector<std::string>{"plain"}));
}

TEST(Selection, OnlyChecksKeepTheScenarioOrderAndDropScenariosWithoutThem) {
  TempDir dir;
  dir.write("a.json", scenario_text("cache", "", R"("layout", "pack", "convert")"));
  dir.write("b.json", scenario_text("attention", "", R"("sparse_mqa", "pack")"));
  dir.write("c.json", scenario_text("layout_only", "", R"("layout")"));
  SelectionOptions o;
  o.scenario_dir = dir.path();
  o.only_checks = {CheckKind::kConvert, CheckKind::kPack};
  const auto v = selected(o);
  ASSERT_EQ(names(v), (std::vector<std::string>{"cache", "attention"}));
  EXPECT_EQ(v[0].checks, (std::vector<CheckKind>{CheckKind::kPack, CheckKind::kConvert}));
  EXPECT_FALSE(v[0].attention_checks_removed);
  EXPECT_EQ(v[1].checks, (std::vector<CheckKind>{CheckKind::kPack}));
  EXPECT_TRUE(v[1].attention_checks_removed) << "the attention inputs are still generated as in a whole run";
}

TEST(Selection, TheSeedOverrideReachesEveryScenario) {
  SelectionOptions o;
  o.scenario_dir = kSuite;
  o.scenario_args = {"gather_block_size_1", "convert_dcp_2_ranks"};
  o.seed = 12345;
  for (const auto& s : selected(o)) EXPECT_EQ(s.seed, 12345u) << s.name;
}

}  // namespace
}  // namespace mla
