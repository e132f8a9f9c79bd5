// The JSON report (docs/report-format.md): schema "mla-harness.report/1", provenance, one entry per
// scenario with its checks and metrics, null for NaN. Written atomically (temp file + rename).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/backend.h"
#include "kernels/common/status.h"
#include "lib/run/scenario_run.h"

namespace mla {

inline constexpr const char* kReportSchema = "mla-harness.report/1";

struct Provenance {
  std::string tool = "mla-check";
  std::string version;
  std::string git_revision;
  std::vector<std::string> argv;
  std::string backend;
  std::string device;
  std::string runtime;
  std::string kernels;     // BackendInfo::kernels: the attention implementations (empty on host)
  std::map<std::string, std::string> backend_details;  // BackendInfo::details (a Python adapter's file, hash, versions)
  std::string host;
  std::string started_at;  // ISO 8601, UTC
  double duration_s = 0.0;
  std::string injection;   // empty: none
  std::optional<uint64_t> seed_override;
  // --shard I/N: which part of which selection this run holds (scripts/merge_reports.py joins the
  // shards' reports and checks them against `selection`).
  struct Shard {
    int index = 1;                       // 1 .. count
    int count = 1;
    std::vector<std::string> selection;  // every selected scenario's name, in the suite's order
    std::string costs;                   // the report whose durations balanced the shards; "" for none
  };
  std::optional<Shard> shard;
};

struct RunReport {
  Provenance provenance;
  std::vector<ScenarioResult> scenarios;
};

const char* tool_version();       // the project version compiled in
const char* tool_git_revision();  // the git revision at configure time

Verdict run_verdict(const RunReport& r);

// The run in scenarios, as both summaries (mla-check's line, the report's "summary" block) tell
// it: a scenario whose checks were all skipped is skipped, never passed.
struct ScenarioCounts {
  int passed = 0;   // verdict PASS
  int skipped = 0;  // verdict SKIP (every check skipped)
  int failed = 0;   // FAIL, NONFINITE, OOB or ERROR
  std::map<std::string, int> skipped_by_reason;  // skip_group() of its first check's reason -> skipped scenarios
};
ScenarioCounts count_scenarios(const RunReport& r);
// A skip reason's group: TAG for "tagged TAG: ..." (e.g. "gpu-only"), else the reason up to its
// first ": "; "no reason given" for an empty one.
std::string skip_group(const std::string& reason);

// The provenance's clock and host: now as ISO 8601 UTC ("2025-01-01T12:00:00Z"), and this
// machine's host name ("unknown" when it has none).
std::string utc_now_iso8601();
std::string hostname();

std::string report_to_json(const RunReport& r);
Status write_report_atomic(const std::string& path, const RunReport& r);
// Whether write_report_atomic could write `path`, asked before a run instead of after it: the
// path is not a directory and its temporary sibling can be created (and is removed again).
Status check_report_writable(const std::string& path);

// A backend's info as a JSON value and back (the probe's answer from its child process).
nlohmann::json backend_info_to_json(const BackendInfo& info);
BackendInfo backend_info_from_json(const nlohmann::json& j);  // throws on a malformed value

// One scenario's result, and one check's, as single-line JSON text and back (the child-process
// protocol of the suite runner).
std::string scenario_result_to_json(const ScenarioResult& r);
std::optional<ScenarioResult> scenario_result_from_json(const std::string& text, std::string* error);
std::string check_result_to_json(const CheckResult& c);
std::optional<CheckResult> check_result_from_json(const std::string& text, std::string* error);

}  // namespace mla
