// The human-readable output of mla-check and mla-dcp: a table of scenario / check / verdict / key metric /
// time, and the summary line.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "lib/run/report.h"

namespace mla::app {

// One-cell summary of a check's metrics ("bit-exact, 36864 el", "12 of 36864 differ", ...).
std::string key_metric(const CheckResult& c);

enum class TableMode {
  kCompact,   // one row per scenario whose checks all passed, one row per check otherwise
  kFailures,  // only failing checks and scenario errors
  kAll,       // every check
};

void print_table(std::FILE* out, const std::vector<ScenarioResult>& results, TableMode mode, bool color);

void print_summary(std::FILE* out, const RunReport& report, const std::string& report_path);

}  // namespace mla::app
