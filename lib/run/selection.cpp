#include "lib/run/selection.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <system_error>

#include <fnmatch.h>
#include <sys/stat.h>

namespace mla {

namespace {

namespace fs = std::filesystem;

// The files of the suite: every *.json under dir (recursively; symbolic links to folders are not
// followed), sorted by path. An entry named *.json that cannot be read (a symbolic link loop, a
// dangling link, no permission) and a folder that cannot be listed are refused with the entry
// and the reason: a suite run that silently left a file out would pass without it.
std::variant<std::vector<std::string>, SelectionError> list_suite(const std::string& dir) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (ec) return SelectionError{"--scenario-dir " + dir + ": cannot be read: " + ec.message()};
  if (!fs::is_directory(st)) return SelectionError{"--scenario-dir " + dir + ": is not a directory"};
  std::vector<std::string> files;
  fs::recursive_directory_iterator it(dir, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().extension() != ".json") continue;
    std::error_code entry_ec;
    const fs::file_status est = it->status(entry_ec);  // follows a symbolic link
    if (entry_ec) {
      return SelectionError{"--scenario-dir " + dir + ": " + it->path().string() + ": cannot be read: " +
                            entry_ec.message()};
    }
    if (fs::is_regular_file(est)) files.push_back(it->path().string());
  }
  if (ec) {
    const std::string where = it != fs::recursive_directory_iterator() ? it->path().string() : dir;
    return SelectionError{"--scenario-dir " + dir + ": cannot list " + where + ": " + ec.message()};
  }
  std::sort(files.begin(), files.end());
  return files;
}

// --scenario X: an existing path, else the file stem of a shipped scenario (shipped files are
// named after their scenario). A path that exists but cannot be resolved (a symbolic link loop,
// a name too long, a folder without permission) is refused with the reason.
std::variant<std::string, SelectionError> resolve_scenario_arg(const std::string& arg, const std::string& dir,
                                                               const std::vector<std::string>& shipped) {
  if (arg.empty()) return SelectionError{"--scenario: an empty name is neither a file nor a shipped scenario"};
  struct stat st {};
  if (::stat(arg.c_str(), &st) == 0) return arg;
  const int err = errno;
  if (err != ENOENT) return SelectionError{"--scenario " + arg + ": cannot be read: " + std::strerror(err)};
  for (const auto& f : shipped)
    if (fs::path(f).stem() == arg) return f;
  return SelectionError{"--scenario " + arg + ": no such file, and no shipped scenario of that name in '" + dir + "'"};
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

// The identity of a file (device and inode): two paths of one file (a shipped name and its path,
// a symbolic link, "./x.json" and "x.json") are the same file.
std::pair<dev_t, ino_t> file_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {0, 0};
  return {st.st_dev, st.st_ino};
}

}  // namespace

std::variant<std::vector<Scenario>, SelectionError> select_scenarios(const SelectionOptions& o,
                                                                     std::vector<std::string>* notes) {
  std::vector<std::string> shipped;
  std::optional<SelectionError> suite_error;
  {
    auto listed = list_suite(o.scenario_dir);
    if (auto* e = std::get_if<SelectionError>(&listed)) {
      suite_error = *e;
    } else {
      shipped = std::get<std::vector<std::string>>(std::move(listed));
    }
  }
  std::vector<std::string> files;
  if (o.scenario_args.empty()) {
    if (suite_error) return *suite_error;
    files = shipped;
    if (files.empty()) return SelectionError{"--scenario-dir " + o.scenario_dir + ": holds no scenario file (*.json)"};
  }
  std::map<std::pair<dev_t, ino_t>, std::string> given;  // file identity -> the argument that named it first
  for (const auto& a : o.scenario_args) {
    auto resolved = resolve_scenario_arg(a, o.scenario_dir, shipped);
    if (auto* e = std::get_if<SelectionError>(&resolved)) {
      // A name that is not a file is looked up in the suite: an unreadable suite may be the reason.
      if (suite_error && e->message.find(": no such file") != std::string::npos)
        return SelectionError{e->message + "; " + suite_error->message};
      return *e;
    }
    const std::string path = std::get<std::string>(std::move(resolved));
    const auto id = file_identity(path);
    if (const auto seen = given.find(id); seen != given.end()) {
      if (notes) notes->push_back("--scenario " + a + " names the same file as --scenario " + seen->second + "; it runs once");
      continue;
    }
    given.emplace(id, a);
    files.push_back(path);
  }
  std::vector<Scenario> selected;
  std::map<std::string, std::string> file_of_name;
  for (const auto& f : files) {
    auto loaded = load_scenario(f, o.seed);
    if (auto* err = std::get_if<ScenarioError>(&loaded)) return SelectionError{"invalid scenario: " + err->to_string()};
    Scenario s = std::get<Scenario>(std::move(loaded));
    keep_only_checks(s, o.only_checks);
    if (has_tag(s, o.exclude_tags) || !name_matches(s, o.filter) || s.checks.empty()) continue;
    // Names key the report (and compare_reports.py refuses a report that repeats one).
    if (const auto [it, fresh] = file_of_name.emplace(s.name, s.file); !fresh) {
      return SelectionError{"two scenario files name the scenario '" + s.name + "': " + it->second + " and " + s.file +
                            " (names key the report; rename one)"};
    }
    selected.push_back(std::move(s));
  }
  if (selected.empty())
    return SelectionError{"no scenario matches --filter '" + o.filter + "'" +
                          (o.only_checks.empty() ? "" : " with one of the --check checks")};
  return selected;
}

}  // namespace mla
