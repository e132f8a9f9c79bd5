#include "lib/checks/verdict.h"

#include <sstream>

namespace mla {

namespace {
constexpr const char* kNames[] = {"PASS", "SKIP", "FAIL", "NONFINITE", "OOB", "ERROR"};
}

const char* to_string(Verdict v) { return kNames[static_cast<int>(v)]; }

std::optional<Verdict> verdict_from_string(const std::string& s) {
  for (int i = 0; i < 6; ++i)
    if (s == kNames[i]) return static_cast<Verdict>(i);
  return std::nullopt;
}

Verdict aggregate(const std::vector<Verdict>& verdicts) {
  Verdict v = Verdict::kPass;
  bool all_skipped = !verdicts.empty();
  for (Verdict x : verdicts) {
    if (x != Verdict::kSkip) {
      all_skipped = false;
      v = worst(v, x);
    }
  }
  return all_skipped ? Verdict::kSkip : v;
}

Verdict verdict_from_metrics(const Metrics& m) {
  if (m.guard_bytes_changed > 0 || m.untouched_bytes_changed > 0 || m.inputs_modified) return Verdict::kOob;
  const bool exact = m.bit_exact.has_value();
  if (!exact && m.nonfinite_mismatches > 0) return Verdict::kNonFinite;
  if (m.mismatches > 0 || m.nonfinite_mismatches > 0) return Verdict::kFail;
  if (std::isfinite(m.cos_tolerance) && !(m.cos_diff <= m.cos_tolerance)) return Verdict::kFail;
  if (exact && !*m.bit_exact) return Verdict::kFail;
  return Verdict::kPass;
}

CheckResult skipped_check(const std::string& id, const std::string& check, const std::string& reason) {
  CheckResult r;
  r.id = id;
  r.check = check;
  r.verdict = Verdict::kSkip;
  r.reason = reason;
  return r;
}

void finalize(CheckResult& r) {
  const Metrics& m = r.metrics;
  r.verdict = verdict_from_metrics(m);
  if (r.verdict == Verdict::kPass) return;
  std::ostringstream o;
  if (m.guard_bytes_changed > 0) o << m.guard_bytes_changed << " guard-zone bytes changed; ";
  if (m.untouched_bytes_changed > 0) o << m.untouched_bytes_changed << " bytes that must stay untouched changed; ";
  if (m.inputs_modified) o << "an input buffer was modified; ";
  if (m.mismatches > 0) {
    o << m.mismatches << " of " << m.elements << " elements differ";
    if (m.worst_index >= 0) o << " (worst at " << m.worst_index << ": ref " << m.worst_ref << ", got " << m.worst_got << ")";
    o << "; ";
  }
  if (m.nonfinite_mismatches > 0) o << m.nonfinite_mismatches << " NaN/inf mismatches; ";
  if (std::isfinite(m.cos_tolerance) && !(m.cos_diff <= m.cos_tolerance))
    o << "cosine difference " << m.cos_diff << " over tolerance " << m.cos_tolerance << "; ";
  std::string s = o.str();
  if (s.size() >= 2) s.resize(s.size() - 2);
  if (r.reason.empty()) r.reason = s;
}

}  // namespace mla
