// Shrinking a failing scenario (docs/fuzzing.md): greedy search for a smaller scenario that still
// fails the same check with the same verdict. Each round lists candidates one step simpler than
// the current scenario (fewer checks, cases and requests first, then smaller heads and top-k,
// shorter sequences, fewer pages, simpler options), runs them through `evaluate` (the fuzzer
// passes the suite runner: child processes with a per-candidate timeout) and keeps the first, in
// list order, that still fails; it stops when no candidate does or the budget is spent. Every
// candidate passes validate_scenario and the loader's field rules, so the result can be written
// as a scenario file.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lib/checks/verdict.h"
#include "lib/run/scenario_run.h"
#include "lib/scenario/scenario.h"

namespace mla {

// What a failing run must keep showing: a check kind (e.g. "gather") ending in a verdict, or,
// with an empty check, the scenario's own ERROR (a crash, or a timeout when `timeout` is set).
struct FailureSignature {
  std::string check;
  Verdict verdict = Verdict::kFail;
  bool timeout = false;
  std::string to_string() const;  // "gather FAIL", "scenario ERROR (crash)", ...
};

// The first failing check of `r` (check order), else its scenario-level ERROR; nullopt when
// every check passed or was skipped.
std::optional<FailureSignature> first_failure(const ScenarioResult& r);
// Whether `r` shows the failure: some check of that kind ended in that verdict (or, for a
// scenario-level signature, r ended in ERROR of the same kind: crash or timeout).
bool shows_failure(const ScenarioResult& r, const FailureSignature& f);

// The size of a scenario, as the shrinker reduces it.
struct ScenarioSize {
  int64_t requests = 0;
  int64_t max_seq_len = 0;
  int64_t total_seq_len = 0;
  int64_t heads = 0;
  int64_t topk = 0;
  int64_t gather_cases = 0;
  int64_t convert_cases = 0;
  int64_t pages = 0;
  int64_t checks = 0;
  std::string to_string() const;  // "3 requests (max 40 tokens, 77 in all), H 16, K 64, ..."
};
ScenarioSize scenario_size(const Scenario& s);

// The candidates one step simpler than `s` for a failure of `target`, most reducing first. Each
// passes validation; none equals `s`.
std::vector<Scenario> shrink_candidates(const Scenario& s, const FailureSignature& target);

// Runs candidates and returns one result per candidate, in order.
using ShrinkEvaluate = std::function<std::vector<ScenarioResult>(const std::vector<Scenario>&)>;

struct ShrinkOptions {
  double budget_s = 120.0;  // total time for the search
  size_t batch = 1;         // candidates handed to evaluate at once (its parallelism)
};

struct ShrinkOutcome {
  Scenario scenario;       // the smallest failing scenario found (the input when nothing shrank)
  ScenarioResult result;   // its run
  int64_t candidates_run = 0;
  int64_t steps = 0;       // candidates accepted
  bool budget_spent = false;
  double duration_s = 0.0;
};

// Shrinks `failing` (whose run `failing_result` shows `target`). Deterministic for a given
// evaluate: the batch size changes only how many candidates run at once, never which one is kept.
ShrinkOutcome shrink_scenario(const Scenario& failing, const ScenarioResult& failing_result,
                              const FailureSignature& target, const ShrinkEvaluate& evaluate,
                              const ShrinkOptions& options = {});

}  // namespace mla
