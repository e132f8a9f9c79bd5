// The drift check in the scenario format: its name, the attention.drift object and its rules.
#include <gtest/gtest.h>

#include <string>

#include "lib/scenario/scenario.h"
#include "tests/common/temp_dir.h"

namespace mla {
namespace {

using test::TempDir;

std::variant<Scenario, ScenarioError> load_text(const std::string& attention) {
  TempDir dir;
  const std::string file = dir.write("drift.json", R"({"name": "d", "batch": {"seq_lens": [40, 60], "query_lens": [1, 9]},
    "checks": ["drift"])" + attention + "}");
  return load_scenario(file);
}

TEST(ScenarioDrift, CheckNameRoundTripsAndIsAnAttentionCheck) {
  EXPECT_EQ(check_kind_from_string("drift"), CheckKind::kDrift);
  EXPECT_STREQ(to_string(CheckKind::kDrift), "drift");
  EXPECT_TRUE(is_attention_check(CheckKind::kDrift));
  EXPECT_NE(check_kind_names().find("drift"), std::string::npos);
}

TEST(ScenarioDrift, LayersDefaultToEight) {
  const auto r = load_text("");
  ASSERT_TRUE(std::holds_alternative<Scenario>(r)) << std::get<ScenarioError>(r).to_string();
  const Scenario& s = std::get<Scenario>(r);
  EXPECT_EQ(s.checks, std::vector<CheckKind>{CheckKind::kDrift});
  EXPECT_EQ(s.attention.drift_layers, 8);
}

TEST(ScenarioDrift, LayersAreRead) {
  for (const int layers : {1, 17, 61}) {
    const auto r = load_text(R"(, "attention": {"drift": {"layers": )" + std::to_string(layers) + "}}");
    ASSERT_TRUE(std::holds_alternative<Scenario>(r)) << std::get<ScenarioError>(r).to_string();
    EXPECT_EQ(std::get<Scenario>(r).attention.drift_layers, layers);
  }
}

TEST(ScenarioDrift, BadValuesNameTheirPath) {
  struct Bad {
    std::string attention, path, words;
  };
  const Bad cases[] = {
      {R"({"drift": {"layers": 0}})", "/attention/drift/layers", "[1, 61]"},
      {R"({"drift": {"layers": 62}})", "/attention/drift/layers", "[1, 61]"},
      {R"({"drift": {"layers": 8.5}})", "/attention/drift/layers", "expected an integer"},
      {R"({"drift": {"layer": 8}})", "/attention/drift/layer", "did you mean \"layers\""},
      {R"({"drift": 8})", "/attention/drift", "expected an object"},
  };
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.attention);
    const auto r = load_text(R"(, "attention": )" + c.attention);
    ASSERT_TRUE(std::holds_alternative<ScenarioError>(r));
    const ScenarioError& e = std::get<ScenarioError>(r);
    EXPECT_EQ(e.json_path, c.path);
    EXPECT_NE(e.problem.find(c.words), std::string::npos) << e.problem;
  }
}

}  // namespace
}  // namespace mla
