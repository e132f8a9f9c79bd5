// lib/fuzz/shrink: failure signatures; candidates are valid and simpler; the search keeps the
// failing check and verdict, reaches the floor of what the failure does not need, does not depend
// on how many candidates run at once, and stops at its budget. With real injections on the host
// backend (candidates in child processes through the suite runner) the shrunk case still fails
// the same way, is small, and passes without the injection.
#include "lib/fuzz/shrink.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "lib/fuzz/scenario_grammar.h"
#include "lib/run/suite_runner.h"
#include "lib/scenario/scenario_writer.h"

namespace mla {
namespace {

CheckResult check(const std::string& kind, Verdict v) {
  CheckResult c;
  c.id = c.check = kind;
  c.verdict = v;
  return c;
}

ScenarioResult result_of(std::vector<CheckResult> checks, std::string error = "") {
  ScenarioResult r;
  r.checks = std::move(checks);
  r.error = std::move(error);
  r.verdict = scenario_verdict(r);
  return r;
}

TEST(FailureSignature, FirstFailingCheckThenScenarioError) {
  EXPECT_FALSE(first_failure(result_of({check("pack", Verdict::kPass), check("gather", Verdict::kSkip)})));
  const auto f = first_failure(result_of({check("pack", Verdict::kPass), check("convert", Verdict::kOob),
                                          check("gather", Verdict::kFail)}));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->check, "convert");
  EXPECT_EQ(f->verdict, Verdict::kOob);
  EXPECT_EQ(f->to_string(), "convert OOB");

  const auto crash = first_failure(result_of({check("pack", Verdict::kPass)}, "killed by signal 11 (SIGSEGV)"));
  ASSERT_TRUE(crash);
  EXPECT_EQ(crash->check, "");
  EXPECT_FALSE(crash->timeout);
  const auto hang = first_failure(result_of({}, "timed out after 10 s (process killed)"));
  ASSERT_TRUE(hang);
  EXPECT_TRUE(hang->timeout);
}

TEST(FailureSignature, ShownOnlyWithTheSameCheckAndVerdict) {
  const FailureSignature gather_fail{"gather", Verdict::kFail, false};
  EXPECT_TRUE(shows_failure(result_of({check("pack", Verdict::kFail), check("gather", Verdict::kFail)}), gather_fail));
  EXPECT_FALSE(shows_failure(result_of({check("gather", Verdict::kOob)}), gather_fail));
  EXPECT_FALSE(shows_failure(result_of({check("convert", Verdict::kFail)}), gather_fail));
  EXPECT_FALSE(shows_failure(result_of({check("gather", Verdict::kPass)}), gather_fail));
  const FailureSignature crash{"", Verdict::kError, false};
  EXPECT_TRUE(shows_failure(result_of({}, "killed by signal 6 (SIGABRT)"), crash));
  EXPECT_FALSE(shows_failure(result_of({}, "timed out after 10 s (process killed)"), crash));
  EXPECT_FALSE(shows_failure(result_of({check("pack", Verdict::kPass)}), crash));
}

// Four requests, three checks, cases of every kind, pages and options away from the simplest.
Scenario big_scenario() {
  Scenario s;
  s.name = "big";
  s.seed = 9;
  s.model = {128, 256, 16, 0.1};
  s.batch.seq_lens = {50, 30, 12, 70, 0};
  s.batch.query_lens = {1, 1, 5, 10, 0};
  s.cache.spare_blocks = 5;
  s.cache.page_order = PageOrder::kReversed;
  s.cache.page_padding_bytes = 32;
  s.block_table.extra_columns = 3;
  s.block_table.stride_padding = 2;
  GatherCase chunks;
  chunks.name = "chunks";
  chunks.chunked_context_rows = 8;
  GatherCase starts;
  starts.name = "starts";
  starts.workspace_starts = {1, 20, 40, 41, 60};
  starts.seq_starts = std::vector<int32_t>{3, 0, 12, 40, 0};
  starts.num_rows = 60;
  s.gathers = {chunks, starts};
  ConvertCase c;
  c.name = "c";
  c.rows = ConvertRows::kDecode;
  c.invalid.minus_one = 0.1;
  c.invalid.past_table = 0.05;
  c.dcp_world_size = 4;
  c.dcp_interleave = 2;
  s.converts = {c};
  s.checks = {CheckKind::kPack, CheckKind::kGather, CheckKind::kConvert};
  s.attention.workspace_rows = 16;
  s.cache.num_blocks = blocks_needed(s.batch, 16) + 5;
  return s;
}

TEST(ShrinkCandidates, AreValidSimplerAndNew) {
  const Scenario s = big_scenario();
  ASSERT_FALSE(validate_scenario(s).has_value());
  const auto cands = shrink_candidates(s, {"gather", Verdict::kFail, false});
  ASSERT_GT(cands.size(), 20u);
  const ScenarioSize before = scenario_size(s);
  std::vector<std::string> texts;
  for (const Scenario& c : cands) {
    EXPECT_FALSE(validate_scenario(c).has_value()) << scenario_to_text(c);
    const ScenarioSize z = scenario_size(c);
    EXPECT_LE(z.requests, before.requests);
    EXPECT_LE(z.max_seq_len, before.max_seq_len);
    EXPECT_LE(z.heads, before.heads);
    EXPECT_LE(z.topk, before.topk);
    texts.push_back(scenario_to_text(c));
  }
  std::sort(texts.begin(), texts.end());
  EXPECT_EQ(std::adjacent_find(texts.begin(), texts.end()), texts.end()) << "a candidate listed twice";
  EXPECT_EQ(std::count(texts.begin(), texts.end(), scenario_to_text(s)), 0);
}

TEST(ShrinkCandidates, RemovingARequestKeepsTheOtherRequestsGatherRows) {
  const Scenario s = big_scenario();
  for (const Scenario& c : shrink_candidates(s, {"gather", Verdict::kFail, false})) {
    if (c.batch.seq_lens.size() != 4 || c.batch.seq_lens[0] != 30) continue;  // request 0 removed
    for (const GatherCase& g : c.gathers) {
      if (g.name != "starts") continue;
      EXPECT_EQ(g.workspace_starts, (std::vector<int32_t>{1, 21, 22, 41}));  // lead 1, rows 20, 1, 19, 0
      EXPECT_EQ(*g.seq_starts, (std::vector<int32_t>{0, 12, 40, 0}));
      EXPECT_EQ(g.num_rows, 41);
      return;
    }
  }
  ADD_FAILURE() << "no candidate without request 0";
}

// An evaluator in this process: gather FAILs whenever some request is at least 10 tokens long
// and gather is listed; everything else passes.
std::vector<ScenarioResult> long_request_fails(const std::vector<Scenario>& cands, int64_t* runs) {
  std::vector<ScenarioResult> out;
  for (const Scenario& s : cands) {
    ++*runs;
    const bool is_long = std::any_of(s.batch.seq_lens.begin(), s.batch.seq_lens.end(), [](int32_t l) { return l >= 10; });
    std::vector<CheckResult> checks;
    for (CheckKind k : s.checks)
      checks.push_back(check(to_string(k), k == CheckKind::kGather && is_long ? Verdict::kFail : Verdict::kPass));
    out.push_back(result_of(checks));
  }
  return out;
}

TEST(ShrinkScenario, ReachesTheFloorOfWhatTheFailureDoesNotNeed) {
  const Scenario s = big_scenario();
  const FailureSignature target{"gather", Verdict::kFail, false};
  int64_t runs = 0;
  const ShrinkEvaluate eval = [&](const std::vector<Scenario>& c) { return long_request_fails(c, &runs); };
  const ShrinkOutcome out = shrink_scenario(s, long_request_fails({s}, &runs)[0], target, eval);
  const Scenario& m = out.scenario;
  EXPECT_FALSE(out.budget_spent);
  EXPECT_EQ(out.candidates_run + 1, runs);
  EXPECT_TRUE(shows_failure(out.result, target));
  ASSERT_EQ(m.batch.seq_lens.size(), 1u);
  EXPECT_EQ(m.batch.seq_lens[0], 10);  // the shortest length that still fails
  EXPECT_EQ(m.checks, std::vector<CheckKind>{CheckKind::kGather});
  EXPECT_TRUE(m.converts.empty());
  EXPECT_EQ(m.gathers.size(), 1u);  // the failing check keeps one case
  EXPECT_EQ(m.model.heads, 16);
  EXPECT_EQ(m.model.topk, 64);
  EXPECT_EQ(m.model.block_size, 64);
  EXPECT_EQ(m.model.scale, ModelDims{}.scale);
  EXPECT_EQ(m.cache.spare_blocks, 0);
  EXPECT_EQ(m.cache.page_order, PageOrder::kContiguous);
  EXPECT_EQ(m.cache.page_padding_bytes, 0);
  EXPECT_EQ(m.block_table.extra_columns, 0);
  EXPECT_EQ(m.block_table.stride_padding, 0);
  EXPECT_EQ(m.attention.workspace_rows, 0);
  EXPECT_FALSE(validate_scenario(m).has_value());
}

TEST(ShrinkScenario, TheBatchSizeChangesNothingButParallelism) {
  const Scenario s = big_scenario();
  const FailureSignature target{"gather", Verdict::kFail, false};
  int64_t runs = 0;
  const ShrinkEvaluate eval = [&](const std::vector<Scenario>& c) { return long_request_fails(c, &runs); };
  const ScenarioResult r = long_request_fails({s}, &runs)[0];
  std::string first;
  for (size_t batch : {1u, 3u, 8u}) {
    ShrinkOptions o;
    o.batch = batch;
    const std::string text = scenario_to_text(shrink_scenario(s, r, target, eval, o).scenario);
    if (first.empty()) first = text;
    EXPECT_EQ(text, first) << "batch " << batch;
  }
}

TEST(ShrinkScenario, StopsAtItsBudget) {
  const Scenario s = big_scenario();
  const FailureSignature target{"gather", Verdict::kFail, false};
  int64_t runs = 0;
  const ShrinkEvaluate eval = [&](const std::vector<Scenario>& c) { return long_request_fails(c, &runs); };
  ShrinkOptions o;
  o.budget_s = 0.0;
  const ShrinkOutcome out = shrink_scenario(s, long_request_fails({s}, &runs)[0], target, eval, o);
  EXPECT_TRUE(out.budget_spent);
  EXPECT_EQ(out.candidates_run, 0);
  EXPECT_EQ(scenario_to_text(out.scenario), scenario_to_text(s));
}

// --- Real injections on the host backend, candidates in child processes ----------------------------

std::vector<ScenarioResult> run_on_host(const std::vector<Scenario>& scenarios, Injection injection) {
  SuiteOptions opt;
  opt.scenarios = scenarios;
  opt.backend.kind = BackendChoice::Kind::kHost;
  opt.injection = injection;
  opt.jobs = 2;
  opt.timeout_s = 60;
  opt.repro_prefix = "mla-check";
  return run_suite(opt);
}

// The first of seed 1's fuzz cases that shows the injection's failure: (scenario, its result).
std::pair<Scenario, ScenarioResult> first_failing_case(Injection injection, const FailureSignature& target) {
  for (uint64_t i = 0; i < 200; i += 4) {
    std::vector<Scenario> group;
    for (uint64_t j = i; j < i + 4; ++j) group.push_back(generate_fuzz_scenario(1, j));
    const auto results = run_on_host(group, injection);
    for (size_t k = 0; k < group.size(); ++k)
      if (shows_failure(results[k], target)) return {group[k], results[k]};
  }
  return {};
}

void expect_shrinks_on_host(Injection injection) {
  const InjectionInfo& info = injection_info(injection);
  const FailureSignature target{info.expected_check, *verdict_from_string(info.expected_verdict), false};
  const auto [failing, result] = first_failing_case(injection, target);
  ASSERT_FALSE(failing.name.empty()) << "no case of seed 1 shows " << target.to_string();
  ShrinkOptions o;
  o.batch = 2;
  o.budget_s = 240;
  const ShrinkOutcome out = shrink_scenario(
      failing, result, target, [&](const std::vector<Scenario>& c) { return run_on_host(c, injection); }, o);
  const ScenarioSize before = scenario_size(failing), after = scenario_size(out.scenario);
  SCOPED_TRACE(info.name + std::string(": ") + before.to_string() + " -> " + after.to_string());
  EXPECT_GT(out.steps, 0);
  EXPECT_LE(after.requests, before.requests);
  EXPECT_LE(after.max_seq_len, before.max_seq_len);
  EXPECT_LT(after.total_seq_len + after.checks + after.pages, before.total_seq_len + before.checks + before.pages);
  EXPECT_LE(after.requests, 4);
  EXPECT_LE(after.max_seq_len, 64);
  // Run again, as the written file would be: the same failure with the injection, none without.
  EXPECT_TRUE(shows_failure(run_on_host({out.scenario}, injection)[0], target));
  EXPECT_FALSE(first_failure(run_on_host({out.scenario}, Injection::kNone)[0]).has_value());
}

TEST(ShrinkOnHost, IgnoredSeqStartsShrinkToASmallGatherFailure) { expect_shrinks_on_host(Injection::kIgnoreSeqStarts); }
TEST(ShrinkOnHost, UnboundedConvertShrinksToASmallConvertOob) { expect_shrinks_on_host(Injection::kUnboundedConvert); }
TEST(ShrinkOnHost, SplitMismatchShrinksToASmallForwardFailure) { expect_shrinks_on_host(Injection::kSplitMismatch); }

}  // namespace
}  // namespace mla
