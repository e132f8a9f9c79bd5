// Which scenarios and checks a run covers: the scenario files named (paths or shipped names) or
// the whole shipped suite, loaded and validated, then filtered by name, tag and check. Shared by
// mla-check and its tests; every refusal is bad input (mla-check exits 2) with a message that
// names the file, the option or the problem.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "lib/scenario/scenario.h"

namespace mla {

struct SelectionOptions {
  std::vector<std::string> scenario_args;  // --scenario: paths or shipped scenario names; empty = the suite
  std::string scenario_dir;                // the shipped suite
  std::string filter;                      // glob or substring of the scenario name; empty = all
  std::vector<std::string> exclude_tags;
  std::vector<CheckKind> only_checks;      // empty = each scenario's own checks
  std::optional<uint64_t> seed;            // replaces every scenario's seed
};

struct SelectionError {
  std::string message;
};

// The selected scenarios in the order given (the suite's: sorted by path), each with only the
// checks asked for. Refused: an empty selection, a --scenario that cannot be read, a *.json entry
// of the suite folder that cannot be read (a symbolic link loop, a dangling link), two files that
// name one scenario. One file given twice (by two paths, or by its path and its shipped name)
// runs once, and `notes` (when given) says so.
std::variant<std::vector<Scenario>, SelectionError> select_scenarios(const SelectionOptions& o,
                                                                     std::vector<std::string>* notes = nullptr);

}  // namespace mla
