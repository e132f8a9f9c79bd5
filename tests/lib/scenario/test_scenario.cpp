// lib/scenario: defaults, every validation rule (each error names the file and the JSON path),
// generated batches and the seed override, file listing, and the shipped suite.
#include "lib/scenario/scenario.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "lib/batch/batch.h"
#include "tests/common/temp_dir.h"

namespace mla {
namespace {

namespace fs = std::filesystem;

using test::TempDir;

Scenario load_ok(const std::string& file, std::optional<uint64_t> seed = std::nullopt) {
  auto result = load_scenario(file, seed);
  if (auto* err = std::get_if<ScenarioError>(&result)) {
    ADD_FAILURE() << "unexpected error: " << err->to_string();
    return Scenario{};
  }
  return std::get<Scenario>(result);
}

// --- Valid files --------------------------------------------------------------------------------

TEST(LoadScenario, MinimalFileGetsEveryDefault) {
  TempDir dir;
  const std::string file = dir.write("min.json", R"({"name": "min", "batch": {"seq_lens": [4, 70], "query_lens": [1, 3]}})");
  const Scenario s = load_ok(file);
  EXPECT_EQ(s.name, "min");
  EXPECT_EQ(s.file, file);
  EXPECT_EQ(s.description, "");
  EXPECT_TRUE(s.tags.empty());
  EXPECT_EQ(s.seed, 1u);
  EXPECT_EQ(s.model.heads, 128);
  EXPECT_EQ(s.model.topk, 128);
  EXPECT_EQ(s.model.block_size, 64);
  EXPECT_DOUBLE_EQ(s.model.scale, 1.0 / std::sqrt(192.0));
  EXPECT_EQ(s.cache.dtype, "fp8_ds_mla");
  EXPECT_EQ(s.cache.spare_blocks, 4);
  EXPECT_EQ(s.cache.num_blocks, 1 + 2 + 4);  // resolved: blocks needed + spare
  EXPECT_EQ(s.cache.page_order, PageOrder::kShuffled);
  EXPECT_EQ(s.cache.page_padding_bytes, 0);
  EXPECT_EQ(s.block_table.extra_columns, 1);
  EXPECT_EQ(s.block_table.stride_padding, 0);
  EXPECT_EQ(s.batch.seq_lens, (std::vector<int32_t>{4, 70}));
  EXPECT_EQ(s.batch.query_lens, (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(s.batch.decode_threshold, 1);
  EXPECT_FALSE(s.generator.has_value());
  EXPECT_TRUE(s.gathers.empty());
  EXPECT_TRUE(s.converts.empty());
  EXPECT_EQ(s.checks, (std::vector<CheckKind>{CheckKind::kPack, CheckKind::kGather, CheckKind::kConvert,
                                              CheckKind::kLayout}));
}

TEST(LoadScenario, EveryFieldIsRead) {
  TempDir dir;
  const std::string file = dir.write("full.json", R"({
    "schema": "mla-scenario/1",
    "name": "full.case-1",
    "description": "every field",
    "tags": ["a", "b"],
    "seed": 18446744073709551615,
    "model": {"heads": 16, "topk": 2048, "block_size": 16, "scale": 0.125},
    "cache": {"dtype": "fp8", "num_blocks": 40, "spare_blocks": 9, "page_order": "reversed", "page_padding_bytes": 32},
    "block_table": {"extra_columns": 3, "stride_padding": 5},
    "batch": {"seq_lens": [32, 40, 0], "query_lens": [2, 2, 0], "decode_threshold": 2},
    "gather": [
      {"name": "explicit", "workspace_starts": [0, 4, 9], "seq_starts": [1, 17, 0], "num_rows": 9},
      {"name": "ctx", "chunked_context": {"chunk_rows": 8}}
    ],
    "convert": [
      {"name": "dec", "rows": "decode", "dcp": {"world_size": 2, "interleave": 8}},
      {"name": "mix", "invalid": {"minus_one": 0.1, "int_min": 0.05, "large_positive": 0.05, "past_table": 0.1,
                                  "negative_block": 0.2}, "prefill_workspace": true}
    ],
    "checks": ["gather", "convert"]
  })");
  const Scenario s = load_ok(file);
  EXPECT_EQ(s.name, "full.case-1");
  EXPECT_EQ(s.description, "every field");
  EXPECT_EQ(s.tags, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(s.seed, UINT64_MAX);
  EXPECT_EQ(s.model.heads, 16);
  EXPECT_EQ(s.model.topk, 2048);
  EXPECT_EQ(s.model.block_size, 16);
  EXPECT_DOUBLE_EQ(s.model.scale, 0.125);
  EXPECT_EQ(s.cache.dtype, "fp8");
  EXPECT_EQ(s.cache.num_blocks, 40);
  EXPECT_EQ(s.cache.spare_blocks, 9);
  EXPECT_EQ(s.cache.page_order, PageOrder::kReversed);
  EXPECT_EQ(s.cache.page_padding_bytes, 32);
  EXPECT_EQ(s.block_table.extra_columns, 3);
  EXPECT_EQ(s.block_table.stride_padding, 5);
  EXPECT_EQ(s.batch.decode_threshold, 2);
  ASSERT_EQ(s.gathers.size(), 2u);
  EXPECT_EQ(s.gathers[0].name, "explicit");
  EXPECT_EQ(s.gathers[0].workspace_starts, (std::vector<int32_t>{0, 4, 9}));
  EXPECT_EQ(*s.gathers[0].seq_starts, (std::vector<int32_t>{1, 17, 0}));
  EXPECT_EQ(s.gathers[0].num_rows, 9);
  EXPECT_FALSE(s.gathers[0].chunked_context_rows.has_value());
  EXPECT_EQ(s.gathers[1].chunked_context_rows, 8);
  ASSERT_EQ(s.converts.size(), 2u);
  EXPECT_EQ(s.converts[0].rows, ConvertRows::kDecode);
  EXPECT_EQ(s.converts[0].dcp_world_size, 2);
  EXPECT_EQ(s.converts[0].dcp_interleave, 8);
  EXPECT_EQ(s.converts[1].rows, ConvertRows::kAll);
  EXPECT_DOUBLE_EQ(s.converts[1].invalid.minus_one, 0.1);
  EXPECT_DOUBLE_EQ(s.converts[1].invalid.int_min, 0.05);
  EXPECT_DOUBLE_EQ(s.converts[1].invalid.large_positive, 0.05);
  EXPECT_DOUBLE_EQ(s.converts[1].invalid.past_table, 0.1);
  EXPECT_DOUBLE_EQ(s.converts[1].invalid.negative_block, 0.2);
  EXPECT_TRUE(s.converts[1].prefill_workspace);
  EXPECT_EQ(s.checks, (std::vector<CheckKind>{CheckKind::kGather, CheckKind::kConvert}));
  EXPECT_FALSE(validate_scenario(s).has_value());
}

TEST(LoadScenario, PinnedValuesAreReadAsWritten) {
  TempDir dir;
  const std::string file = dir.write("pinned.json", R"({
    "name": "pinned",
    "model": {"topk": 4, "block_size": 16},
    "cache": {"num_blocks": 8, "fixed_scales": [{"request": 1, "position": 2, "tile": 3, "scale": 0.00223214296}]},
    "block_table": {"rows": [[5, 2, -9], [7]]},
    "batch": {"seq_lens": [20, 3], "query_lens": [1, 3], "num_decodes": 0},
    "convert": [{"name": "k", "rows": "all", "req_id": [1, 0, 1, -6],
                 "indices": [[-123456, 114514], [2147483647, 48, 47, 0], [], [-2147483648]]}],
    "attention": {"topk_positions": [[0, 1], [2], [], [-1]], "sparse_mqa_slots": [[127, 128], [], [0], [2147483647]]}
  })");
  const Scenario s = load_ok(file);
  ASSERT_TRUE(s.block_table.rows.has_value());
  EXPECT_EQ(*s.block_table.rows, (IndexRows{{5, 2, -9}, {7}}));
  EXPECT_EQ(block_table_width(s), 3 + 1);  // the longest pinned row, plus the default extra column
  EXPECT_EQ(s.batch.num_decodes, 0);
  EXPECT_EQ(decode_requests(s.batch), 0);  // the 1-token request is a prefill: pinned
  ASSERT_EQ(s.cache.fixed_scales.size(), 1u);
  EXPECT_EQ(s.cache.fixed_scales[0].request, 1);
  EXPECT_EQ(s.cache.fixed_scales[0].position, 2);
  EXPECT_EQ(s.cache.fixed_scales[0].tile, 3);
  EXPECT_EQ(s.cache.fixed_scales[0].scale, 1.0f / 448.0f);  // 0.00223214296 is the float nearest 1/448
  ASSERT_EQ(s.converts.size(), 1u);
  EXPECT_EQ(*s.converts[0].req_id, (std::vector<int32_t>{1, 0, 1, -6}));
  EXPECT_EQ(*s.converts[0].indices, (IndexRows{{-123456, 114514}, {INT32_MAX, 48, 47, 0}, {}, {INT32_MIN}}));
  EXPECT_EQ(convert_case_rows(s, s.converts[0]), 4);
  EXPECT_EQ(*s.attention.topk_positions, (IndexRows{{0, 1}, {2}, {}, {-1}}));
  EXPECT_EQ(*s.attention.sparse_mqa_slots, (IndexRows{{127, 128}, {}, {0}, {INT32_MAX}}));
  // Without the pin the threshold rule counts it as a decode.
  BatchSpec b = s.batch;
  b.num_decodes.reset();
  EXPECT_EQ(decode_requests(b), 1);
}

// Every violation of the schema is reported, the first in ScenarioError's fields (a typo before
// the missing key it was meant to be), the others in `more`, one line each.
TEST(LoadScenario, EverySchemaViolationIsListedTyposFirst) {
  TempDir dir;
  const std::string file =
      dir.write("many.json", R"({"name": "m", "model": {"heads": 0}, "batch": {"seq_len": [4], "query_lens": [1]}})");
  auto result = load_scenario(file);
  const auto* err = std::get_if<ScenarioError>(&result);
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(err->json_path, "/batch/seq_len");
  EXPECT_NE(err->problem.find("did you mean \"seq_lens\""), std::string::npos) << err->problem;
  std::set<std::string> others;
  for (const auto& [pointer, problem] : err->more) others.insert(pointer + ": " + problem);
  EXPECT_EQ(others.count("/model/heads: value 0 is outside [1, 1024]"), 1u) << err->to_string();
  EXPECT_EQ(others.count("/batch/seq_lens: missing required key \"seq_lens\""), 1u) << err->to_string();
  EXPECT_EQ(err->more.size(), 2u) << err->to_string();  // no report of the enclosing if/else
  const std::string text = err->to_string();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << text;
  EXPECT_NE(text.find(file + ": at /model/heads: value 0 is outside [1, 1024]"), std::string::npos) << text;
}

#ifdef MLA_SOURCE_DIR
// The schema's list of checks is the program's.
TEST(ScenarioSchema, NamesEveryCheck) {
  std::ifstream in(std::string(MLA_SOURCE_DIR) + "/scenarios/schema/scenario.schema.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json schema = nlohmann::json::parse(in);
  std::vector<std::string> names;
  for (const auto& n : schema.at("properties").at("checks").at("items").at("enum")) names.push_back(n.get<std::string>());
  std::vector<std::string> program;
  for (int i = 0; i <= static_cast<int>(kLastCheckKind); ++i) program.push_back(to_string(static_cast<CheckKind>(i)));
  EXPECT_EQ(names, program);
}
#endif

// Every scale the pack can produce is pinnable, and gives itself back; others are refused.
TEST(TileAmaxForScale, EveryProducibleScaleRoundTrips) {
  for (uint32_t bits = 0; bits < 0x7F80; ++bits) {
    const float amax = bf16_to_f32(static_cast<bf16_t>(bits));
    const float scale = std::max(amax / 448.0f, FLT_MIN);
    const std::optional<bf16_t> got = tile_amax_for_scale(scale);
    ASSERT_TRUE(got.has_value()) << "amax bits " << bits;
    ASSERT_EQ(std::max(bf16_to_f32(*got) / 448.0f, FLT_MIN), scale) << "amax bits " << bits;
  }
  EXPECT_EQ(tile_amax_for_scale(FLT_MIN), bf16_t{0});
  EXPECT_FALSE(tile_amax_for_scale(0.001f).has_value());
  EXPECT_FALSE(tile_amax_for_scale(0.0f).has_value());
  EXPECT_FALSE(tile_amax_for_scale(-1.0f).has_value());
  EXPECT_FALSE(tile_amax_for_scale(std::numeric_limits<float>::infinity()).has_value());
  EXPECT_FALSE(tile_amax_for_scale(1e30f).has_value());  // past the largest bf16 amax / 448
}

TEST(LoadScenario, SeedOverrideReplacesTheFileSeed) {
  TempDir dir;
  const std::string file = dir.write("s.json", R"({"name": "s", "seed": 5, "batch": {"seq_lens": [4], "query_lens": [1]}})");
  EXPECT_EQ(load_ok(file).seed, 5u);
  EXPECT_EQ(load_ok(file, 77).seed, 77u);
}

TEST(LoadScenario, CasesWithoutTheirCheckAreAccepted) {
  TempDir dir;
  const std::string file = dir.write("c.json", R"({"name": "c", "checks": ["pack"],
    "batch": {"seq_lens": [4], "query_lens": [1]},
    "gather": [{"name": "g", "workspace_starts": [0], "num_rows": 4}],
    "convert": [{"name": "k", "rows": "decode"}]})");
  EXPECT_EQ(load_ok(file).checks, std::vector<CheckKind>{CheckKind::kPack});
}

TEST(LoadScenario, InterleaveNeedNotDivideBlockWithoutDcp) {
  TempDir dir;
  const std::string file = dir.write("d.json", R"({"name": "d", "model": {"block_size": 61},
    "batch": {"seq_lens": [4], "query_lens": [1]}, "convert": [{"name": "k", "dcp": {"world_size": 1, "interleave": 8}}]})");
  load_ok(file);
}

// --- Generated batches --------------------------------------------------------------------------

const char* kGenerated = R"({"name": "gen", "seed": 1234,
  "batch": {"generate": {"num_requests": [3, 9], "num_decodes": [1, 4], "decode_query_len": 1,
                         "seq_len": [1, 900], "prefill_query_len": [2, 200]}},
  "convert": [{"name": "decode_rows", "rows": "decode"}]})";

TEST(LoadScenario, GeneratedBatchIsResolvedAndReproducible) {
  TempDir dir;
  const std::string file = dir.write("gen.json", kGenerated);
  const Scenario a = load_ok(file), b = load_ok(file);
  ASSERT_TRUE(a.generator.has_value());
  EXPECT_EQ(a.generator->num_requests_min, 3);
  EXPECT_EQ(a.generator->num_requests_max, 9);
  EXPECT_EQ(a.generator->decode_threshold, 1);  // defaults to decode_query_len
  EXPECT_EQ(a.batch.seq_lens, b.batch.seq_lens);
  EXPECT_EQ(a.batch.query_lens, b.batch.query_lens);
  EXPECT_GE(a.batch.seq_lens.size(), 3u);
  EXPECT_LE(a.batch.seq_lens.size(), 9u);
  const BatchSpec direct = generate_batch(*a.generator, 1234);
  EXPECT_EQ(direct.seq_lens, a.batch.seq_lens);
  EXPECT_EQ(direct.query_lens, a.batch.query_lens);
  EXPECT_EQ(a.cache.num_blocks, blocks_needed(a.batch, 64) + 4);
}

TEST(LoadScenario, GeneratedBatchFollowsTheSeedOverride) {
  TempDir dir;
  const std::string file = dir.write("gen.json", kGenerated);
  const Scenario base = load_ok(file);
  const Scenario same = load_ok(file, 1234);
  EXPECT_EQ(base.batch.seq_lens, same.batch.seq_lens);
  bool any_differs = false;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const Scenario other = load_ok(file, seed);
    any_differs |= other.batch.seq_lens != base.batch.seq_lens || other.batch.query_lens != base.batch.query_lens;
  }
  EXPECT_TRUE(any_differs);
}

// --- Every rule: an error naming the file and the JSON path ---------------------------------------

struct BadCase {
  const char* what;
  std::string json;
  std::string path;     // expected json_path
  std::string problem;  // expected substring of the problem
};

// A valid scenario with `extra` members appended after the batch.
std::string with_batch(const std::string& batch, const std::string& extra = "") {
  return R"({"name": "bad", "batch": )" + batch + (extra.empty() ? "" : ", " + extra) + "}";
}
const std::string kBatch = R"({"seq_lens": [32, 40, 48, 56], "query_lens": [1, 1, 5, 5]})";
const std::string kPrefillBatch = R"({"seq_lens": [32, 40], "query_lens": [8, 8]})";
std::string with(const std::string& extra) { return with_batch(kBatch, extra); }

std::vector<BadCase> bad_cases() {
  return {
      // Document level.
      {"malformed json", R"({"name": "x",, })", "", "line 1"},
      {"truncated json", "{\"name\": \"x\",\n  \"batch\": {", "", "line 2"},
      {"root not object", R"([1, 2])", "", "expected an object"},
      {"unknown top-level key", with(R"("sed": 3)"), "/sed", "did you mean \"seed\""},
      {"key with slash escaped", with(R"("a/b": 3)"), "/a~1b", "unknown key"},
      {"duplicate key", R"({"name": "x", "model": {"heads": 2, "heads": 4}, "batch": )" + kBatch + "}",
       "/model/heads", "twice"},
      {"schema mismatch", with(R"("schema": "mla-scenario/2")"), "/schema", "not supported"},
      {"name missing", R"({"batch": )" + kBatch + "}", "/name", "missing"},
      {"name charset", R"({"name": "a b", "batch": )" + kBatch + "}", "/name", "not a valid name"},
      {"name empty", R"({"name": "", "batch": )" + kBatch + "}", "/name", "not a valid name"},
      {"name type", R"({"name": 5, "batch": )" + kBatch + "}", "/name", "expected a string"},
      {"description type", with(R"("description": ["x"])"), "/description", "expected a string"},
      {"tags type", with(R"("tags": "x")"), "/tags", "expected an array"},
      {"tag element type", with(R"("tags": ["a", 2])"), "/tags/1", "expected a string"},
      {"seed negative", with(R"("seed": -1)"), "/seed", ">= 0"},
      {"seed float", with(R"("seed": 1.5)"), "/seed", "non-negative integer"},
      {"seed string", with(R"("seed": "7")"), "/seed", "non-negative integer"},
      // Model.
      {"model type", with(R"("model": 3)"), "/model", "expected an object"},
      {"model unknown key", with(R"("model": {"head": 2})"), "/model/head", "did you mean \"heads\""},
      {"heads zero", with(R"("model": {"heads": 0})"), "/model/heads", "[1, 1024]"},
      {"heads too many", with(R"("model": {"heads": 1025})"), "/model/heads", "[1, 1024]"},
      {"heads string", with(R"("model": {"heads": "128"})"), "/model/heads", "expected an integer"},
      {"heads float", with(R"("model": {"heads": 128.0})"), "/model/heads", "expected an integer"},
      {"topk zero", with(R"("model": {"topk": 0})"), "/model/topk", "outside [1, 2147483647]"},
      {"block size zero", with(R"("model": {"block_size": 0})"), "/model/block_size", "outside [1, 2147483647]"},
      {"block size huge", with(R"("model": {"block_size": 4294967296})"), "/model/block_size", "outside [1, 2147483647]"},
      {"scale zero", with(R"("model": {"scale": 0})"), "/model/scale", "greater than 0"},
      {"scale negative", with(R"("model": {"scale": -0.5})"), "/model/scale", "greater than 0"},
      {"scale string", with(R"("model": {"scale": "0.1"})"), "/model/scale", "expected a number"},
      // Cache.
      {"cache unknown key", with(R"("cache": {"num_block": 3})"), "/cache/num_block", "did you mean \"num_blocks\""},
      {"dtype unknown", with(R"("cache": {"dtype": "fp16"})"), "/cache/dtype", "expected one of: \"auto\", \"bf16\""},
      {"num_blocks negative", with(R"("cache": {"num_blocks": -1})"), "/cache/num_blocks", "outside [0, 2147483647]"},
      {"num_blocks too small", with(R"("cache": {"num_blocks": 3})"), "/cache/num_blocks", "needs 4 blocks"},
      {"pool slots past int32", with(R"("cache": {"num_blocks": 40000000})"), "/cache/num_blocks", "INT32_MAX"},
      {"spare negative", with(R"("cache": {"spare_blocks": -2})"), "/cache/spare_blocks", "outside [0, 2147483647]"},
      {"page order unknown", with(R"("cache": {"page_order": "random"})"), "/cache/page_order", "expected one of: \"contiguous\""},
      {"padding not multiple of 16", with(R"("cache": {"page_padding_bytes": 8})"), "/cache/page_padding_bytes",
       "multiple of 16"},
      {"padding negative", with(R"("cache": {"page_padding_bytes": -16})"), "/cache/page_padding_bytes", ">= 0"},
      // Block table.
      {"extra columns negative", with(R"("block_table": {"extra_columns": -1})"), "/block_table/extra_columns", "outside [0, 2147483647]"},
      {"stride padding negative", with(R"("block_table": {"stride_padding": -1})"), "/block_table/stride_padding",
       "outside [0, 2147483647]"},
      {"block table unknown key", with(R"("block_table": {"width": 3})"), "/block_table/width", "unknown key"},
      // Batch.
      {"batch missing", R"({"name": "x"})", "/batch", "missing"},
      {"batch type", with_batch("[1]"), "/batch", "expected an object"},
      {"batch unknown key", with_batch(R"({"seq_len": [4], "query_lens": [1]})"), "/batch/seq_len",
       "did you mean \"seq_lens\""},
      {"seq_lens missing", with_batch(R"({"query_lens": [1]})"), "/batch/seq_lens", "missing"},
      {"query_lens missing", with_batch(R"({"seq_lens": [1]})"), "/batch/query_lens", "missing"},
      {"lists of different lengths", with_batch(R"({"seq_lens": [4, 5], "query_lens": [1]})"), "/batch/query_lens",
       "has 1 entries but seq_lens has 2"},
      {"empty batch", with_batch(R"({"seq_lens": [], "query_lens": []})"), "/batch/seq_lens", "at least one request"},
      {"query_len > seq_len", with_batch(R"({"seq_lens": [4, 5, 6], "query_lens": [1, 1, 7]})"),
       "/batch/query_lens/2", "query_len 7 > seq_len 6"},
      {"seq_len negative", with_batch(R"({"seq_lens": [4, -5], "query_lens": [1, 1]})"), "/batch/seq_lens/1", "outside [0, 2147483647]"},
      {"seq_len float", with_batch(R"({"seq_lens": [4.5], "query_lens": [1]})"), "/batch/seq_lens/0",
       "expected an integer"},
      {"query_len negative", with_batch(R"({"seq_lens": [4], "query_lens": [-1]})"), "/batch/query_lens/0", "outside [0, 2147483647]"},
      {"decode threshold zero", with_batch(R"({"seq_lens": [4], "query_lens": [1], "decode_threshold": 0})"),
       "/batch/decode_threshold", "outside [1, 2147483647]"},
      // Generated batch.
      {"generate with explicit lists",
       with_batch(R"({"seq_lens": [4], "generate": {"num_requests": [1, 2], "seq_len": [1, 9], "prefill_query_len": [1, 2]}})"),
       "/batch/seq_lens", "cannot be combined"},
      {"generate with batch-level threshold",
       with_batch(R"({"decode_threshold": 2, "generate": {"num_requests": [1, 2], "seq_len": [1, 9], "prefill_query_len": [1, 2]}})"),
       "/batch/decode_threshold", "cannot be combined"},
      {"generate type", with_batch(R"({"generate": [1]})"), "/batch/generate", "expected an object"},
      {"generate missing num_requests", with_batch(R"({"generate": {"seq_len": [1, 9], "prefill_query_len": [1, 2]}})"),
       "/batch/generate/num_requests", "missing"},
      {"generate missing seq_len", with_batch(R"({"generate": {"num_requests": [1, 2], "prefill_query_len": [1, 2]}})"),
       "/batch/generate/seq_len", "missing"},
      {"generate unknown key",
       with_batch(R"({"generate": {"num_request": [1, 2], "seq_len": [1, 9], "prefill_query_len": [1, 2]}})"),
       "/batch/generate/num_request", "did you mean \"num_requests\""},
      {"generate range reversed",
       with_batch(R"({"generate": {"num_requests": [1, 2], "seq_len": [9, 1], "prefill_query_len": [1, 2]}})"),
       "/batch/generate/seq_len", "min 9 > max 1"},
      {"generate range not a pair",
       with_batch(R"({"generate": {"num_requests": [1, 2, 3], "seq_len": [1, 9], "prefill_query_len": [1, 2]}})"),
       "/batch/generate/num_requests", "expected [min, max]"},
      {"generate zero requests",
       with_batch(R"({"generate": {"num_requests": [0, 2], "seq_len": [1, 9], "prefill_query_len": [1, 2]}})"),
       "/batch/generate/num_requests/0", "outside [1, 65536]"},
      {"generate negative decodes",
       with_batch(R"({"generate": {"num_requests": [1, 2], "num_decodes": [-1, 1], "seq_len": [1, 9], "prefill_query_len": [1, 2]}})"),
       "/batch/generate/num_decodes/0", "outside [0, 2147483647]"},
      {"generate threshold below decode length",
       with_batch(R"({"generate": {"num_requests": [1, 2], "decode_query_len": 3, "decode_threshold": 2, "seq_len": [3, 9], "prefill_query_len": [1, 2]}})"),
       "/batch/generate/decode_threshold", "< decode_query_len"},
      {"generate seq_len shorter than a decode",
       with_batch(R"({"generate": {"num_requests": [1, 2], "num_decodes": [0, 1], "decode_query_len": 2, "seq_len": [1, 9], "prefill_query_len": [1, 2]}})"),
       "/batch/generate/seq_len", "decode_query_len"},
      {"decode rows with generated batch without decodes",
       with_batch(R"({"generate": {"num_requests": [1, 2], "seq_len": [2, 9], "prefill_query_len": [2, 2]}})",
                  R"("convert": [{"name": "k", "rows": "decode"}])"),
       "/convert/0/rows", "no decode tokens"},
      // Gather.
      {"gather type", with(R"("gather": {"name": "g"})"), "/gather", "expected an array"},
      {"gather element type", with(R"("gather": [3])"), "/gather/0", "expected an object"},
      {"gather name missing", with(R"("gather": [{"workspace_starts": [0, 1, 2, 3], "num_rows": 4}])"),
       "/gather/0/name", "missing"},
      {"gather unknown key", with(R"("gather": [{"name": "g", "workspace_start": [0, 1, 2, 3], "num_rows": 4}])"),
       "/gather/0/workspace_start", "did you mean \"workspace_starts\""},
      {"workspace_starts missing", with(R"("gather": [{"name": "g", "num_rows": 4}])"), "/gather/0/workspace_starts",
       "missing"},
      {"num_rows missing", with(R"("gather": [{"name": "g", "workspace_starts": [0, 1, 2, 3]}])"),
       "/gather/0/num_rows", "missing"},
      {"workspace_starts length", with(R"("gather": [{"name": "g", "workspace_starts": [0, 1, 2], "num_rows": 4}])"),
       "/gather/0/workspace_starts", "the batch has 4 requests"},
      {"workspace_starts decreasing",
       with(R"("gather": [{"name": "g", "workspace_starts": [0, 5, 3, 9], "num_rows": 9}])"),
       "/gather/0/workspace_starts/2", "non-decreasing"},
      {"workspace_starts negative",
       with(R"("gather": [{"name": "g", "workspace_starts": [0, -1, 3, 9], "num_rows": 9}])"),
       "/gather/0/workspace_starts/1", "outside [0, 2147483647]"},
      {"num_rows below last start",
       with(R"("gather": [{"name": "g", "workspace_starts": [0, 1, 3, 9], "num_rows": 8}])"),
       "/gather/0/num_rows", "less than the last workspace start 9"},
      {"num_rows negative", with(R"("gather": [{"name": "g", "workspace_starts": [0, 0, 0, 0], "num_rows": -1}])"),
       "/gather/0/num_rows", "outside [0, 2147483647]"},
      {"seq_starts negative",
       with(R"("gather": [{"name": "g", "workspace_starts": [0, 1, 2, 3], "seq_starts": [-4, 0, 0, 0], "num_rows": 4}])"),
       "/gather/0/seq_starts/0", "outside [0, 2147483647]"},
      {"seq_starts length",
       with(R"("gather": [{"name": "g", "workspace_starts": [0, 1, 2, 3], "seq_starts": [0, 0], "num_rows": 4}])"),
       "/gather/0/seq_starts", "the batch has 4 requests"},
      {"chunk rows zero", with(R"("gather": [{"name": "g", "chunked_context": {"chunk_rows": 0}}])"),
       "/gather/0/chunked_context/chunk_rows", "outside [1, 2147483647]"},
      {"chunk rows missing", with(R"("gather": [{"name": "g", "chunked_context": {}}])"),
       "/gather/0/chunked_context/chunk_rows", "missing"},
      {"chunked with explicit starts",
       with(R"("gather": [{"name": "g", "chunked_context": {"chunk_rows": 8}, "workspace_starts": [0, 0, 0, 0]}])"),
       "/gather/0/workspace_starts", "cannot be combined with \"chunked_context\""},
      {"gather names twice",
       with(R"("gather": [{"name": "g", "chunked_context": {"chunk_rows": 8}}, {"name": "g", "chunked_context": {"chunk_rows": 4}}])"),
       "/gather/1/name", "used twice"},
      // Convert.
      {"convert type", with(R"("convert": 1)"), "/convert", "expected an array"},
      {"convert name missing", with(R"("convert": [{"rows": "all"}])"), "/convert/0/name", "missing"},
      {"convert unknown key", with(R"("convert": [{"name": "k", "row": "all"}])"), "/convert/0/row",
       "did you mean \"rows\""},
      {"rows unknown", with(R"("convert": [{"name": "k", "rows": "prefill"}])"), "/convert/0/rows",
       "expected one of: \"decode\", \"all\""},
      {"decode rows without decodes", with_batch(kPrefillBatch, R"("convert": [{"name": "k", "rows": "decode"}])"),
       "/convert/0/rows", "no decode tokens"},
      {"decode rows after zero-length first request",
       with_batch(R"({"seq_lens": [4, 4], "query_lens": [0, 1]})", R"("convert": [{"name": "k", "rows": "decode"}])"),
       "/convert/0/rows", "no decode tokens"},
      {"fraction above one", with(R"("convert": [{"name": "k", "invalid": {"minus_one": 1.5}}])"),
       "/convert/0/invalid/minus_one", "[0, 1]"},
      {"fraction negative", with(R"("convert": [{"name": "k", "invalid": {"int_min": -0.1}}])"),
       "/convert/0/invalid/int_min", "[0, 1]"},
      {"fraction type", with(R"("convert": [{"name": "k", "invalid": {"past_table": "0.1"}}])"),
       "/convert/0/invalid/past_table", "expected a number"},
      {"fractions sum above one",
       with(R"("convert": [{"name": "k", "invalid": {"minus_one": 0.6, "negative_block": 0.5}}])"),
       "/convert/0/invalid", "more than 1"},
      {"invalid unknown key", with(R"("convert": [{"name": "k", "invalid": {"minusone": 0.1}}])"),
       "/convert/0/invalid/minusone", "did you mean \"minus_one\""},
      {"prefill_workspace type", with(R"("convert": [{"name": "k", "prefill_workspace": 1}])"),
       "/convert/0/prefill_workspace", "expected true or false"},
      {"prefill_workspace on decode rows",
       with(R"("convert": [{"name": "k", "rows": "decode", "prefill_workspace": true}])"),
       "/convert/0/prefill_workspace", "needs prefill rows"},
      {"dcp world zero", with(R"("convert": [{"name": "k", "dcp": {"world_size": 0}}])"),
       "/convert/0/dcp/world_size", "[1, 1024]"},
      {"dcp interleave zero", with(R"("convert": [{"name": "k", "dcp": {"interleave": 0}}])"),
       "/convert/0/dcp/interleave", "outside [1, 2147483647]"},
      {"dcp interleave does not divide block",
       with(R"("model": {"block_size": 64}, "convert": [{"name": "k", "dcp": {"world_size": 2, "interleave": 48}}])"),
       "/convert/0/dcp/interleave", "not a multiple of interleave 48"},
      {"dcp unknown key", with(R"("convert": [{"name": "k", "dcp": {"ranks": 2}}])"), "/convert/0/dcp/ranks",
       "unknown key"},
      {"convert names twice", with(R"("convert": [{"name": "k"}, {"name": "k"}])"), "/convert/1/name", "used twice"},
      // Checks.
      {"checks type", with(R"("checks": "pack")"), "/checks", "expected an array"},
      {"checks empty", with(R"("checks": [])"), "/checks", "no checks"},
      {"check unknown", with(R"("checks": ["pack", "packs"])"), "/checks/1", "expected one of: \"pack\""},
      {"check twice", with(R"("checks": ["pack", "gather", "pack"])"), "/checks/2", "twice"},
      {"check type", with(R"("checks": [1])"), "/checks/0", "got integer 1"},
      // Sizes: refused before anything is allocated (found by an audit with adversarial files).
      {"number past double", with(R"("model": {"scale": 1e400})"), "", "number overflow"},
      {"nesting too deep", with(R"("x": )" + std::string(100, '[') + std::string(100, ']')),
       "/x/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0",
       "deeper than 64"},
      {"block table past int32 tokens", with(R"("block_table": {"extra_columns": 2147483647})"),
       "/block_table/extra_columns", "past INT32_MAX"},
      {"block table indices wrap past int32 (past_table)",
       with_batch(R"({"seq_lens": [4096, 4096], "query_lens": [4, 4]})",
                  R"("model": {"block_size": 1024}, "block_table": {"extra_columns": 2097147})"),
       "/block_table/extra_columns", "past INT32_MAX"},
      {"block table too large", with(R"("block_table": {"stride_padding": 2147483647})"), "/block_table",
       "limited to 8 GiB"},
      {"cache too large", with(R"("cache": {"num_blocks": 33000000})"), "/cache/num_blocks", "limited to 8 GiB"},
      {"cache too large (automatic)", with(R"("cache": {"spare_blocks": 33000000})"), "/cache", "limited to 8 GiB"},
      {"cache page padding too large", with(R"("cache": {"page_padding_bytes": 2147483632})"), "/cache",
       "limited to 8 GiB"},
      {"gather rows too many",
       with(R"("gather": [{"name": "g", "workspace_starts": [0, 32, 72, 120], "num_rows": 2147483647}])"),
       "/gather/0/num_rows", "limited to 8 GiB"},
      {"top-k indices too large", with(R"("model": {"topk": 2147483647})"), "/model/topk", "limited to 8 GiB"},
      {"sparse split partials too large",
       with(R"("model": {"heads": 1024, "topk": 10000000}, "checks": ["sparse_mqa"])"), "/model/topk",
       "split partials"},
      {"dense keys too large",
       with_batch(R"({"seq_lens": [40000], "query_lens": [64]})", R"("model": {"heads": 128}, "checks": ["dense_mha"])"),
       "/model/heads", "dense_mha's keys and values"},
      {"chunked context: too many chunks",
       with_batch(R"({"seq_lens": [2000000], "query_lens": [1]})",
                  R"("gather": [{"name": "g", "chunked_context": {"chunk_rows": 1}}])"),
       "/gather/0/chunked_context/chunk_rows", "at most 1048576"},
      {"negative_block without spare columns",
       with(R"("block_table": {"extra_columns": 0}, "convert": [{"name": "k", "invalid": {"negative_block": 0.5}}])"),
       "/convert/0/invalid/negative_block", "extra_columns >= 1"},
      // Integers valijson would read wrapped (past INT64_MAX), anywhere but the seed.
      {"index past INT64_MAX", with(R"("convert": [{"name": "k", "indices": [[1, 18446744073709551615]]}])"),
       "/convert/0/indices/0/1", "out of range"},
      // Pinned values (docs/scenarios.md "Pinned values"): against the batch, the pool and top-k.
      {"pinned decodes past the batch", with_batch(R"({"seq_lens": [4, 5], "query_lens": [1, 1], "num_decodes": 3})"),
       "/batch/num_decodes", "the batch has 2 requests"},
      {"pinned decode without a token", with_batch(R"({"seq_lens": [4, 5], "query_lens": [1, 0], "num_decodes": 2})"),
       "/batch/query_lens/1", "has no new token"},
      {"pinned decodes with generate",
       with_batch(R"({"num_decodes": 1, "generate": {"num_requests": [1, 2], "seq_len": [1, 9], "prefill_query_len": [1, 2]}})"),
       "/batch/num_decodes", "cannot be combined"},
      {"pinned decodes type", with_batch(R"({"seq_lens": [4], "query_lens": [1], "num_decodes": "1"})"),
       "/batch/num_decodes", "expected an integer"},
      {"table rows count", with(R"("block_table": {"rows": [[0], [1], [2]]})"), "/block_table/rows",
       "has 3 rows; the batch has 4 requests"},
      {"table row shorter than the request", with(R"("block_table": {"rows": [[0], [1], [], [3]]})"),
       "/block_table/rows/2", "needs 1 pages"},
      {"table page outside the pool", with(R"("cache": {"num_blocks": 6}, "block_table": {"rows": [[0], [1], [2], [6]]})"),
       "/block_table/rows/3/0", "not in the pool of 6 pages"},
      {"table page used twice", with(R"("block_table": {"rows": [[0], [1], [2], [1]]})"), "/block_table/rows/3/0",
       "also /block_table/rows/1/0"},
      {"table entry type", with(R"("block_table": {"rows": [[0], [1.5], [2], [3]]})"), "/block_table/rows/1/0",
       "expected an integer"},
      {"convert req_id length", with(R"("convert": [{"name": "k", "rows": "decode", "req_id": [0, 1, 2]}])"),
       "/convert/0/req_id", "has 3 entries"},
      {"convert indices rows", with(R"("convert": [{"name": "k", "rows": "decode", "indices": [[1]]}])"),
       "/convert/0/indices", "has 1 rows"},
      {"convert indices row past top-k",
       with(R"("model": {"topk": 2}, "convert": [{"name": "k", "rows": "decode", "indices": [[1], [1, 2, 3]]}])"),
       "/convert/0/indices/1", "has 3 values; top-k is 2"},
      {"convert indices with an invalid mix",
       with(R"("convert": [{"name": "k", "rows": "decode", "indices": [[1], [2]], "invalid": {"minus_one": 0.1}}])"),
       "/convert/0/indices", "cannot be combined with \"invalid\""},
      {"convert index type", with(R"("convert": [{"name": "k", "rows": "decode", "indices": [[1], ["2"]]}])"),
       "/convert/0/indices/1/0", "expected an integer"},
      {"index below INT32_MIN", with(R"("convert": [{"name": "k", "rows": "decode", "indices": [[1], [-2147483649]]}])"),
       "/convert/0/indices/1/0", "outside [-2147483648, 2147483647]"},
      {"fixed scale request", with(R"("cache": {"fixed_scales": [{"request": 4, "position": 0, "tile": 0, "scale": 1}]})"),
       "/cache/fixed_scales/0/request", "not in the batch of 4 requests"},
      {"fixed scale position", with(R"("cache": {"fixed_scales": [{"request": 0, "position": 32, "tile": 0, "scale": 1}]})"),
       "/cache/fixed_scales/0/position", "seq_len 32"},
      {"fixed scale tile", with(R"("cache": {"fixed_scales": [{"request": 0, "position": 0, "tile": 4, "scale": 1}]})"),
       "/cache/fixed_scales/0/tile", "outside [0, 3]"},
      {"fixed scale no tile gives", with(R"("cache": {"fixed_scales": [{"request": 0, "position": 0, "tile": 0, "scale": 0.001}]})"),
       "/cache/fixed_scales/0/scale", "no tile gives the fp32 scale 0.001"},
      {"fixed scale zero", with(R"("cache": {"fixed_scales": [{"request": 0, "position": 0, "tile": 0, "scale": 0}]})"),
       "/cache/fixed_scales/0/scale", "greater than 0"},
      {"fixed scale pinned twice",
       with(R"("cache": {"fixed_scales": [{"request": 0, "position": 1, "tile": 2, "scale": 1}, {"request": 0, "position": 1, "tile": 2, "scale": 0.5}]})"),
       "/cache/fixed_scales/1", "pinned twice"},
      {"fixed scale missing key", with(R"("cache": {"fixed_scales": [{"request": 0, "position": 1, "scale": 1}]})"),
       "/cache/fixed_scales/0/tile", "missing"},
      {"attention positions rows", with(R"("attention": {"topk_positions": [[0]]})"), "/attention/topk_positions",
       "has 1 rows; the batch has new tokens: 12"},
      {"attention slots rows", with(R"("attention": {"sparse_mqa_slots": [[0], [1]]})"), "/attention/sparse_mqa_slots",
       "has 2 rows; the batch has new tokens: 12"},
      {"attention position in an unwritten slot",
       with_batch(R"({"seq_lens": [40], "query_lens": [1]})", R"("attention": {"topk_positions": [[0, 41]]})"),
       "/attention/topk_positions/0/1", "holds none of its tokens"},
      {"attention position past the request with dcp",
       with_batch(R"({"seq_lens": [40], "query_lens": [1]})",
                  R"("attention": {"topk_positions": [[0, 2147483647]]}, "checks": ["dcp"])"),
       "/attention/topk_positions/0/1", "with the dcp check"},
  };
}

TEST(LoadScenario, EveryRuleNamesFileAndPath) {
  TempDir dir;
  int index = 0;
  for (const BadCase& c : bad_cases()) {
    SCOPED_TRACE(c.what);
    const std::string file = dir.write("case" + std::to_string(index++) + ".json", c.json);
    auto result = load_scenario(file);
    const auto* err = std::get_if<ScenarioError>(&result);
    ASSERT_NE(err, nullptr) << "accepted: " << c.json;
    EXPECT_EQ(err->file, file);
    EXPECT_EQ(err->json_path, c.path) << err->to_string();
    EXPECT_NE(err->problem.find(c.problem), std::string::npos) << err->to_string();
    const std::string text = err->to_string();
    EXPECT_EQ(text.rfind(file + ": ", 0), 0u) << text;
    if (!c.path.empty()) {
      EXPECT_NE(text.find("at " + c.path + ": "), std::string::npos) << text;
    }
  }
}

TEST(LoadScenario, MalformedJsonReportsBytePosition) {
  TempDir dir;
  const std::string file = dir.write("m.json", "{\n  \"name\": \"x\"\n  \"batch\": {}\n}");
  auto result = load_scenario(file);
  const auto* err = std::get_if<ScenarioError>(&result);
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(err->json_path, "");
  EXPECT_NE(err->problem.find("byte"), std::string::npos) << err->problem;
  EXPECT_NE(err->problem.find("line 3"), std::string::npos) << err->problem;
  EXPECT_EQ(err->to_string().rfind(file + ": malformed JSON", 0), 0u) << err->to_string();
}

// The size limits count the buffers the checks allocate, not more: realistic large scenarios load.
TEST(LoadScenario, SizeLimitsLeaveRealisticLargeScenariosAlone) {
  TempDir dir;
  // 128 heads, top-k 2048, two 32k-token requests with 4096 new tokens each, the forward check
  // (mla-bench validates its forward batches so): nothing of tokens x heads x top-k is allocated.
  load_ok(dir.write("forward.json", with_batch(R"({"seq_lens": [32768, 32768], "query_lens": [4096, 4096]})",
                                               R"("model": {"heads": 128, "topk": 2048}, "checks": ["forward"])")));
  // Chunked context makes one gather call per chunk of the longest context (1024 here), not one
  // per chunk of every request (1100 x 1024).
  std::string seq = "[", query = "[";
  for (int r = 0; r < 1100; ++r) {
    seq += std::string(r ? ", " : "") + "8193";
    query += std::string(r ? ", " : "") + "1";
  }
  load_ok(dir.write("chunks.json", with_batch(R"({"seq_lens": )" + seq + R"(], "query_lens": )" + query + "]}",
                                              R"("gather": [{"name": "g", "chunked_context": {"chunk_rows": 8}}])")));
}

TEST(LoadScenario, DirectoriesAndSpecialFilesAreRefusedUnread) {
  TempDir dir;
  const std::string sub = dir.path() + "/a_directory.json";
  fs::create_directories(sub);
  auto result = load_scenario(sub);
  const auto* err = std::get_if<ScenarioError>(&result);
  ASSERT_NE(err, nullptr);
  EXPECT_NE(err->problem.find("is a directory"), std::string::npos) << err->to_string();
  // A FIFO would block the reader forever; /dev/zero would never end.
  const std::string fifo = dir.path() + "/fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& special : {fifo, std::string("/dev/zero")}) {
    SCOPED_TRACE(special);
    auto r = load_scenario(special);
    const auto* e = std::get_if<ScenarioError>(&r);
    ASSERT_NE(e, nullptr);
    EXPECT_NE(e->problem.find("not a regular file"), std::string::npos) << e->to_string();
  }
}

TEST(LoadScenario, MissingFileIsAnErrorNamingIt) {
  TempDir dir;
  const std::string file = dir.path() + "/absent.json";
  auto result = load_scenario(file);
  const auto* err = std::get_if<ScenarioError>(&result);
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(err->file, file);
  EXPECT_NE(err->problem.find("cannot open"), std::string::npos);
}

TEST(ValidateScenario, AppliesToScenariosBuiltInCode) {
  Scenario s;
  s.name = "code";
  s.file = "<built>";
  s.batch.seq_lens = {10, 20};
  s.batch.query_lens = {1, 2};
  EXPECT_FALSE(validate_scenario(s).has_value());

  s.gathers.push_back(GatherCase{"g", {0, 4}, std::nullopt, 3, std::nullopt});
  auto err = validate_scenario(s);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->file, "<built>");
  EXPECT_EQ(err->json_path, "/gather/0/num_rows");

  s.gathers.clear();
  s.batch.query_lens = {1, 21};
  err = validate_scenario(s);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->json_path, "/batch/query_lens/1");
}

TEST(ScenarioError, ToStringFormat) {
  EXPECT_EQ((ScenarioError{"f.json", "/batch/seq_lens/3", "bad"}).to_string(), "f.json: at /batch/seq_lens/3: bad");
  EXPECT_EQ((ScenarioError{"f.json", "", "bad"}).to_string(), "f.json: bad");
}

TEST(Enums, RoundTrip) {
  for (int i = 0; i <= static_cast<int>(kLastCheckKind); ++i)
    EXPECT_EQ(check_kind_from_string(to_string(static_cast<CheckKind>(i))), static_cast<CheckKind>(i));
  EXPECT_FALSE(check_kind_from_string("Pack").has_value());
  for (PageOrder o : {PageOrder::kContiguous, PageOrder::kShuffled, PageOrder::kReversed})
    EXPECT_EQ(page_order_from_string(to_string(o)), o);
  EXPECT_FALSE(page_order_from_string("random").has_value());
}

// --- Listing ------------------------------------------------------------------------------------

TEST(ListScenarioFiles, RecursiveSortedJsonOnly) {
  TempDir dir;
  dir.write("b.json", "{}");
  dir.write("a.json", "{}");
  dir.write("sub/c.json", "{}");
  dir.write("sub/deeper/a.json", "{}");
  dir.write("notes.txt", "x");
  dir.write("sub/d.json.bak", "x");
  const std::vector<std::string> files = list_scenario_files(dir.path());
  const std::string root = dir.path();
  EXPECT_EQ(files, (std::vector<std::string>{root + "/a.json", root + "/b.json", root + "/sub/c.json",
                                             root + "/sub/deeper/a.json"}));
  EXPECT_TRUE(list_scenario_files(root + "/absent").empty());
}

// --- The shipped suite --------------------------------------------------------------------------

#ifdef MLA_SOURCE_DIR
TEST(ShippedSuite, EveryFileLoadsMaterialisesAndIsNamedAfterItsFile) {
  const std::vector<std::string> files = list_scenario_files(std::string(MLA_SOURCE_DIR) + "/scenarios/suite");
  ASSERT_FALSE(files.empty());
  std::set<std::string> names;
  // A rough cost model of a single-threaded CPU run (tokens packed, rows gathered, indices
  // converted); the suite must stay far below a minute on two cores.
  int64_t work = 0;
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    auto result = load_scenario(file);
    if (auto* err = std::get_if<ScenarioError>(&result)) {
      ADD_FAILURE() << err->to_string();
      continue;
    }
    const Scenario& s = std::get<Scenario>(result);
    EXPECT_EQ(s.name, fs::path(file).stem().string());
    EXPECT_TRUE(names.insert(s.name).second);
    EXPECT_FALSE(s.description.empty());
    const Batch b = materialise(s);
    work += static_cast<int64_t>(b.all_slots.size());
    for (const ResolvedGather& g : b.gathers) work += g.num_rows;
    for (const ConvertCase& c : s.converts) {
      const int64_t rows = c.rows == ConvertRows::kDecode ? b.num_decode_tokens : b.num_tokens;
      work += rows * s.model.topk * c.dcp_world_size / 8;
    }
  }
  EXPECT_LT(work, 2'000'000) << "the shipped suite has grown too heavy for CI";
  // scenarios/README.md has a line for every file.
  std::ifstream readme(std::string(MLA_SOURCE_DIR) + "/scenarios/README.md");
  const std::string listing((std::istreambuf_iterator<char>(readme)), std::istreambuf_iterator<char>());
  for (const std::string& file : files)
    EXPECT_NE(listing.find("`" + fs::path(file).filename().string() + "`"), std::string::npos) << file;
  for (const char* spec7 : {"vllm_mixed_small", "vllm_mixed_medium", "vllm_small_prefill", "vllm_medium_prefill",
                            "vllm_single_prefill", "vllm_large_q_prefill", "vllm_large_q_pure_prefill"})
    EXPECT_EQ(names.count(spec7), 1u) << spec7;
}

// The example at the top of docs/scenarios.md is a valid scenario.
TEST(Docs, ExampleScenarioLoads) {
  std::ifstream in(std::string(MLA_SOURCE_DIR) + "/docs/scenarios.md");
  ASSERT_TRUE(in.good());
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t begin = text.find("```json\n");
  ASSERT_NE(begin, std::string::npos);
  const size_t end = text.find("```", begin + 8);
  ASSERT_NE(end, std::string::npos);
  TempDir dir;
  const Scenario s = load_ok(dir.write("example.json", text.substr(begin + 8, end - begin - 8)));
  EXPECT_EQ(s.name, "vllm_mixed_small");
  EXPECT_EQ(materialise(s).gathers.size(), 4u + 1u);
}
#endif

}  // namespace
}  // namespace mla
