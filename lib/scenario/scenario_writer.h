// Writing a Scenario as a scenario file (docs/scenarios.md) that load_scenario reads back to an
// equal Scenario. Used for scenarios built in code (the fuzzer's shrunk failures) that are to join
// the suite as ordinary files.
//
// What is written: every field load_scenario reads, defaults left out where the format's default
// is the same value (tolerances, scale, spare pages, ...), so that the file says what is special
// about the case. Not written: `file` (where the scenario was loaded from) and
// `attention_checks_removed` (a run-time choice of mla-check --check, not part of the format).
// A batch with a generator is written in the generated form only when the generator, drawn with
// the scenario's seed, yields exactly the batch held; otherwise the batch is written explicitly and
// the reloaded scenario has no generator. An explicit num_blocks equal to the batch's pages plus
// spare_blocks is written as automatic (it loads to the same resolved value); num_blocks 0
// (automatic, not yet resolved) loads resolved.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "kernels/common/status.h"
#include "lib/scenario/scenario.h"

namespace mla {

// The scenario as a JSON document, keys in the order docs/scenarios.md lists them.
nlohmann::ordered_json scenario_to_json(const Scenario& s);

// The document as text, indented by 2, with a final newline.
std::string scenario_to_text(const Scenario& s);

// Writes the file (through a temporary sibling and a rename, so that a reader never sees half a
// file). Refuses a scenario whose file load_scenario would refuse (the file is loaded back before
// the rename).
Status write_scenario_file(const std::string& path, const Scenario& s);

}  // namespace mla
