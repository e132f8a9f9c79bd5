#include "lib/run/report.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#ifndef MLA_VERSION
#define MLA_VERSION "0.0.0"
#endif
#ifndef MLA_GIT_REVISION
#define MLA_GIT_REVISION "unknown"
#endif

namespace mla {

using nlohmann::json;

const char* tool_version() { return MLA_VERSION; }
const char* tool_git_revision() { return MLA_GIT_REVISION; }

namespace {

json number_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }
double number_or_nan(const json& j) { return j.is_number() ? j.get<double>() : std::nan(""); }

json metrics_to_json(const Metrics& m) {
  json j = {
      {"elements", m.elements},
      {"mismatches", m.mismatches},
      {"bit_exact", m.bit_exact ? json(*m.bit_exact) : json(nullptr)},
      {"max_abs_err", number_or_null(m.max_abs_err)},
      {"max_rel_err", number_or_null(m.max_rel_err)},
      {"cos_diff", number_or_null(m.cos_diff)},
      {"cos_tolerance", number_or_null(m.cos_tolerance)},
      {"worst_index", m.worst_index >= 0 ? json(m.worst_index) : json(nullptr)},
      {"worst_ref", number_or_null(m.worst_ref)},
      {"worst_got", number_or_null(m.worst_got)},
      {"nonfinite_mismatches", m.nonfinite_mismatches},
      {"guard_bytes_changed", m.guard_bytes_changed},
      {"untouched_bytes_changed", m.untouched_bytes_changed},
      {"inputs_modified", m.inputs_modified},
  };
  for (const auto& [k, v] : m.extra) j[k] = number_or_null(v);
  return j;
}

Metrics metrics_from_json(const json& j) {
  Metrics m;
  m.elements = j.value("elements", int64_t{0});
  m.mismatches = j.value("mismatches", int64_t{0});
  if (j.contains("bit_exact") && j["bit_exact"].is_boolean()) m.bit_exact = j["bit_exact"].get<bool>();
  m.max_abs_err = number_or_nan(j.value("max_abs_err", json()));
  m.max_rel_err = number_or_nan(j.value("max_rel_err", json()));
  m.cos_diff = number_or_nan(j.value("cos_diff", json()));
  m.cos_tolerance = number_or_nan(j.value("cos_tolerance", json()));
  m.worst_index = j.contains("worst_index") && j["worst_index"].is_number() ? j["worst_index"].get<int64_t>() : -1;
  m.worst_ref = number_or_nan(j.value("worst_ref", json()));
  m.worst_got = number_or_nan(j.value("worst_got", json()));
  m.nonfinite_mismatches = j.value("nonfinite_mismatches", int64_t{0});
  m.guard_bytes_changed = j.value("guard_bytes_changed", int64_t{0});
  m.untouched_bytes_changed = j.value("untouched_bytes_changed", int64_t{0});
  m.inputs_modified = j.value("inputs_modified", false);
  static const std::map<std::string, int> kKnown = {
      {"elements", 0}, {"mismatches", 0}, {"bit_exact", 0}, {"max_abs_err", 0}, {"max_rel_err", 0},
      {"cos_diff", 0}, {"cos_tolerance", 0}, {"worst_index", 0}, {"worst_ref", 0}, {"worst_got", 0}, {"nonfinite_mismatches", 0},
      {"guard_bytes_changed", 0}, {"untouched_bytes_changed", 0}, {"inputs_modified", 0}};
  for (const auto& [k, v] : j.items())
    if (!kKnown.count(k)) m.extra[k] = number_or_nan(v);
  return m;
}

json check_to_json(const CheckResult& c) {
  json j = {{"id", c.id},
            {"check", c.check},
            {"verdict", to_string(c.verdict)},
            {"reason", c.reason.empty() ? json(nullptr) : json(c.reason)},
            {"duration_s", c.duration_s},
            {"metrics", metrics_to_json(c.metrics)}};
  if (!c.notes.empty()) j["notes"] = c.notes;
  return j;
}

json scenario_to_json_value(const ScenarioResult& s) {
  json checks = json::array();
  for (const auto& c : s.checks) checks.push_back(check_to_json(c));
  json j = {{"name", s.name},
            {"file", s.file},
            {"verdict", to_string(s.verdict)},
            {"error", s.error.empty() ? json(nullptr) : json(s.error)},
            {"repro", s.repro},
            {"duration_s", s.duration_s},
            {"checks", checks}};
  if (!s.cuda_visible_devices.empty()) j["cuda_visible_devices"] = s.cuda_visible_devices;
  return j;
}

}  // namespace

json backend_info_to_json(const BackendInfo& i) {
  return json{{"name", i.name}, {"device", i.device}, {"runtime", i.runtime}, {"kernels", i.kernels},
              {"details", i.details}};
}

BackendInfo backend_info_from_json(const json& j) {
  BackendInfo i;
  i.name = j.at("name").get<std::string>();
  i.device = j.at("device").get<std::string>();
  i.runtime = j.at("runtime").get<std::string>();
  i.kernels = j.at("kernels").get<std::string>();
  i.details = j.at("details").get<std::map<std::string, std::string>>();
  return i;
}

Verdict run_verdict(const RunReport& r) {
  std::vector<Verdict> v;
  for (const auto& s : r.scenarios) v.push_back(s.verdict);
  return aggregate(v);
}

std::string skip_group(const std::string& reason) {
  static const std::string kTagged = "tagged ";
  std::string g = reason.compare(0, kTagged.size(), kTagged) == 0 ? reason.substr(kTagged.size()) : reason;
  const size_t colon = g.find(": ");
  if (colon != std::string::npos) g.resize(colon);
  return g.empty() ? "no reason given" : g;
}

ScenarioCounts count_scenarios(const RunReport& r) {
  ScenarioCounts n;
  for (const auto& s : r.scenarios) {
    if (s.verdict == Verdict::kPass) {
      ++n.passed;
    } else if (s.verdict == Verdict::kSkip) {
      ++n.skipped;
      ++n.skipped_by_reason[skip_group(s.checks.empty() ? std::string() : s.checks.front().reason)];
    } else {
      ++n.failed;
    }
  }
  return n;
}

std::string utc_now_iso8601() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string hostname() {
  char buf[256] = {0};
  return ::gethostname(buf, sizeof buf - 1) == 0 ? buf : "unknown";
}

std::string report_to_json(const RunReport& r) {
  const Provenance& p = r.provenance;
  json scenarios = json::array();
  std::map<std::string, int> by_verdict;
  int checks = 0;
  for (const auto& s : r.scenarios) {
    scenarios.push_back(scenario_to_json_value(s));
    for (const auto& c : s.checks) {
      ++checks;
      ++by_verdict[to_string(c.verdict)];
    }
    if (!s.error.empty()) ++by_verdict["ERROR"];
  }
  const ScenarioCounts counts = count_scenarios(r);
  json j = {
      {"schema", kReportSchema},
      {"provenance",
       {{"tool", p.tool},
        {"version", p.version},
        {"git_revision", p.git_revision},
        {"argv", p.argv},
        {"backend", p.backend},
        {"device", p.device},
        {"runtime", p.runtime},
        {"kernels", p.kernels},
        {"backend_details", p.backend_details},
        {"host", p.host},
        {"started_at", p.started_at},
        {"duration_s", p.duration_s},
        {"injection", p.injection.empty() ? json(nullptr) : json(p.injection)},
        {"seed_override", p.seed_override ? json(*p.seed_override) : json(nullptr)}}},
      {"summary",
       {{"verdict", to_string(run_verdict(r))},
        {"scenarios", r.scenarios.size()},
        {"checks", checks},
        {"by_verdict", by_verdict},
        {"scenarios_passed", counts.passed},
        {"scenarios_skipped", counts.skipped},
        {"scenarios_failed", counts.failed},
        {"skipped_by_reason", counts.skipped_by_reason}}},
      {"scenarios", scenarios},
  };
  if (p.shard)
    j["provenance"]["shard"] = {{"index", p.shard->index}, {"count", p.shard->count}, {"selection", p.shard->selection},
                                {"costs", p.shard->costs}};
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

namespace {

std::string report_temp_path(const std::string& path) { return path + ".tmp." + std::to_string(::getpid()); }

std::string errno_text(int err) { return std::strerror(err); }

// Writes all of `text` to fd; false with errno set on a short write that cannot go on.
bool write_all(int fd, const std::string& text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) {
      errno = ENOSPC;
      return false;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

Status check_report_writable(const std::string& path) {
  if (path.empty()) return Status::error("cannot write report: the path is empty");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Status::error("cannot write report: '" + path + "' is a directory");
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return Status::error("cannot write report: '" + path + "' is not a regular file (the report replaces it by rename)");
  }
  const std::string tmp = report_temp_path(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::error("cannot write report: cannot create '" + tmp + "': " + errno_text(errno));
  }
  ::close(fd);
  ::unlink(tmp.c_str());
  return Status();
}

// The temporary file is removed on every failure: a failed write leaves the old report (if any)
// and nothing else.
Status write_report_atomic(const std::string& path, const RunReport& r) {
  if (path.empty()) return Status::error("cannot write report: the path is empty");
  const std::string text = report_to_json(r);
  const std::string tmp = report_temp_path(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::error("cannot write report: cannot create '" + tmp + "': " + errno_text(errno));
  const auto fail = [&](const std::string& what) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return Status::error("cannot write report '" + path + "': " + what + ": " + errno_text(err) +
                         " (no report was written)");
  };
  if (!write_all(fd, text)) return fail("writing " + std::to_string(text.size()) + " bytes to '" + tmp + "'");
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) return fail("flushing '" + tmp + "'");
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Status::error("cannot write report '" + path + "': closing '" + tmp + "': " + errno_text(err) +
                         " (no report was written)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Status::error("cannot write report '" + path + "': renaming '" + tmp + "' to it: " + errno_text(err) +
                         " (no report was written)");
  }
  return Status();
}

std::string scenario_result_to_json(const ScenarioResult& r) {
  return scenario_to_json_value(r).dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {
CheckResult check_from_json_value(const json& c) {
  CheckResult cr;
  cr.id = c.at("id").get<std::string>();
  cr.check = c.at("check").get<std::string>();
  cr.verdict = verdict_from_string(c.at("verdict").get<std::string>()).value_or(Verdict::kError);
  cr.reason = c.at("reason").is_string() ? c["reason"].get<std::string>() : "";
  cr.duration_s = c.value("duration_s", 0.0);
  cr.metrics = metrics_from_json(c.at("metrics"));
  if (c.contains("notes")) cr.notes = c.at("notes").get<std::vector<std::string>>();
  return cr;
}
}  // namespace

std::optional<ScenarioResult> scenario_result_from_json(const std::string& text, std::string* error) {
  try {
    const json j = json::parse(text);
    ScenarioResult s;
    s.name = j.at("name").get<std::string>();
    s.file = j.at("file").get<std::string>();
    s.verdict = verdict_from_string(j.at("verdict").get<std::string>()).value_or(Verdict::kError);
    s.error = j.at("error").is_string() ? j["error"].get<std::string>() : "";
    s.repro = j.value("repro", "");
    s.duration_s = j.value("duration_s", 0.0);
    for (const auto& c : j.at("checks")) s.checks.push_back(check_from_json_value(c));
    return s;
  } catch (const std::exception& e) {
    if (error) *error = e.what();
    return std::nullopt;
  }
}

std::string check_result_to_json(const CheckResult& c) {
  return check_to_json(c).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<CheckResult> check_result_from_json(const std::string& text, std::string* error) {
  try {
    return check_from_json_value(json::parse(text));
  } catch (const std::exception& e) {
    if (error) *error = e.what();
    return std::nullopt;
  }
}

}  // namespace mla
