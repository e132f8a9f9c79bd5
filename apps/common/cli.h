// What the command-line front ends (mla-check, mla-dcp, mla-bench) share: the exit codes, the
// scenario-selection options and their use, a same-file test for outputs that must not replace an
// input, and main()'s last catch.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lib/run/selection.h"
#include "lib/scenario/scenario.h"

namespace mla::app {

// 0 all passed (SKIPs allowed), 1 a check failed, 2 bad usage or bad input, 3 a runtime or device error.
constexpr int kExitPass = 0, kExitFail = 1, kExitUsage = 2, kExitRuntime = 3;

// MLA_SCENARIO_DIR where it is set, else the shipped suite's directory of this build.
std::string default_scenario_dir();

// --scenario, --scenario-dir (default: default_scenario_dir()), --filter and --exclude-tag, bound
// to `sel`'s fields, which must outlive the parse.
void add_selection_options(CLI::App& app, SelectionOptions* sel);

// select_scenarios(sel), its notes printed as "<tool>: note: ..." on stderr; std::nullopt, with the
// error printed as "<tool>: ...", when the selection is refused (bad input).
std::optional<std::vector<Scenario>> select_or_explain(const char* tool, const SelectionOptions& sel);

// Whether two paths name one existing file (device and inode).
bool same_file(const std::string& a, const std::string& b);

// run(argc, argv), with an exception that escapes it printed as "<tool>: internal error: ..." and
// answered with kExitRuntime (never an abort).
int main_guarded(const char* tool, int (*run)(int, char**), int argc, char** argv);

}  // namespace mla::app
