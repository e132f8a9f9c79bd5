// Each failure injection of the cache path, run through the real pipeline on the host backend,
// must end in its expected verdict on its expected check; without injection the same scenario
// passes. This is the harness proving it catches docs/semantics.md §6.
#include <gtest/gtest.h>

#include "lib/backends/injection.h"
#include "lib/run/scenario_run.h"

namespace mla {
namespace {

// A multi-token decode (2 tokens), a shorter decode-like request the uniform rule counts as a
// prefill, and two prefills with cached context longer than one chunk, so every injection has
// something to break: decode-only convert rows, a chunk with nonzero seq_starts, dense prefills
// next to sparse decodes, two split rules that disagree.
Scenario mixed_scenario() {
  Scenario s;
  s.name = "injection_probe";
  s.file = "(test)";
  s.seed = 7;
  s.model.heads = 4;
  s.model.topk = 96;
  s.model.block_size = 16;
  s.cache.page_order = PageOrder::kShuffled;
  s.batch.seq_lens = {40, 33, 90, 70};
  s.batch.query_lens = {2, 1, 9, 5};
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

TEST(InjectionNames, RoundTrip) {
  for (const auto& i : all_injections()) EXPECT_EQ(injection_from_string(i.name), i.injection);
  EXPECT_EQ(injection_from_string(""), Injection::kNone);
  EXPECT_FALSE(injection_from_string("no-such-bug").has_value());
}

}  // namespace
}  // namespace mla
