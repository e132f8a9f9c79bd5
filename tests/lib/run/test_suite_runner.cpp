// run_suite with isolation and several scenario processes at once (jobs > 1): results in the
// suite's order, a crash or hang confined to its scenario, per-process timeouts, no process left
// behind. The crash / hang come from a backend that misbehaves in a named scenario right after its
// first check (SuiteOptions::make_backend).
#include "lib/run/suite_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "kernels/backend.h"
#include "lib/backends/forwarding_backend.h"
#include "lib/run/report.h"

namespace mla {
namespace {

const char* const kHang = "vllm_mixed_small";
const char* const kCrash = "vllm_small_prefill";

Scenario shipped(const std::string& name) {
  auto loaded = load_scenario(std::string(MLA_SOURCE_DIR) + "/scenarios/suite/" + name + ".json");
  if (auto* err = std::get_if<ScenarioError>(&loaded)) throw std::runtime_error(err->to_string());
  return std::get<Scenario>(std::move(loaded));
}

SuiteOptions options(const std::vector<std::string>& names, size_t jobs, double timeout_s) {
  SuiteOptions opt;
  for (const auto& n : names) opt.scenarios.push_back(shipped(n));
  opt.backend.kind = BackendChoice::Kind::kHost;
  opt.jobs = jobs;
  opt.timeout_s = timeout_s;
  opt.repro_prefix = "mla-check";
  return opt;
}

// The host backend, except that scenario `hang` hangs and scenario `crash` crashes (SIGSEGV) when
// its second check begins, so that its first check's result has been streamed.
class Misbehaving final : public ForwardingBackend {
 public:
  Misbehaving(std::unique_ptr<Backend> host, std::string hang, std::string crash)
      : ForwardingBackend(*host), host_(std::move(host)), hang_(std::move(hang)), crash_(std::move(crash)) {}
  void begin_check(const std::string& scenario, const std::string& check) override {
    if (checks_begun_++ == 0) return;
    if (scenario == crash_) std::raise(SIGSEGV);
    if (scenario == hang_)
      for (;;) ::pause();
    ForwardingBackend::begin_check(scenario, check);
  }

 private:
  std::unique_ptr<Backend> host_;
  std::string hang_, crash_;
  int checks_begun_ = 0;
};

void misbehave(SuiteOptions& opt, const std::string& hang, const std::string& crash = "") {
  opt.make_backend = [hang, crash](std::string*) -> std::unique_ptr<Backend> {
    return std::make_unique<Misbehaving>(make_host_backend(), hang, crash);
  };
}

// Every child of this process has been reaped: no zombie, no process still running.
bool no_children_left() { return ::waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD; }

std::vector<std::string> names_of(const std::vector<ScenarioResult>& results) {
  std::vector<std::string> names;
  for (const auto& r : results) names.push_back(r.name);
  return names;
}

// The report entry of a result without its timings.
std::string without_timings(ScenarioResult r) {
  r.duration_s = 0.0;
  for (auto& c : r.checks) c.duration_s = 0.0;
  return scenario_result_to_json(r);
}

TEST(SuiteRunner, ParallelResultsKeepTheSuiteOrderWhateverOrderTheyEndIn) {
  const std::vector<std::string> names = {kHang, "vllm_small_prefill", "gather_block_size_1",
                                          "vllm_large_q_pure_prefill"};
  SuiteOptions opt = options(names, 2, 2.0);
  misbehave(opt, kHang);
  std::vector<size_t> ended;
  opt.on_result = [&](size_t i, size_t n, const ScenarioResult&) {
    EXPECT_EQ(n, names.size());
    ended.push_back(i);
  };
  const auto results = run_suite(opt);
  EXPECT_TRUE(no_children_left());
  // The hanging first scenario ended last: the order below is not the order of completion.
  ASSERT_EQ(ended.size(), names.size());
  EXPECT_EQ(ended.back(), 0u);
  EXPECT_EQ(names_of(results), names);
  EXPECT_EQ(results[0].verdict, Verdict::kError);
  EXPECT_NE(results[0].error.find("timed out"), std::string::npos) << results[0].error;
  ASSERT_EQ(results[0].checks.size(), 1u);  // the check that finished before the hang
  EXPECT_EQ(results[0].checks[0].verdict, Verdict::kPass);
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].repro, "mla-check --scenario " + opt.scenarios[i].file);
    if (i > 0) {
      EXPECT_EQ(results[i].verdict, Verdict::kPass) << results[i].name << ": " << results[i].error;
    }
  }
}

TEST(SuiteRunner, ParallelRunEqualsSerialRunApartFromTimings) {
  const std::vector<std::string> names = {"vllm_large_q_pure_prefill", kHang, "gather_block_size_1", kCrash,
                                          "attention/gpu_attn_mixed_small_k128"};
  SuiteOptions serial_opt = options(names, 1, 1.0), parallel_opt = options(names, 3, 1.0);
  misbehave(serial_opt, kHang, kCrash);
  misbehave(parallel_opt, kHang, kCrash);
  const auto serial = run_suite(serial_opt);
  const auto parallel = run_suite(parallel_opt);
  EXPECT_TRUE(no_children_left());
  ASSERT_EQ(serial.size(), names.size());
  ASSERT_EQ(parallel.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(without_timings(parallel[i]), without_timings(serial[i]));
  // The crash is confined to its scenario and keeps the check done before it.
  EXPECT_EQ(parallel[3].verdict, Verdict::kError);
  EXPECT_NE(parallel[3].error.find("signal"), std::string::npos) << parallel[3].error;
  ASSERT_EQ(parallel[3].checks.size(), 1u);
  EXPECT_EQ(parallel[3].checks[0].verdict, Verdict::kPass);
  EXPECT_EQ(parallel[0].verdict, Verdict::kPass);
  EXPECT_EQ(parallel[2].verdict, Verdict::kPass);
  EXPECT_EQ(parallel[4].verdict, Verdict::kSkip);  // gpu-only on the host
}

TEST(SuiteRunner, EachProcessHasItsOwnTimeoutAndJobsCapsHowManyRun) {
  const double timeout_s = 1.0;
  SuiteOptions opt = options({kHang, kHang, kHang}, 2, timeout_s);
  misbehave(opt, kHang);
  size_t running = 0, most_running = 0;
  opt.on_start = [&](size_t, size_t, const Scenario&) { most_running = std::max(most_running, ++running); };
  opt.on_result = [&](size_t, size_t, const ScenarioResult&) { --running; };
  const auto t0 = std::chrono::steady_clock::now();
  const auto results = run_suite(opt);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(no_children_left());
  EXPECT_EQ(most_running, 2u);
  // The third process started when a slot freed, after one timeout, and still got a whole one.
  EXPECT_GE(wall_s, 2 * timeout_s);
  for (const auto& r : results) {
    EXPECT_EQ(r.verdict, Verdict::kError);
    EXPECT_EQ(r.error, "timed out after 1 s (process killed)");
    EXPECT_GE(r.duration_s, timeout_s);
    EXPECT_EQ(r.checks.size(), 1u);
  }
}

TEST(SuiteRunner, AnErrorInTheCallerKillsTheProcessesStillRunning) {
  SuiteOptions opt = options({kHang, "vllm_small_prefill"}, 2, 600.0);
  misbehave(opt, kHang);
  opt.on_result = [](size_t, size_t, const ScenarioResult&) { throw std::runtime_error("caller failed"); };
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(run_suite(opt), std::runtime_error);
  // Killed, not waited for until its timeout, and reaped.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60.0);
  EXPECT_TRUE(no_children_left());
}

}  // namespace
}  // namespace mla
