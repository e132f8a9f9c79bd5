// lib/run/selection: which scenarios and checks a run covers (mla-check's --scenario, --filter,
// --exclude-tag, --check, --seed), and the refusals, each naming what was wrong.
#include "lib/run/selection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
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

TEST(Selection, TwoFilesThatNameOneScenarioAreRefusedNamingBoth) {
  TempDir dir;
  const std::string a = dir.write("a.json", scenario_text("same", "", R"("pack")"));
  const std::string b = dir.write("sub/b.json", scenario_text("same", "", R"("pack")"));
  SelectionOptions o;
  o.scenario_dir = dir.path();
  const std::string m = refusal(o);  // the suite
  EXPECT_NE(m.find("'same'"), std::string::npos) << m;
  EXPECT_NE(m.find(a), std::string::npos) << m;
  EXPECT_NE(m.find(b), std::string::npos) << m;
  o.scenario_args = {a, b};  // given by path
  EXPECT_NE(refusal(o).find(b), std::string::npos);
  o.filter = "other";  // only the selected scenarios count
  o.scenario_args.clear();
  dir.write("c.json", scenario_text("other", "", R"("pack")"));
  EXPECT_EQ(names(selected(o)), (std::vector<std::string>{"other"}));
}

TEST(Selection, OneFileGivenTwiceRunsOnceWithANote) {
  TempDir dir;
  const std::string a = dir.write("a.json", scenario_text("mine", "", R"("pack")"));
  SelectionOptions o;
  o.scenario_dir = kSuite;
  o.scenario_args = {a, dir.path() + "/./a.json", "gather_block_size_1", kSuite + "/gather_block_size_1.json"};
  std::vector<std::string> notes;
  auto r = select_scenarios(o, &notes);
  ASSERT_TRUE(std::holds_alternative<std::vector<Scenario>>(r));
  EXPECT_EQ(names(std::get<std::vector<Scenario>>(r)), (std::vector<std::string>{"mine", "gather_block_size_1"}));
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[0].find("names the same file as --scenario " + a), std::string::npos) << notes[0];
  EXPECT_NE(notes[1].find("--scenario gather_block_size_1"), std::string::npos) << notes[1];
}

TEST(Selection, PathsThatCannotBeResolvedAreRefusedWithTheReason) {
  TempDir dir;
  const std::filesystem::path loop = std::filesystem::path(dir.path()) / "loop.json";
  std::filesystem::create_symlink("loop.json", loop);
  SelectionOptions o;
  o.scenario_dir = kSuite;
  o.scenario_args = {loop.string()};
  EXPECT_NE(refusal(o).find("Too many levels of symbolic links"), std::string::npos);
  o.scenario_args = {dir.path() + "/" + std::string(300, 'n') + ".json"};
  EXPECT_NE(refusal(o).find("File name too long"), std::string::npos);
  o.scenario_args = {""};
  EXPECT_NE(refusal(o).find("empty"), std::string::npos);
}

TEST(Selection, AnUnreadableEntryOfTheSuiteIsRefusedNotSkipped) {
  TempDir dir;
  dir.write("a.json", scenario_text("a", "", R"("pack")"));
  std::filesystem::create_symlink("z.json", std::filesystem::path(dir.path()) / "z.json");
  SelectionOptions o;
  o.scenario_dir = dir.path();
  const std::string m = refusal(o);
  EXPECT_NE(m.find("z.json: cannot be read: Too many levels of symbolic links"), std::string::npos) << m;
  // A name given explicitly does not need the broken entry.
  o.scenario_args = {dir.path() + "/a.json"};
  EXPECT_EQ(names(selected(o)), (std::vector<std::string>{"a"}));
}

TEST(Selection, ASuiteFolderThatIsNotOneIsRefused) {
  TempDir dir;
  SelectionOptions o;
  o.scenario_dir = dir.path() + "/absent";
  EXPECT_NE(refusal(o).find("No such file or directory"), std::string::npos);
  o.scenario_dir = dir.write("f.json", "{}");
  EXPECT_NE(refusal(o).find("is not a directory"), std::string::npos);
  o.scenario_dir = dir.path() + "/empty";
  std::filesystem::create_directories(o.scenario_dir);
  EXPECT_NE(refusal(o).find("holds no scenario file"), std::string::npos);
}

}  // namespace
}  // namespace mla
