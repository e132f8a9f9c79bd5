// mla-check's --fuzz options: their parsing and checks (bad input is exit 2 with a message that
// names the option and the value), and the summary printed after the table.
#pragma once

#include <cstdio>
#include <optional>
#include <string>

#include "lib/fuzz/fuzz_run.h"

namespace mla::app {

// The option values as typed; an option not given is nullopt (an empty value is a bad value).
struct FuzzArgs {
  std::optional<std::string> cases;          // --fuzz N
  std::optional<std::string> start;          // --fuzz-start I
  std::optional<std::string> budget;         // --fuzz-budget SECONDS
  std::optional<std::string> shrink_budget;  // --fuzz-shrink-budget SECONDS
  std::optional<std::string> out_dir;        // --fuzz-out DIR
};

inline constexpr double kDefaultFuzzBudgetS = 300.0;
inline constexpr double kDefaultShrinkBudgetS = 120.0;
inline constexpr double kDefaultFuzzCaseTimeoutS = 60.0;  // per case, unless --timeout is given
inline constexpr const char* kDefaultFuzzOutDir = "fuzz-failures";

// Whether any --fuzz option was given.
bool fuzz_requested(const FuzzArgs& a);

// Fills the fuzz fields of `o` (cases, budgets, out_dir). Returns "" or the problem, e.g.
// "--fuzz: 'x' is not a number of cases (an integer in [1, 1000000])".
std::string parse_fuzz_args(const FuzzArgs& a, FuzzOptions* o);

void print_fuzz_summary(std::FILE* out, const FuzzOptions& o, const FuzzOutcome& r);

}  // namespace mla::app
