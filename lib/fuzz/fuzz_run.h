// mla-check --fuzz (docs/fuzzing.md): runs generated scenarios (lib/fuzz/scenario_grammar.h)
// through the suite runner, shrinks each distinct failure (lib/fuzz/shrink.h) and writes it as an
// ordinary scenario file.
//
// Cases run in groups of the suite's `jobs` (each case in its own child process, with the per-case
// timeout); no new group starts once `budget_s` has passed since the start. A failure is named by
// its signature (the first failing check and its verdict): the first case of each signature is
// shrunk, within `shrink_budget_s`, candidates running in child processes like the cases; later
// cases with a signature already seen are listed as duplicates, not shrunk. A scenario-level
// timeout is written unshrunk (a candidate that runs into its timeout cannot be told apart from
// one that hangs).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lib/fuzz/scenario_grammar.h"
#include "lib/fuzz/shrink.h"
#include "lib/run/suite_runner.h"

namespace mla {

struct FuzzOptions {
  uint64_t seed = 1;
  uint64_t cases = 1;
  uint64_t first = 0;               // the first case's index: cases first .. first + cases - 1 run
  double budget_s = 300.0;          // no new case starts after this (seconds since the start)
  double shrink_budget_s = 120.0;   // per shrunk failure
  std::string out_dir = "fuzz-failures";
  GrammarOptions grammar;
  // The backend, injection, per-case timeout, jobs and repro prefix of every run (cases and
  // shrink candidates); its scenarios are ignored. on_start / on_result see the case index and
  // the number of cases asked for.
  SuiteOptions suite;
  std::function<void(const std::string&)> log;  // one line per shrinking step worth telling
};

struct FuzzFinding {
  uint64_t case_index = 0;
  std::string case_name;
  FailureSignature signature;
  double found_s = 0.0;      // from the start of the run to the end of this case
  std::string duplicate_of;  // set: same signature as this earlier case (not shrunk, not written)
  bool shrunk = false;
  ScenarioSize before, after;
  int64_t candidates_run = 0, steps = 0;
  bool shrink_budget_spent = false;
  double shrink_s = 0.0;
  std::string file;         // the written scenario file (empty when not written)
  std::string write_error;  // why it could not be written
};

struct FuzzOutcome {
  // One result per case run, in case order (each with a repro line that runs that case alone), then the final run of each written finding (under
  // the file's scenario name, with its path and a repro line that runs it).
  std::vector<ScenarioResult> results;
  uint64_t cases_run = 0;
  bool budget_spent = false;     // stopped before `cases`
  double run_s = 0.0;            // running the cases
  double first_failure_s = -1.0; // from the start to the end of the first failing case; < 0: none
  std::vector<FuzzFinding> findings;
};

FuzzOutcome run_fuzz(const FuzzOptions& options);

// The scenario file name (without ".json") of a written finding, e.g. "fuzz_s7_c12_gather_fail".
std::string finding_name(const std::string& case_name, const FailureSignature& signature);

}  // namespace mla
