// lib/scenario/scenario_writer: what it writes loads back to an equal Scenario (the shipped suite,
// and scenarios built in code with every field away from its default), defaults are left out,
// and a scenario that could not be loaded is not written.
#include "lib/scenario/scenario_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "tests/common/scenario_equal.h"
#include "tests/common/temp_dir.h"

namespace mla {
namespace {

using test::scenario_difference;
using test::TempDir;

Scenario load_ok(const std::string& file) {
  auto result = load_scenario(file);
  if (auto* err = std::get_if<ScenarioError>(&result)) {
    ADD_FAILURE() << "unexpected error: " << err->to_string();
    return Scenario{};
  }
  return std::get<Scenario>(result);
}

// Writes s, loads the file, and returns what was loaded.
Scenario round_trip(const Scenario& s, const TempDir& dir) {
  const std::string path = dir.path() + "/" + s.name + ".json";
  const Status st = write_scenario_file(path, s);
  EXPECT_TRUE(st.ok()) << st.message();
  return load_ok(path);
}

// A scenario built in code: two decodes and two prefills, every optional field set away from its
// default, num_blocks resolved as load_scenario resolves it.
Scenario everything_set() {
  Scenario s;
  s.name = "everything.set-1";
  s.description = "every field \"quoted\" and\nmulti-line";
  s.tags = {"fuzz", "edge"};
  s.seed = UINT64_MAX;
  s.model = {32, 192, 16, 0.0731};
  s.cache.dtype = "fp8_ds_mla";
  s.cache.spare_blocks = 3;
  s.cache.page_order = PageOrder::kReversed;
  s.cache.page_padding_bytes = 48;
  s.block_table.extra_columns = 2;
  s.block_table.stride_padding = 5;
  s.batch.seq_lens = {40, 41, 100, 0};
  s.batch.query_lens = {2, 2, 30, 0};
  s.batch.decode_threshold = 3;
  s.cache.num_blocks = blocks_needed(s.batch, 16) + 3;
  GatherCase chunked;
  chunked.name = "chunks";
  chunked.chunked_context_rows = 7;
  GatherCase starts;
  starts.name = "starts";
  starts.workspace_starts = {2, 5, 5, 9};
  starts.seq_starts = std::vector<int32_t>{0, 39, 1000, 3};
  starts.num_rows = 9;
  GatherCase no_starts;
  no_starts.name = "no_starts";
  no_starts.workspace_starts = {0, 0, 1, 1};
  no_starts.num_rows = 1;
  s.gathers = {chunked, starts, no_starts};
  ConvertCase decode;
  decode.name = "decode";
  decode.rows = ConvertRows::kDecode;
  decode.invalid = {0.05, 0.0, 0.02, 0.13, 0.07};
  decode.dcp_world_size = 4;
  decode.dcp_interleave = 8;
  ConvertCase workspace;
  workspace.name = "workspace";
  workspace.prefill_workspace = true;
  s.converts = {decode, workspace};
  s.checks = {CheckKind::kPack, CheckKind::kConvert, CheckKind::kGather, CheckKind::kDcp, CheckKind::kForward};
  s.attention.force_sparse = true;
  s.attention.workspace_rows = 64;
  s.attention.dcp_world_size = 3;
  s.attention.dcp_interleave = 4;
  s.attention.tolerances.forward = {1e-3, 0.0625, 1e-5};
  s.attention.tolerances.dcp.cos = -1.0;
  return s;
}

TEST(ScenarioWriter, EveryFieldRoundTrips) {
  TempDir dir;
  const Scenario s = everything_set();
  ASSERT_FALSE(validate_scenario(s).has_value());
  EXPECT_EQ(scenario_difference(s, round_trip(s, dir)), "");
}

TEST(ScenarioWriter, EveryShippedScenarioRoundTrips) {
  TempDir dir;
  const auto files = list_scenario_files(std::string(MLA_SOURCE_DIR) + "/scenarios/suite");
  ASSERT_GT(files.size(), 30u);
  for (const std::string& f : files) {
    const Scenario s = load_ok(f);
    EXPECT_EQ(scenario_difference(s, round_trip(s, dir)), "") << f;
  }
}

TEST(ScenarioWriter, GeneratedBatchStaysGenerated) {
  TempDir dir;
  Scenario s;
  s.name = "generated";
  s.seed = 77;
  BatchGenerator g;
  g.num_requests_min = 2;
  g.num_requests_max = 6;
  g.num_decodes_max = 3;
  g.decode_query_len = 2;
  g.decode_threshold = 3;
  g.seq_len_min = 2;
  g.seq_len_max = 300;
  g.prefill_query_len_max = 40;
  s.generator = g;
  s.batch = generate_batch(g, s.seed);
  s.cache.num_blocks = blocks_needed(s.batch, 64) + 4;  // resolved, as loading resolves it
  s.checks = {CheckKind::kPack};
  const Scenario back = round_trip(s, dir);
  ASSERT_TRUE(back.generator.has_value());
  EXPECT_EQ(scenario_difference(s, back), "");
  EXPECT_NE(scenario_to_text(s).find("\"generate\""), std::string::npos);
}

TEST(ScenarioWriter, BatchChangedAfterGenerationIsWrittenExplicitly) {
  TempDir dir;
  Scenario s;
  s.name = "edited";
  BatchGenerator g;
  g.num_requests_min = g.num_requests_max = 3;
  g.seq_len_min = 10;
  g.seq_len_max = 20;
  g.prefill_query_len_min = 1;
  g.prefill_query_len_max = 5;
  s.generator = g;
  s.batch = generate_batch(g, s.seed);
  s.batch.seq_lens.pop_back();  // no longer what the generator draws
  s.batch.query_lens.pop_back();
  s.checks = {CheckKind::kPack};
  const Scenario back = round_trip(s, dir);
  EXPECT_FALSE(back.generator.has_value());
  EXPECT_EQ(back.batch.seq_lens, s.batch.seq_lens);
  EXPECT_EQ(back.batch.query_lens, s.batch.query_lens);
}

TEST(ScenarioWriter, ExplicitPoolIsKeptAndAutomaticPoolLoadsResolved) {
  TempDir dir;
  Scenario s;
  s.name = "pool";
  s.batch.seq_lens = {100};
  s.batch.query_lens = {10};
  s.checks = {CheckKind::kPack};
  s.cache.num_blocks = 0;  // automatic, unresolved
  EXPECT_EQ(round_trip(s, dir).cache.num_blocks, 2 + 4);
  s.cache.num_blocks = 9;  // explicit: more than the batch's pages plus spares
  const Scenario back = round_trip(s, dir);
  EXPECT_EQ(back.cache.num_blocks, 9);
  EXPECT_EQ(scenario_difference(s, back), "");
}

TEST(ScenarioWriter, DefaultsAreLeftOut) {
  Scenario s;
  s.name = "plain";
  s.batch.seq_lens = {5};
  s.batch.query_lens = {1};
  s.checks = {CheckKind::kLayout};
  const auto j = scenario_to_json(s);
  for (const char* key : {"description", "tags", "cache", "block_table", "gather", "convert", "attention"})
    EXPECT_FALSE(j.contains(key)) << key;
  EXPECT_FALSE(j["model"].contains("scale"));
  EXPECT_FALSE(j["batch"].contains("decode_threshold"));
  EXPECT_EQ(j["schema"], kScenarioSchema);
}

TEST(ScenarioWriter, RefusesWhatCouldNotBeLoadedAndWritesNothing) {
  TempDir dir;
  Scenario s = everything_set();
  s.batch.query_lens[2] = 101;  // > seq_len: a rule between fields
  const std::string a = dir.path() + "/a.json";
  Status st = write_scenario_file(a, s);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/batch/query_lens/2"), std::string::npos) << st.message();
  EXPECT_FALSE(std::filesystem::exists(a));

  s = everything_set();
  s.name = "not a name";  // a field rule the loader holds
  st = write_scenario_file(a, s);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/name"), std::string::npos) << st.message();
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "no file and no temporary left behind";
}

TEST(ScenarioWriter, ReplacesAnExistingFile) {
  TempDir dir;
  const std::string path = dir.write("x.json", "old contents");
  Scenario s = everything_set();
  s.name = "x";
  ASSERT_TRUE(write_scenario_file(path, s).ok());
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, scenario_to_text(s));
}

}  // namespace
}  // namespace mla
