#include "lib/run/selection.h"

#include <algorithm>
#include <filesystem>

#include <fnmatch.h>

namespace mla {

namespace {

namespace fs = std::filesystem;

// --scenario X: an existing path, else the file stem of a shipped scenario (shipped files are
// named after their scenario).
std::optional<std::string> resolve_scenario_arg(const std::string& arg, const std::vector<std::string>& shipped) {
  std::error_code ec;
  if (fs::exists(arg, ec)) return arg;
  for (const auto& f : shipped)
    if (fs::path(f).stem() == arg) return f;
  return std::nullopt;
}

bool has_tag(const Scenario& s, const std::vector<std::string>& tags) {
  return std::any_of(tags.begin(), tags.end(),
                     [&](const std::string& t) { return std::find(s.tags.begin(), s.tags.end(), t) != s.tags.end(); });
}

bool name_matches(const Scenario& s, const std::string& filter) {
  return filter.empty() || fnmatch(filter.c_str(), s.name.c_str(), 0) == 0 || s.name.find(filter) != std::string::npos;
}

// Keeps the scenario's own order of checks; records whether attention checks were removed (their
// inputs are still generated, so that the remaining checks see the same data as a whole run).
void keep_only_checks(Scenario& s, const std::vector<CheckKind>& only) {
  if (only.empty()) return;
  const auto removed = std::stable_partition(s.checks.begin(), s.checks.end(), [&](CheckKind k) {
    return std::find(only.begin(), only.end(), k) != only.end();
  });
  s.attention_checks_removed = std::any_of(removed, s.checks.end(), is_attention_check);
  s.checks.erase(removed, s.checks.end());
}

}  // namespace

std::variant<std::vector<Scenario>, SelectionError> select_scenarios(const SelectionOptions& o) {
  const std::vector<std::string> shipped = list_scenario_files(o.scenario_dir);
  std::vector<std::string> files;
  if (o.scenario_args.empty()) {
    files = shipped;
    if (files.empty()) return SelectionError{"no scenario files under '" + o.scenario_dir + "'"};
  }
  for (const auto& a : o.scenario_args) {
    const auto path = resolve_scenario_arg(a, shipped);
    if (!path)
      return SelectionError{"--scenario " + a + ": no such file, and no shipped scenario of that name in '" +
                            o.scenario_dir + "'"};
    files.push_back(*path);
  }
  std::vector<Scenario> selected;
  for (const auto& f : files) {
    auto loaded = load_scenario(f, o.seed);
    if (auto* err = std::get_if<ScenarioError>(&loaded)) return SelectionError{"invalid scenario: " + err->to_string()};
    Scenario s = std::get<Scenario>(std::move(loaded));
    keep_only_checks(s, o.only_checks);
    if (!has_tag(s, o.exclude_tags) && name_matches(s, o.filter) && !s.checks.empty()) selected.push_back(std::move(s));
  }
  if (selected.empty())
    return SelectionError{"no scenario matches --filter '" + o.filter + "'" +
                          (o.only_checks.empty() ? "" : " with one of the --check checks")};
  return selected;
}

}  // namespace mla
