// --shard I/N: a deterministic partition of the selected scenarios into N shards, so that N
// machines (a CI matrix, a Slurm job array) run the suite between them and
// scripts/merge_reports.py joins their reports into one.
//
// The shards are balanced by each scenario's recorded cost (its duration in an earlier report;
// scenarios without one get the median of the recorded ones) and stable when scenarios are added:
//   1. heavy scenarios (cost above half a shard's share, C / 2N) go to the least-loaded shard,
//      largest first (few of them; a long scenario decides the run's length on its own);
//   2. the others lie on a line in the order of a hash of their names (adding a scenario inserts
//      it somewhere without reordering the rest) and the line is cut into N pieces, each as long
//      as its shard's room left by step 1; a scenario goes where its midpoint falls.
// Adding a scenario of cost c moves each cut by at most about c, so only the scenarios next to a
// cut change shard; a shard's cost exceeds its share by at most the largest light scenario.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "lib/run/report.h"
#include "lib/scenario/scenario.h"

namespace mla {

struct ShardSpec {
  int index = 1;  // 1 .. count
  int count = 1;
};

// "I/N" with 1 <= I <= N <= kMaxShards; otherwise a message that says what is wrong.
inline constexpr int kMaxShards = 100000;
std::variant<ShardSpec, std::string> parse_shard_spec(const std::string& text);

// A scenario process's own start and end, the cost of a scenario recorded as 0 s (skipped).
inline constexpr double kMinScenarioCost = 0.05;

// Scenario name -> duration_s from an mla-check report (schema mla-harness.report/1); a message
// when the file cannot be read or is not such a report.
std::variant<std::map<std::string, double>, std::string> load_recorded_costs(const std::string& path);

struct ShardPlan {
  std::vector<int> shard;        // per scenario, 0-based
  std::vector<double> cost;      // per scenario, as balanced (floored at kMinScenarioCost)
  std::vector<bool> estimated;   // no recorded cost: the median of the recorded ones (1 s when none)
  std::vector<double> load;      // per shard
};

// The partition of `names` (each once) into `count` shards.
ShardPlan plan_shards(const std::vector<std::string>& names, const std::map<std::string, double>& recorded, int count);

// mla-check --shard SPEC [--shard-costs REPORT]: the scenarios of `selected` (in its order) that
// shard SPEC holds, and what the report records about it. costs_path empty: the host baseline
// beside the scenario directory (<scenario_dir>/../baselines/host-report.json) when it exists,
// else every scenario counts the same. `note` says what the user should know (estimated costs, an
// empty shard). The error: a bad SPEC, --shard-costs without --shard, an unreadable REPORT.
struct ShardSelection {
  Provenance::Shard info;
  std::vector<Scenario> scenarios;
  std::string note;
};
std::variant<ShardSelection, std::string> select_shard(const std::string& spec, const std::string& costs_path,
                                                       const std::string& scenario_dir,
                                                       const std::vector<Scenario>& selected);

}  // namespace mla
