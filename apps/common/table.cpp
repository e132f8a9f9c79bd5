#include "apps/common/table.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <utility>

namespace mla::app {

namespace {

const char* color_of(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "\033[32m";
    case Verdict::kSkip: return "\033[33m";
    default: return "\033[31;1m";
  }
}

std::string seconds(double s) {
  char buf[32];
  if (s < 1.0) std::snprintf(buf, sizeof buf, "%.0f ms", s * 1e3);
  else std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

std::string truncate(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 3) + "..."; }

}  // namespace

std::string key_metric(const CheckResult& c) {
  const Metrics& m = c.metrics;
  std::ostringstream o;
  // A failing check's reason says what differed and where (set by finalize()).
  if (c.verdict != Verdict::kPass && !c.reason.empty()) return c.reason;
  if (m.bit_exact && *m.bit_exact) {
    o << "bit-exact, " << m.elements << " el";
  } else if (m.mismatches > 0) {
    o << m.mismatches << " of " << m.elements << " differ";
    if (std::isfinite(m.max_abs_err)) o << ", max abs " << m.max_abs_err;
  } else if (std::isfinite(m.max_abs_err)) {
    o << "max abs " << m.max_abs_err;
    if (std::isfinite(m.cos_diff)) o << ", cos diff " << m.cos_diff;
    o << ", " << m.elements << " el";
  } else {
    o << m.elements << " el";
  }
  return o.str();
}

void print_table(std::FILE* out, const std::vector<ScenarioResult>& results, TableMode mode, bool color) {
  struct Row {
    std::string scenario, check, metric, time;
    Verdict verdict;
  };
  std::vector<Row> rows;
  for (const auto& s : results) {
    if (!s.error.empty()) rows.push_back({s.name, "(scenario)", s.error, seconds(s.duration_s), Verdict::kError});
    const bool all_fine = std::none_of(s.checks.begin(), s.checks.end(), [](const CheckResult& c) { return is_failure(c.verdict); });
    if (mode == TableMode::kCompact && all_fine && s.error.empty()) {
      int64_t elements = 0, skipped = 0;
      bool exact = true;
      for (const auto& c : s.checks) {
        elements += c.metrics.elements;
        skipped += c.verdict == Verdict::kSkip;
        exact = exact && (c.verdict == Verdict::kSkip || c.metrics.bit_exact.value_or(false));
      }
      const int64_t ran = static_cast<int64_t>(s.checks.size()) - skipped;
      std::ostringstream o;
      if (ran == 0) {
        o << "all " << skipped << " checks skipped: " << (s.checks.empty() ? "" : s.checks.front().reason);
      } else {
        o << s.checks.size() << " checks" << (exact ? ", all bit-exact" : "") << ", " << elements << " el";
        if (skipped) o << ", " << skipped << " skipped";
      }
      rows.push_back({s.name, "(all)", o.str(), seconds(s.duration_s), s.verdict});
      continue;
    }
    for (const auto& c : s.checks) {
      if (mode == TableMode::kFailures && !is_failure(c.verdict)) continue;
      rows.push_back({s.name, c.id, key_metric(c), seconds(c.duration_s), c.verdict});
    }
  }
  if (rows.empty()) return;
  size_t w_s = 8, w_c = 5;
  for (const auto& r : rows) {
    w_s = std::min<size_t>(std::max(w_s, r.scenario.size()), 36);
    w_c = std::min<size_t>(std::max(w_c, r.check.size()), 36);
  }
  std::fprintf(out, "%-*s  %-*s  %-9s  %9s  %s\n", int(w_s), "SCENARIO", int(w_c), "CHECK", "VERDICT", "TIME", "DETAIL");
  std::string last;
  for (const auto& r : rows) {
    const std::string name = r.scenario == last ? "" : truncate(r.scenario, w_s);
    last = r.scenario;
    std::fprintf(out, "%-*s  %-*s  %s%-9s%s  %9s  %s\n", int(w_s), name.c_str(), int(w_c),
                 truncate(r.check, w_c).c_str(), color ? color_of(r.verdict) : "", to_string(r.verdict),
                 color ? "\033[0m" : "", r.time.c_str(), truncate(r.metric, 120).c_str());
  }
}

void print_summary(std::FILE* out, const RunReport& report, const std::string& report_path) {
  std::map<Verdict, int> checks;
  for (const auto& s : report.scenarios)
    for (const auto& c : s.checks) ++checks[c.verdict];
  // A scenario whose checks were all skipped is counted as skipped, with why, never as passed.
  const ScenarioCounts n = count_scenarios(report);
  std::vector<std::pair<std::string, int>> reasons(n.skipped_by_reason.begin(), n.skipped_by_reason.end());
  std::stable_sort(reasons.begin(), reasons.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::ostringstream o;
  o << to_string(run_verdict(report)) << ": " << report.scenarios.size() << " scenarios: " << n.passed << " passed, "
    << n.skipped << " skipped";
  if (reasons.size() == 1) {
    o << " (" << reasons.front().first << ")";
  } else if (!reasons.empty()) {
    o << " (";
    for (size_t i = 0; i < reasons.size(); ++i) o << (i ? ", " : "") << reasons[i].second << " " << reasons[i].first;
    o << ")";
  }
  o << ", " << n.failed << " failed; checks:";
  for (const auto& [v, count] : checks) o << " " << count << " " << to_string(v);
  o << " — backend " << report.provenance.backend << " (" << report.provenance.device << "), "
    << seconds(report.provenance.duration_s);
  if (!report.provenance.injection.empty()) o << ", injected " << report.provenance.injection;
  std::fprintf(out, "%s\n", o.str().c_str());
  if (!report_path.empty()) std::fprintf(out, "report: %s\n", report_path.c_str());
}

}  // namespace mla::app
