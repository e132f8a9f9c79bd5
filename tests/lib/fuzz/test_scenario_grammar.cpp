// lib/fuzz/scenario_grammar: every generated scenario is valid (validate_scenario, and a file the
// loader reads back to the same scenario), generation is a pure function of (seed, index), the
// attention work stays under the cap, --check limits the checks, and a few hundred cases reach
// every axis of the scenario format (each counted here by its own predicate on the Scenario).
#include "lib/fuzz/scenario_grammar.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>

#include "lib/scenario/scenario_writer.h"
#include "tests/common/scenario_equal.h"
#include "tests/common/temp_dir.h"

namespace mla {
namespace {

bool has(const Scenario& s, CheckKind k) { return std::find(s.checks.begin(), s.checks.end(), k) != s.checks.end(); }
bool any_attention(const Scenario& s) { return std::any_of(s.checks.begin(), s.checks.end(), is_attention_check); }
int32_t ctx(const Scenario& s, size_t r) { return s.batch.seq_lens[r] - s.batch.query_lens[r]; }
int32_t decodes(const Scenario& s) { return count_decodes(s.batch.query_lens, s.batch.decode_threshold); }

template <typename Pred>
bool any_request(const Scenario& s, Pred p) {
  for (size_t r = 0; r < s.batch.seq_lens.size(); ++r)
    if (p(r)) return true;
  return false;
}
template <typename Pred>
bool any_gather(const Scenario& s, Pred p) {
  return has(s, CheckKind::kGather) && std::any_of(s.gathers.begin(), s.gathers.end(), p);
}
template <typename Pred>
bool any_convert(const Scenario& s, Pred p) {
  return has(s, CheckKind::kConvert) && std::any_of(s.converts.begin(), s.converts.end(), p);
}
int32_t table_width(const Scenario& s) {
  int32_t w = 0;
  for (int32_t len : s.batch.seq_lens) w = std::max(w, (len + s.model.block_size - 1) / s.model.block_size);
  return w + s.block_table.extra_columns;
}

// The axes of docs/fuzzing.md, each a predicate on one scenario.
const std::map<std::string, std::function<bool(const Scenario&)>>& axes() {
  static const std::map<std::string, std::function<bool(const Scenario&)>> kAxes = {
      {"batch: decodes then prefills", [](const Scenario& s) { return decodes(s) > 0 && decodes(s) < static_cast<int32_t>(s.batch.seq_lens.size()); }},
      {"batch: no decode", [](const Scenario& s) { return decodes(s) == 0; }},
      {"batch: only decodes", [](const Scenario& s) { return decodes(s) == static_cast<int32_t>(s.batch.seq_lens.size()); }},
      {"batch: multi-token decodes (threshold > 1)", [](const Scenario& s) { return s.batch.decode_threshold > 1 && decodes(s) > 0 && s.batch.query_lens[0] > 1; }},
      {"batch: decode-like request of another length after the decodes", [](const Scenario& s) {
         const int32_t d = decodes(s);
         return d > 0 && d < static_cast<int32_t>(s.batch.query_lens.size()) && s.batch.query_lens[d] >= 1 &&
                s.batch.query_lens[d] <= s.batch.decode_threshold;
       }},
      {"batch: zero-token padding request", [](const Scenario& s) { return any_request(s, [&](size_t r) { return s.batch.query_lens[r] == 0 && s.batch.seq_lens[r] == 0; }); }},
      {"batch: zero-token request with cached tokens", [](const Scenario& s) { return any_request(s, [&](size_t r) { return s.batch.query_lens[r] == 0 && s.batch.seq_lens[r] > 0; }); }},
      {"batch: padding request at the end", [](const Scenario& s) { return s.batch.query_lens.back() == 0; }},
      {"batch: prefill below top-k", [](const Scenario& s) { return any_request(s, [&](size_t r) { return r >= static_cast<size_t>(decodes(s)) && s.batch.query_lens[r] > 0 && s.batch.seq_lens[r] < s.model.topk; }); }},
      {"batch: prefill equal to top-k", [](const Scenario& s) { return any_request(s, [&](size_t r) { return r >= static_cast<size_t>(decodes(s)) && s.batch.query_lens[r] > 0 && s.batch.seq_lens[r] == s.model.topk; }); }},
      {"batch: prefill above top-k", [](const Scenario& s) { return any_request(s, [&](size_t r) { return r >= static_cast<size_t>(decodes(s)) && s.batch.query_lens[r] > 0 && s.batch.seq_lens[r] > s.model.topk; }); }},
      {"batch: prefix-cache hit (prefill with context)", [](const Scenario& s) { return any_request(s, [&](size_t r) { return r >= static_cast<size_t>(decodes(s)) && s.batch.query_lens[r] > 0 && ctx(s, r) > 0; }); }},
      {"batch: decode without context", [](const Scenario& s) { return any_request(s, [&](size_t r) { return r < static_cast<size_t>(decodes(s)) && ctx(s, r) == 0; }); }},
      {"batch: one request", [](const Scenario& s) { return s.batch.seq_lens.size() == 1; }},
      {"batch: six or more requests", [](const Scenario& s) { return s.batch.seq_lens.size() >= 6; }},
      {"batch: generated", [](const Scenario& s) { return s.generator.has_value(); }},
      {"model: block size 1", [](const Scenario& s) { return s.model.block_size == 1; }},
      {"model: odd block size > 1", [](const Scenario& s) { return s.model.block_size > 1 && s.model.block_size % 2 == 1; }},
      {"model: block size 64", [](const Scenario& s) { return s.model.block_size == 64; }},
      {"model: block size 128", [](const Scenario& s) { return s.model.block_size == 128; }},
      {"model: top-k not a multiple of 64 (cache path)", [](const Scenario& s) { return s.model.topk % 64 != 0; }},
      {"model: scale set", [](const Scenario& s) { return s.model.scale != ModelDims{}.scale; }},
      {"cache: dtype other than fp8_ds_mla", [](const Scenario& s) { return s.cache.dtype != "fp8_ds_mla"; }},
      {"cache: no spare pages", [](const Scenario& s) { return s.cache.spare_blocks == 0; }},
      {"cache: explicit pool", [](const Scenario& s) { return s.cache.num_blocks != blocks_needed(s.batch, s.model.block_size) + s.cache.spare_blocks; }},
      {"cache: pages contiguous", [](const Scenario& s) { return s.cache.page_order == PageOrder::kContiguous; }},
      {"cache: pages shuffled", [](const Scenario& s) { return s.cache.page_order == PageOrder::kShuffled; }},
      {"cache: pages reversed", [](const Scenario& s) { return s.cache.page_order == PageOrder::kReversed; }},
      {"cache: page padding", [](const Scenario& s) { return s.cache.page_padding_bytes > 0; }},
      {"table: no extra column", [](const Scenario& s) { return s.block_table.extra_columns == 0; }},
      {"table: several extra columns", [](const Scenario& s) { return s.block_table.extra_columns >= 2; }},
      {"table: stride padding", [](const Scenario& s) { return s.block_table.stride_padding > 0; }},
      {"gather: chunked context", [](const Scenario& s) { return any_gather(s, [](const GatherCase& g) { return g.chunked_context_rows.has_value(); }); }},
      {"gather: chunk rows not a multiple of the block size", [](const Scenario& s) { return any_gather(s, [&](const GatherCase& g) { return g.chunked_context_rows && *g.chunked_context_rows % s.model.block_size != 0; }); }},
      {"gather: explicit without seq_starts", [](const Scenario& s) { return any_gather(s, [](const GatherCase& g) { return !g.chunked_context_rows && !g.seq_starts; }); }},
      {"gather: zero-length request at the end", [](const Scenario& s) { return any_gather(s, [](const GatherCase& g) { return !g.chunked_context_rows && g.num_rows == g.workspace_starts.back(); }); }},
      {"gather: rows before the first request", [](const Scenario& s) { return any_gather(s, [](const GatherCase& g) { return !g.chunked_context_rows && g.workspace_starts[0] > 0; }); }},
      {"gather: start at a request's end", [](const Scenario& s) { return any_gather(s, [&](const GatherCase& g) { return g.seq_starts && any_request(s, [&](size_t r) { return (*g.seq_starts)[r] == s.batch.seq_lens[r] && s.batch.seq_lens[r] > 0; }); }); }},
      {"gather: start past the block table", [](const Scenario& s) { return any_gather(s, [&](const GatherCase& g) { return g.seq_starts && any_request(s, [&](size_t r) { return (*g.seq_starts)[r] >= table_width(s) * s.model.block_size; }); }); }},
      {"gather: start inside a block", [](const Scenario& s) { return any_gather(s, [&](const GatherCase& g) { return g.seq_starts && any_request(s, [&](size_t r) { return (*g.seq_starts)[r] % s.model.block_size != 0; }); }); }},
      {"convert: decode rows", [](const Scenario& s) { return any_convert(s, [](const ConvertCase& c) { return c.rows == ConvertRows::kDecode; }); }},
      {"convert: all rows with decodes and prefills", [](const Scenario& s) { return decodes(s) > 0 && any_request(s, [&](size_t r) { return r >= static_cast<size_t>(decodes(s)) && s.batch.query_lens[r] > 0; }) && any_convert(s, [](const ConvertCase& c) { return c.rows == ConvertRows::kAll; }); }},
      {"convert: invalid -1", [](const Scenario& s) { return any_convert(s, [](const ConvertCase& c) { return c.invalid.minus_one > 0; }); }},
      {"convert: invalid INT_MIN", [](const Scenario& s) { return any_convert(s, [](const ConvertCase& c) { return c.invalid.int_min > 0; }); }},
      {"convert: invalid large positive", [](const Scenario& s) { return any_convert(s, [](const ConvertCase& c) { return c.invalid.large_positive > 0; }); }},
      {"convert: invalid past the table", [](const Scenario& s) { return any_convert(s, [](const ConvertCase& c) { return c.invalid.past_table > 0; }); }},
      {"convert: invalid negative block", [](const Scenario& s) { return any_convert(s, [](const ConvertCase& c) { return c.invalid.negative_block > 0; }); }},
      {"convert: several invalid kinds", [](const Scenario& s) { return any_convert(s, [](const ConvertCase& c) { const InvalidMix& m = c.invalid; return (m.minus_one > 0) + (m.int_min > 0) + (m.large_positive > 0) + (m.past_table > 0) + (m.negative_block > 0) >= 3; }); }},
      {"convert: prefill workspace", [](const Scenario& s) { return any_convert(s, [](const ConvertCase& c) { return c.prefill_workspace; }); }},
      {"convert: DCP ranks", [](const Scenario& s) { return any_convert(s, [](const ConvertCase& c) { return c.dcp_world_size > 1; }); }},
      {"convert: DCP interleave > 1", [](const Scenario& s) { return any_convert(s, [](const ConvertCase& c) { return c.dcp_world_size > 1 && c.dcp_interleave > 1; }); }},
      {"attention: 16 heads", [](const Scenario& s) { return any_attention(s) && s.model.heads == 16; }},
      {"attention: 32 heads", [](const Scenario& s) { return any_attention(s) && s.model.heads == 32; }},
      {"attention: 64 heads", [](const Scenario& s) { return any_attention(s) && s.model.heads == 64; }},
      {"attention: 128 heads", [](const Scenario& s) { return any_attention(s) && s.model.heads == 128; }},
      {"attention: top-k 64", [](const Scenario& s) { return any_attention(s) && s.model.topk == 64; }},
      {"attention: top-k 256 or more", [](const Scenario& s) { return any_attention(s) && s.model.topk >= 256; }},
      {"attention: force_sparse", [](const Scenario& s) { return any_attention(s) && s.attention.force_sparse; }},
      {"attention: workspace forces several chunks", [](const Scenario& s) {
         if (!any_attention(s) || s.attention.workspace_rows == 0) return false;
         int64_t with = 0, longest = 0;
         for (size_t r = 0; r < s.batch.seq_lens.size(); ++r) {
           with += ctx(s, r) > 0;
           longest = std::max<int64_t>(longest, ctx(s, r));
         }
         return with > 0 && s.attention.workspace_rows / with < longest;
       }},
      {"attention: DCP one rank", [](const Scenario& s) { return has(s, CheckKind::kDcp) && s.attention.dcp_world_size == 1; }},
      {"attention: DCP 4 or more ranks", [](const Scenario& s) { return has(s, CheckKind::kDcp) && s.attention.dcp_world_size >= 4; }},
      {"attention: DCP interleave > 1", [](const Scenario& s) { return has(s, CheckKind::kDcp) && s.attention.dcp_interleave > 1; }},
      {"attention: mixed with cache-path checks", [](const Scenario& s) { return any_attention(s) && !std::all_of(s.checks.begin(), s.checks.end(), is_attention_check); }},
      {"check: pack", [](const Scenario& s) { return has(s, CheckKind::kPack); }},
      {"check: gather", [](const Scenario& s) { return has(s, CheckKind::kGather); }},
      {"check: convert", [](const Scenario& s) { return has(s, CheckKind::kConvert); }},
      {"check: layout", [](const Scenario& s) { return has(s, CheckKind::kLayout); }},
      {"check: sparse_mqa", [](const Scenario& s) { return has(s, CheckKind::kSparseMqa); }},
      {"check: dense_mha", [](const Scenario& s) { return has(s, CheckKind::kDenseMha); }},
      {"check: forward", [](const Scenario& s) { return has(s, CheckKind::kForward); }},
      {"check: equivalence", [](const Scenario& s) { return has(s, CheckKind::kEquivalence); }},
      {"check: dcp", [](const Scenario& s) { return has(s, CheckKind::kDcp); }},
      {"check: determinism", [](const Scenario& s) { return has(s, CheckKind::kDeterminism); }},
  };
  return kAxes;
}

TEST(ScenarioGrammar, EveryCaseIsValidAndLoadsBackUnchanged) {
  test::TempDir dir;
  for (uint64_t seed : {1ull, 2ull, 3ull, 99ull, 123456789ull, 18446744073709551615ull}) {
    for (uint64_t i = 0; i < 60; ++i) {
      const Scenario s = generate_fuzz_scenario(seed, i);
      ASSERT_FALSE(validate_scenario(s).has_value()) << s.name << ": " << validate_scenario(s)->to_string();
      const std::string path = dir.path() + "/" + s.name + ".json";
      const Status st = write_scenario_file(path, s);
      ASSERT_TRUE(st.ok()) << st.message();
      auto loaded = load_scenario(path);
      ASSERT_TRUE(std::holds_alternative<Scenario>(loaded)) << std::get<ScenarioError>(loaded).to_string();
      EXPECT_EQ(test::scenario_difference(s, std::get<Scenario>(loaded)), "") << s.name;
    }
  }
}

TEST(ScenarioGrammar, SameSeedSameScenariosWhateverRanBefore) {
  for (uint64_t i : {0ull, 1ull, 17ull, 250ull}) {
    const std::string a = scenario_to_text(generate_fuzz_scenario(42, i));
    EXPECT_EQ(a, scenario_to_text(generate_fuzz_scenario(42, i)));
    for (uint64_t j = 0; j < 5; ++j) generate_fuzz_scenario(42, j);  // generation keeps no state
    EXPECT_EQ(a, scenario_to_text(generate_fuzz_scenario(42, i)));
  }
  // Other seeds and other indices give other scenarios (names aside).
  const auto body = [](uint64_t seed, uint64_t i) {
    Scenario s = generate_fuzz_scenario(seed, i);
    s.name = "x";
    s.description.clear();
    return scenario_to_text(s);
  };
  EXPECT_NE(body(42, 3), body(43, 3));
  EXPECT_NE(body(42, 3), body(42, 4));
  EXPECT_EQ(generate_fuzz_scenario(42, 3).name, "fuzz_s42_c3");
}

TEST(ScenarioGrammar, AttentionCasesStayHostSized) {
  for (uint64_t i = 0; i < 400; ++i) {
    const Scenario s = generate_fuzz_scenario(7, i);
    if (!any_attention(s)) continue;
    EXPECT_LE(attention_work(s), kFuzzAttentionWorkCap) << s.name;
    EXPECT_EQ(s.model.topk % 64, 0) << s.name;
    EXPECT_TRUE(s.model.heads == 16 || s.model.heads == 32 || s.model.heads == 64 || s.model.heads == 128) << s.name;
    EXPECT_EQ(s.cache.dtype, "fp8_ds_mla") << s.name;
  }
}

TEST(ScenarioGrammar, CheckOptionLimitsTheChecks) {
  GrammarOptions only;
  only.checks = {CheckKind::kGather, CheckKind::kForward};
  bool saw_gather = false, saw_forward = false;
  for (uint64_t i = 0; i < 100; ++i) {
    const Scenario s = generate_fuzz_scenario(5, i, only);
    ASSERT_FALSE(s.checks.empty());
    for (CheckKind k : s.checks) EXPECT_TRUE(k == CheckKind::kGather || k == CheckKind::kForward) << to_string(k);
    saw_gather = saw_gather || has(s, CheckKind::kGather);
    saw_forward = saw_forward || has(s, CheckKind::kForward);
    EXPECT_FALSE(validate_scenario(s).has_value());
  }
  EXPECT_TRUE(saw_gather && saw_forward);
}

TEST(ScenarioGrammar, AFewHundredCasesReachEveryAxis) {
  constexpr uint64_t kCases = 400;
  std::map<std::string, int> count;
  for (const auto& [name, pred] : axes()) count[name] = 0;
  for (uint64_t i = 0; i < kCases; ++i) {
    const Scenario s = generate_fuzz_scenario(1, i);
    for (const auto& [name, pred] : axes()) count[name] += pred(s) ? 1 : 0;
  }
  std::string table;
  for (const auto& [name, n] : count) table += "  " + std::to_string(n) + "  " + name + "\n";
  std::printf("axes reached by %llu cases of seed 1:\n%s", static_cast<unsigned long long>(kCases), table.c_str());
  for (const auto& [name, n] : count) EXPECT_GE(n, 3) << name;
}

}  // namespace
}  // namespace mla
