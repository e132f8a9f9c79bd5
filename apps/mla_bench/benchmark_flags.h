// Google Benchmark's flags as mla-bench takes them: every --benchmark_NAME=VALUE of the command
// line and every BENCHMARK_NAME variable of the environment is checked before
// benchmark::Initialize sees it, because Google Benchmark answers many bad values by running
// nothing and exiting 0 (an unknown --benchmark_format, an invalid --benchmark_filter regex), by
// warning and using its default (a BENCHMARK_* variable it cannot parse), by aborting
// (--benchmark_repetitions=0) or by looping forever (--benchmark_min_time=nan). A refusal names
// the flag or variable, the value and what is accepted.
//
// --benchmark_min_time takes "T" or "Ts" (seconds) and "Nx" (iterations) as documented for
// Google Benchmark 1.8; against an older version (1.7, Debian 12's) "Ts" is passed on as "T" and
// "Nx" is refused, since that version has no iteration count.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mla::bench {

struct BenchmarkFlags {
  std::vector<std::string> args;       // argv[1..], with values rewritten for this Google Benchmark
  std::optional<std::string> filter;   // --benchmark_filter (the last one given, else the variable)
  std::optional<std::string> out;      // --benchmark_out, likewise
  bool list_tests = false;             // --benchmark_list_tests is true
};

// "" when every flag and variable is usable (and *flags holds the arguments to pass on, the
// environment rewritten where needed); else the problem.
std::string check_benchmark_flags(int argc, char** argv, BenchmarkFlags* flags);

// True when argv or the environment gives Google Benchmark flag `name` (benchmark also reads
// flags from BENCHMARK_<NAME> environment variables).
bool benchmark_flag_given(int argc, char** argv, const std::string& name);

// Whether `name` is run under --benchmark_filter=`filter` as Google Benchmark decides it: POSIX
// extended regex searched in the name, a leading '-' negates, "" and "all" run everything.
// Precondition: check_benchmark_flags accepted the filter.
bool filter_matches(const std::string& filter, const std::string& name);

// "--benchmark_min_time=..." for a sweep's default in this Google Benchmark's syntax.
std::string min_time_flag(double seconds);

}  // namespace mla::bench
