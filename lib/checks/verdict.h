// Verdicts and per-check results (DESIGN.md "Checks and verdicts").
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mla {

// Ordered best to worst; a scenario's verdict is the worst of its checks, the run's the worst of
// all scenarios.
enum class Verdict { kPass = 0, kSkip, kFail, kNonFinite, kOob, kError };
const char* to_string(Verdict v);
std::optional<Verdict> verdict_from_string(const std::string& s);
inline Verdict worst(Verdict a, Verdict b) { return static_cast<int>(a) >= static_cast<int>(b) ? a : b; }
inline bool is_failure(Verdict v) { return v != Verdict::kPass && v != Verdict::kSkip; }

// The verdict of a group (a scenario's checks, a run's scenarios): the worst, where SKIP counts
// only when everything was skipped (then the group is SKIP, not PASS). Empty: PASS.
Verdict aggregate(const std::vector<Verdict>& verdicts);

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// What a comparison found. Doubles that do not apply stay NaN (written as null).
struct Metrics {
  int64_t elements = 0;               // elements compared
  int64_t mismatches = 0;             // out of tolerance (or bits differ, for exact checks)
  std::optional<bool> bit_exact;      // set by exact checks
  double max_abs_err = kNaN;
  double max_rel_err = kNaN;
  double cos_diff = kNaN;             // 1 - 2 sum(a r) / sum(a^2 + r^2)
  double cos_tolerance = kNaN;        // when set, cos_diff above it is a FAIL
  int64_t worst_index = -1;           // flat index of the worst element
  double worst_ref = kNaN, worst_got = kNaN;
  int64_t nonfinite_mismatches = 0;   // NaN/inf in one and not the other
  int64_t guard_bytes_changed = 0;    // bytes of guard zones that changed
  int64_t untouched_bytes_changed = 0;  // bytes inside a buffer that the operation must not write
  bool inputs_modified = false;       // an input buffer changed during the run
  std::map<std::string, double> extra;  // check-specific figures (LSE errors, counts, ...)
};

struct CheckResult {
  std::string id;      // unique in the scenario, e.g. "gather/chunks[1]"
  std::string check;   // the check kind, e.g. "gather"
  Verdict verdict = Verdict::kPass;
  std::string reason;  // why SKIP / ERROR / FAIL, one line; empty on PASS
  double duration_s = 0.0;
  Metrics metrics;
  std::vector<std::string> notes;  // what the reader should know beside the verdict (the backend's notes)
};

// A SKIP result with its id, check kind and the reason.
CheckResult skipped_check(const std::string& id, const std::string& check, const std::string& reason);

// Verdict from the metrics of one comparison: OOB beats NONFINITE beats FAIL. For exact checks
// (bit_exact set) any difference is FAIL, NaN included (docs/report-format.md).
Verdict verdict_from_metrics(const Metrics& m);

// Sets r.verdict from r.metrics and, for a non-PASS verdict, a one-line reason that says what
// differed and where.
void finalize(CheckResult& r);

}  // namespace mla
