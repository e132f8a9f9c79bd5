#include "lib/run/report.h"

#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <iterator>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "lib/run/suite_runner_children.h"

namespace mla {
namespace {

ScenarioResult sample() {
  ScenarioResult s;
  s.name = "demo";
  s.file = "scenarios/suite/demo.json";
  s.repro = "mla-check --scenario scenarios/suite/demo.json";
  CheckResult c;
  c.id = "gather/chunks[1]";
  c.check = "gather";
  c.verdict = Verdict::kFail;
  c.reason = "3 of 10 elements differ";
  c.metrics.elements = 10;
  c.metrics.mismatches = 3;
  c.metrics.bit_exact = false;
  c.metrics.max_abs_err = 0.5;
  c.metrics.cos_diff = kNaN;  // must be written as null
  c.metrics.extra["rows"] = 4;
  s.checks.push_back(c);
  s.verdict = scenario_verdict(s);
  return s;
}

TEST(Report, ScenarioRoundTripsThroughJson) {
  const ScenarioResult s = sample();
  std::string err;
  const auto back = scenario_result_from_json(scenario_result_to_json(s), &err);
  ASSERT_TRUE(back) << err;
  EXPECT_EQ(back->name, "demo");
  EXPECT_EQ(back->verdict, Verdict::kFail);
  ASSERT_EQ(back->checks.size(), 1u);
  EXPECT_EQ(back->checks[0].id, "gather/chunks[1]");
  EXPECT_EQ(back->checks[0].metrics.mismatches, 3);
  EXPECT_FALSE(*back->checks[0].metrics.bit_exact);
  EXPECT_TRUE(std::isnan(back->checks[0].metrics.cos_diff));
  EXPECT_DOUBLE_EQ(back->checks[0].metrics.extra.at("rows"), 4.0);
}

TEST(Report, NoBareNaNAndSchemaAndSummary) {
  RunReport r;
  r.provenance.backend = "host";
  r.scenarios.push_back(sample());
  const std::string text = report_to_json(r);
  // No bare NaN/Infinity value anywhere (a value follows ": ").
  for (const char* bad : {": NaN", ": nan", ": -nan", ": Infinity", ": inf", ": -inf"})
    EXPECT_EQ(text.find(bad), std::string::npos) << bad;
  EXPECT_NE(text.find("\"cos_diff\": null"), std::string::npos);
  EXPECT_NE(text.find("\"schema\": \"mla-harness.report/1\""), std::string::npos);
  EXPECT_NE(text.find("\"verdict\": \"FAIL\""), std::string::npos);
  EXPECT_EQ(run_verdict(r), Verdict::kFail);
}

TEST(Report, UnreadableChildOutputIsAnError) {
  std::string err;
  EXPECT_FALSE(scenario_result_from_json("{\"name\": 1", &err));
  EXPECT_FALSE(err.empty());
}

TEST(Report, AtomicWriteLeavesNoTempFile) {
  const auto dir = std::filesystem::temp_directory_path() / "mla_report_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "r.json").string();
  RunReport r;
  r.scenarios.push_back(sample());
  ASSERT_TRUE(write_report_atomic(path, r).ok());
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), report_to_json(r));
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(e.path().filename(), "r.json");
  std::filesystem::remove_all(dir);
  EXPECT_FALSE(write_report_atomic("/nonexistent-dir/x/r.json", r).ok());
}

TEST(Report, AFailedWriteSaysWhyKeepsTheOldReportAndLeavesNoTempFile) {
  const auto dir = std::filesystem::temp_directory_path() / ("mla_report_full_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "r.json").string();
  { std::ofstream(path) << "old"; }
  RunReport r;
  for (int i = 0; i < 20; ++i) r.scenarios.push_back(sample());
  // A file size limit makes write() fail as a full disk would (EFBIG instead of ENOSPC); the
  // write runs in a child so that the limit stays there.
  const ChildOutcome c = run_in_child(
      [&](const ChildEmit& emit) {
        std::signal(SIGXFSZ, SIG_IGN);
        const rlimit limit{1024, 1024};
        ::setrlimit(RLIMIT_FSIZE, &limit);
        const Status s = write_report_atomic(path, r);
        emit(s.ok() ? "ok" : s.message());
      },
      60.0);
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_NE(c.output.find("File too large"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("no report was written"), std::string::npos) << c.output;
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir)) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"r.json"});
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "old");
  std::filesystem::remove_all(dir);
}

TEST(Report, AnEmptyPathOrADeviceIsNotWritable) {
  EXPECT_FALSE(check_report_writable("").ok());
  EXPECT_FALSE(write_report_atomic("", RunReport{}).ok());
  const Status s = check_report_writable("/dev/null");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not a regular file"), std::string::npos) << s.message();
}

TEST(Report, WritableIsCheckedWithoutLeavingAFile) {
  const auto dir = std::filesystem::temp_directory_path() / "mla_report_writable_test";
  std::filesystem::create_directories(dir);
  EXPECT_TRUE(check_report_writable((dir / "r.json").string()).ok());
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "the probe's temporary file is removed";
  const Status in_dir = check_report_writable(dir.string());
  EXPECT_FALSE(in_dir.ok());
  EXPECT_NE(in_dir.message().find("is a directory"), std::string::npos) << in_dir.message();
  const Status missing = check_report_writable("/nonexistent-dir/x/r.json");
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("/nonexistent-dir/x/r.json.tmp."), std::string::npos) << missing.message();
  std::filesystem::remove_all(dir);
}

TEST(Report, RunVerdictIgnoresSkipsUnlessAllSkip) {
  RunReport r;
  ScenarioResult pass, skip;
  pass.verdict = Verdict::kPass;
  skip.verdict = Verdict::kSkip;
  r.scenarios = {pass, skip};
  EXPECT_EQ(run_verdict(r), Verdict::kPass);
  r.scenarios = {skip};
  EXPECT_EQ(run_verdict(r), Verdict::kSkip);
}

ScenarioResult with_checks(const std::string& name, const std::vector<std::pair<Verdict, std::string>>& checks) {
  ScenarioResult s;
  s.name = name;
  for (const auto& [v, reason] : checks) {
    CheckResult c;
    c.id = c.check = "pack";
    c.verdict = v;
    c.reason = reason;
    s.checks.push_back(c);
  }
  s.verdict = scenario_verdict(s);
  return s;
}

// A scenario whose checks were all skipped is skipped (with its reason's group), not passed; one
// that passed with some checks skipped is passed.
TEST(Report, SummaryCountsAllSkippedScenariosAsSkippedWithTheirReason) {
  const std::string gpu_only = "tagged gpu-only: too large for the host backend; run it with --backend cuda";
  RunReport r;
  r.scenarios = {
      with_checks("all_pass", {{Verdict::kPass, ""}}),
      with_checks("some_skipped", {{Verdict::kPass, ""}, {Verdict::kSkip, "no keys: the batch has no cached context"}}),
      with_checks("gpu_a", {{Verdict::kSkip, gpu_only}, {Verdict::kSkip, gpu_only}}),
      with_checks("gpu_b", {{Verdict::kSkip, gpu_only}}),
      with_checks("no_keys", {{Verdict::kSkip, "no keys: the batch has no cached context"}}),
      with_checks("failed", {{Verdict::kSkip, gpu_only}, {Verdict::kFail, "1 of 2 differ"}}),
      with_checks("crashed", {}),
  };
  r.scenarios.back().error = "killed by signal 11";
  r.scenarios.back().verdict = scenario_verdict(r.scenarios.back());

  const ScenarioCounts n = count_scenarios(r);
  EXPECT_EQ(n.passed, 2);
  EXPECT_EQ(n.skipped, 3);
  EXPECT_EQ(n.failed, 2);
  const std::map<std::string, int> reasons = {{"gpu-only", 2}, {"no keys", 1}};
  EXPECT_EQ(n.skipped_by_reason, reasons);

  const nlohmann::json summary = nlohmann::json::parse(report_to_json(r)).at("summary");
  EXPECT_EQ(summary.at("scenarios"), 7);
  EXPECT_EQ(summary.at("scenarios_passed"), 2);
  EXPECT_EQ(summary.at("scenarios_skipped"), 3);
  EXPECT_EQ(summary.at("scenarios_failed"), 2);
  EXPECT_EQ(summary.at("skipped_by_reason"), nlohmann::json({{"gpu-only", 2}, {"no keys", 1}}));
  EXPECT_EQ(summary.at("verdict"), "ERROR");
}

TEST(Report, SummaryOfARunWithoutSkipsHasAnEmptyReasonObject) {
  RunReport r;
  r.scenarios = {with_checks("all_pass", {{Verdict::kPass, ""}})};
  const nlohmann::json summary = nlohmann::json::parse(report_to_json(r)).at("summary");
  EXPECT_EQ(summary.at("scenarios_skipped"), 0);
  EXPECT_TRUE(summary.at("skipped_by_reason").is_object());
  EXPECT_TRUE(summary.at("skipped_by_reason").empty());
}

TEST(Report, SkipGroupIsTheTagOrTheReasonsHead) {
  EXPECT_EQ(skip_group("tagged gpu-only: too large for the host backend"), "gpu-only");
  EXPECT_EQ(skip_group("no keys: the batch has no cached context"), "no keys");
  EXPECT_EQ(skip_group("the host backend has no such kernel"), "the host backend has no such kernel");
  EXPECT_EQ(skip_group(""), "no reason given");
}

}  // namespace
}  // namespace mla
