#include "apps/common/cli.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <utility>
#include <variant>

#include <sys/stat.h>

#ifndef MLA_DEFAULT_SCENARIO_DIR
#define MLA_DEFAULT_SCENARIO_DIR "scenarios/suite"
#endif

namespace mla::app {

std::string default_scenario_dir() {
  if (const char* env = std::getenv("MLA_SCENARIO_DIR")) return env;
  return MLA_DEFAULT_SCENARIO_DIR;
}

void add_selection_options(CLI::App& app, SelectionOptions* sel) {
  sel->scenario_dir = default_scenario_dir();
  app.add_option("--scenario", sel->scenario_args, "Scenario file path or shipped scenario name (repeatable)");
  app.add_option("--scenario-dir", sel->scenario_dir, "Directory of the shipped suite")->capture_default_str();
  app.add_option("--filter", sel->filter, "Only scenarios whose name matches PATTERN (glob, or substring)");
  app.add_option("--exclude-tag", sel->exclude_tags, "Leave out scenarios with this tag (repeatable), e.g. gpu-only");
}

std::optional<std::vector<Scenario>> select_or_explain(const char* tool, const SelectionOptions& sel) {
  std::vector<std::string> notes;
  auto selected = select_scenarios(sel, &notes);
  if (const auto* err = std::get_if<SelectionError>(&selected)) {
    std::fprintf(stderr, "%s: %s\n", tool, err->message.c_str());
    return std::nullopt;
  }
  for (const auto& note : notes) std::fprintf(stderr, "%s: note: %s\n", tool, note.c_str());
  return std::get<std::vector<Scenario>>(std::move(selected));
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int main_guarded(const char* tool, int (*run)(int, char**), int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", tool, e.what());
    return kExitRuntime;
  }
}

}  // namespace mla::app
