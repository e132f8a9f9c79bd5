// Each failure injection, run through the real pipeline on the host backend, must end in its
// expected verdict on its expected check; without injection the same scenario passes. This is the
// harness proving it catches docs/semantics.md §6. Whether an injection was exercised is decided
// by its own condition (the checks' injection_applied flag), in both directions.
#include <gtest/gtest.h>

#include "lib/backends/injection.h"
#include "lib/run/scenario_run.h"
#include "tests/common/small_scenario.h"

namespace mla {
namespace {

// A multi-token decode (2 tokens), a shorter decode-like request the uniform rule counts as a
// prefill, and two prefills with cached context longer than one chunk, so every injection has
// something to break: decode-only convert rows (with indices past the table width), a chunk with
// nonzero seq_starts, dense prefills next to sparse decodes, two split rules that disagree.
Scenario mixed_scenario() {
  Scenario s = test::small_scenario("injection_probe", 7, 4, 96, 16, {40, 33, 90, 70}, {2, 1, 9, 5});
  s.cache.page_order = PageOrder::kShuffled;
  s.batch.decode_threshold = 2;
  s.attention.workspace_rows = 48;
  GatherCase chunks;
  chunks.name = "chunks";
  chunks.chunked_context_rows = 24;
  s.gathers.push_back(chunks);
  ConvertCase decode;
  decode.name = "decode";
  decode.rows = ConvertRows::kDecode;
  decode.invalid.minus_one = 0.1;
  decode.invalid.past_table = 0.3;
  s.converts.push_back(decode);
  s.checks = {CheckKind::kPack, CheckKind::kGather, CheckKind::kConvert, CheckKind::kLayout, CheckKind::kForward};
  return s;
}

Verdict verdict_of(const ScenarioResult& r, const std::string& check) {
  Verdict v = Verdict::kPass;
  bool found = false;
  for (const auto& c : r.checks)
    if (c.check == check) {
      v = worst(v, c.verdict);
      found = true;
    }
  EXPECT_TRUE(found) << "no " << check << " check in the result";
  return v;
}

TEST(InjectionCaught, CleanRunPasses) {
  auto backend = make_host_backend();
  const ScenarioResult r = run_scenario(mixed_scenario(), *backend, Injection::kNone);
  EXPECT_TRUE(r.error.empty()) << r.error;
  for (const auto& c : r.checks) EXPECT_EQ(c.verdict, Verdict::kPass) << c.id << ": " << c.reason;
  EXPECT_EQ(r.verdict, Verdict::kPass);
}

class EachInjection : public ::testing::TestWithParam<InjectionInfo> {};

TEST_P(EachInjection, EndsInItsExpectedVerdictOnItsCheck) {
  const InjectionInfo& info = GetParam();
  auto backend = make_host_backend();
  const ScenarioResult r = run_scenario(mixed_scenario(), *backend, info.injection);
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_STREQ(to_string(verdict_of(r, info.expected_check)), info.expected_verdict) << info.name;
  // Checks the injection does not touch still pass (the forward runs every stage, so it may
  // fail too).
  for (const auto& c : r.checks) {
    if (c.check != info.expected_check && c.check != "forward") {
      EXPECT_EQ(c.verdict, Verdict::kPass) << info.name << " / " << c.id;
    }
  }
  EXPECT_TRUE(is_failure(r.verdict));
}

// The checks record whether the injection altered anything; the outcome follows from that.
TEST_P(EachInjection, IsExercisedAndCaughtByItsOwnCondition) {
  const InjectionInfo& info = GetParam();
  auto backend = make_host_backend();
  const ScenarioResult r = run_scenario(mixed_scenario(), *backend, info.injection);
  bool applied_on_expected = false;
  for (const auto& c : r.checks) {
    ASSERT_EQ(c.metrics.extra.count(kInjectionAppliedMetric), c.verdict == Verdict::kSkip && c.id == c.check ? 0u : 1u)
        << c.id;
    if (c.check == info.expected_check && c.metrics.extra.count(kInjectionAppliedMetric))
      applied_on_expected |= c.metrics.extra.at(kInjectionAppliedMetric) > 0;
  }
  EXPECT_TRUE(applied_on_expected) << info.name;
  const InjectionOutcome o = injection_outcome(info.injection, {r});
  EXPECT_TRUE(o.exercised) << o.summary;
  EXPECT_TRUE(o.caught) << o.summary;
  EXPECT_TRUE(o.expected_seen) << o.summary;
}

INSTANTIATE_TEST_SUITE_P(All, EachInjection, ::testing::ValuesIn(all_injections()),
                         [](const auto& p) {
                           std::string n = p.param.name;
                           for (auto& ch : n) if (ch == '-') ch = '_';
                           return n;
                         });

// The cache-path injections also break the forward, where they live in production.
TEST(InjectionCaught, CachePathInjectionsBreakTheForwardToo) {
  auto backend = make_host_backend();
  for (Injection inj : {Injection::kUnboundedConvert, Injection::kFlatFp8Gather, Injection::kIgnoreSeqStarts}) {
    const ScenarioResult r = run_scenario(mixed_scenario(), *backend, inj);
    EXPECT_TRUE(is_failure(verdict_of(r, "forward"))) << to_string(inj);
  }
}

// Without an injection no check carries the flag (reports and baselines stay as they were).
TEST(InjectionCaught, NoFlagWithoutAnInjection) {
  auto backend = make_host_backend();
  const ScenarioResult r = run_scenario(mixed_scenario(), *backend, Injection::kNone);
  for (const auto& c : r.checks) EXPECT_EQ(c.metrics.extra.count(kInjectionAppliedMetric), 0u) << c.id;
}

Scenario all_decodes() {
  Scenario s = mixed_scenario();
  s.name = "all_decodes";
  s.batch.seq_lens = {40, 33, 90};
  s.batch.query_lens = {2, 2, 2};
  return s;
}

// An injection whose condition the scenario never meets alters nothing: NOT EXERCISED, whatever
// checks ran, and no check fails.
TEST(InjectionOutcome, AConditionNeverMetIsNotExercised) {
  auto backend = make_host_backend();
  struct Case {
    const char* what;
    Injection injection;
    Scenario scenario;
  };
  Scenario zero_starts = mixed_scenario();  // explicit gathers only, every seq_start 0
  zero_starts.name = "zero_starts";
  zero_starts.gathers = {GatherCase{"from_zero", {0, 2, 4, 13}, std::vector<int32_t>{0, 0, 0, 0}, 20, std::nullopt}};
  zero_starts.attention.workspace_rows = 300;  // chunks of 96 rows: one per request, every one from 0
  zero_starts.checks = {CheckKind::kGather, CheckKind::kForward};
  Scenario uniform = mixed_scenario();  // both decode-count rules agree
  uniform.batch.query_lens = {2, 2, 9, 5};
  Scenario inside_width = mixed_scenario();  // no index reaches the width
  inside_width.converts[0].invalid.past_table = 0.0;
  const Case cases[] = {
      {"unbounded-convert on an all-decode batch", Injection::kUnboundedConvert, all_decodes()},
      {"full-batch-metadata on an all-decode batch", Injection::kFullBatchMetadata, all_decodes()},
      {"ignore-seq-starts where every start is 0", Injection::kIgnoreSeqStarts, zero_starts},
      {"split-mismatch where both rules agree", Injection::kSplitMismatch, uniform},
      {"convert-bound-off-by-one with every index inside the width", Injection::kConvertBoundOffByOne, inside_width},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const ScenarioResult r = run_scenario(c.scenario, *backend, c.injection);
    ASSERT_TRUE(r.error.empty()) << r.error;
    for (const auto& check : r.checks) EXPECT_FALSE(is_failure(check.verdict)) << check.id << ": " << check.reason;
    const InjectionOutcome o = injection_outcome(c.injection, {r});
    EXPECT_FALSE(o.exercised);
    EXPECT_FALSE(o.caught);
    EXPECT_NE(o.summary.find("NOT EXERCISED"), std::string::npos) << o.summary;
  }
}

// Caught where it applied, even when the injection's expected check is not in the scenario: the
// unbounded converter of the forward step overruns the forward's guards.
TEST(InjectionOutcome, CaughtByAnotherCheckWhereItApplied) {
  auto backend = make_host_backend();
  Scenario s = mixed_scenario();
  s.checks = {CheckKind::kForward};
  const ScenarioResult r = run_scenario(s, *backend, Injection::kUnboundedConvert);
  const InjectionOutcome o = injection_outcome(Injection::kUnboundedConvert, {r});
  EXPECT_TRUE(o.exercised) << o.summary;
  EXPECT_TRUE(o.caught) << o.summary;
  EXPECT_FALSE(o.expected_seen) << o.summary;
  EXPECT_NE(o.summary.find("forward OOB"), std::string::npos) << o.summary;
  EXPECT_NE(o.summary.find("the expected convert OOB was not among them"), std::string::npos) << o.summary;
}

CheckResult flagged(const std::string& check, Verdict v, double applied) {
  CheckResult c;
  c.id = c.check = check;
  c.verdict = v;
  c.metrics.extra[kInjectionAppliedMetric] = applied;
  return c;
}

// The outcome counts only results the injection altered, in both directions: a failure where it
// did not apply catches nothing, and a pass where it applied is a miss.
TEST(InjectionOutcome, OnlyAlteredResultsCount) {
  ScenarioResult unrelated_failure;
  unrelated_failure.name = "a";
  unrelated_failure.checks = {flagged("convert", Verdict::kOob, 0.0), flagged("gather", Verdict::kPass, 0.0)};
  InjectionOutcome o = injection_outcome(Injection::kUnboundedConvert, {unrelated_failure});
  EXPECT_FALSE(o.exercised);
  EXPECT_FALSE(o.caught);

  ScenarioResult missed;
  missed.name = "b";
  missed.checks = {flagged("convert", Verdict::kPass, 1.0)};
  o = injection_outcome(Injection::kUnboundedConvert, {unrelated_failure, missed});
  EXPECT_TRUE(o.exercised);
  EXPECT_FALSE(o.caught);
  EXPECT_NE(o.summary.find("NOT CAUGHT"), std::string::npos) << o.summary;
  EXPECT_NE(o.summary.find("b"), std::string::npos) << o.summary;

  ScenarioResult errored;  // an ERROR is no catch
  errored.name = "c";
  errored.checks = {flagged("convert", Verdict::kError, 1.0)};
  EXPECT_FALSE(injection_outcome(Injection::kUnboundedConvert, {errored}).caught);

  ScenarioResult caught;
  caught.name = "d";
  caught.checks = {flagged("convert", Verdict::kOob, 1.0)};
  o = injection_outcome(Injection::kUnboundedConvert, {missed, caught});
  EXPECT_TRUE(o.caught);
  EXPECT_TRUE(o.expected_seen);
  EXPECT_NE(o.summary.find("caught in 1 of 2 scenarios"), std::string::npos) << o.summary;
  EXPECT_NE(o.summary.find("applied without a failing check in b"), std::string::npos) << o.summary;
}

TEST(InjectionNames, RoundTrip) {
  for (const auto& i : all_injections()) EXPECT_EQ(injection_from_string(i.name), i.injection);
  EXPECT_EQ(injection_from_string(""), Injection::kNone);
  EXPECT_FALSE(injection_from_string("no-such-bug").has_value());
}

}  // namespace
}  // namespace mla
