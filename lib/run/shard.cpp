#include "lib/run/shard.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "lib/run/hash.h"

namespace mla {

namespace {

std::optional<long> whole_number(const std::string& s) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::strtol(s.c_str(), nullptr, 10);
}

}  // namespace

std::variant<ShardSpec, std::string> parse_shard_spec(const std::string& text) {
  const std::string form = "'" + text + "': expected I/N, shard I of N with 1 <= I <= N <= " + std::to_string(kMaxShards) +
                           " (e.g. 2/4)";
  const size_t slash = text.find('/');
  if (slash == std::string::npos) return form;
  const auto i = whole_number(text.substr(0, slash)), n = whole_number(text.substr(slash + 1));
  if (!i || !n) return form;
  if (*n < 1 || *n > kMaxShards) return "'" + text + "': the number of shards must be in [1, " + std::to_string(kMaxShards) + "]";
  if (*i < 1) return "'" + text + "': shards count from 1 (1/" + std::to_string(*n) + " .. " + std::to_string(*n) + "/" + std::to_string(*n) + ")";
  if (*i > *n) return "'" + text + "': there is no shard " + std::to_string(*i) + " of " + std::to_string(*n);
  return ShardSpec{static_cast<int>(*i), static_cast<int>(*n)};
}

std::variant<std::map<std::string, double>, std::string> load_recorded_costs(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "cannot read " + path + ": " + std::strerror(errno);
  std::ostringstream text;
  text << in.rdbuf();
  std::map<std::string, double> costs;
  try {
    const auto j = nlohmann::json::parse(text.str());
    if (!j.is_object() || j.value("schema", std::string()) != "mla-harness.report/1")
      return path + " is not an mla-check report (schema mla-harness.report/1)";
    for (const auto& s : j.at("scenarios")) {
      const auto& d = s.at("duration_s");
      if (d.is_number() && d.get<double>() >= 0) costs[s.at("name").get<std::string>()] = d.get<double>();
    }
  } catch (const std::exception& e) {
    return path + ": not a readable report: " + e.what();
  }
  return costs;
}

ShardPlan plan_shards(const std::vector<std::string>& names, const std::map<std::string, double>& recorded, int count) {
  const size_t n = names.size();
  const int N = std::max(count, 1);
  ShardPlan plan;
  plan.shard.assign(n, 0);
  plan.cost.assign(n, 0.0);
  plan.estimated.assign(n, false);
  plan.load.assign(static_cast<size_t>(N), 0.0);
  std::vector<double> known;
  for (const auto& name : names)
    if (const auto it = recorded.find(name); it != recorded.end()) known.push_back(std::max(it->second, kMinScenarioCost));
  double median = 1.0;
  if (!known.empty()) {
    std::sort(known.begin(), known.end());
    median = known.size() % 2 ? known[known.size() / 2] : (known[known.size() / 2 - 1] + known[known.size() / 2]) / 2;
  }
  for (size_t i = 0; i < n; ++i) {
    const auto it = recorded.find(names[i]);
    plan.estimated[i] = it == recorded.end();
    plan.cost[i] = plan.estimated[i] ? median : std::max(it->second, kMinScenarioCost);
  }
  const double total = std::accumulate(plan.cost.begin(), plan.cost.end(), 0.0);
  const double share = total / N;
  // 1. Heavy scenarios, largest first, each to the least-loaded shard (the lowest index on a tie).
  std::vector<size_t> heavy, light;
  for (size_t i = 0; i < n; ++i) (plan.cost[i] > share / 2 ? heavy : light).push_back(i);
  std::sort(heavy.begin(), heavy.end(), [&](size_t a, size_t b) {
    return plan.cost[a] != plan.cost[b] ? plan.cost[a] > plan.cost[b] : names[a] < names[b];
  });
  for (size_t i : heavy) {
    const int k = static_cast<int>(std::min_element(plan.load.begin(), plan.load.end()) - plan.load.begin());
    plan.shard[i] = k;
    plan.load[static_cast<size_t>(k)] += plan.cost[i];
  }
  // 2. The light ones on the line of their names' hashes, cut in proportion to each shard's room.
  const auto hash_of = [&](size_t i) { return fnv1a64(names[i].data(), names[i].size()); };
  std::sort(light.begin(), light.end(), [&](size_t a, size_t b) {
    const uint64_t ha = hash_of(a), hb = hash_of(b);
    return ha != hb ? ha < hb : names[a] < names[b];
  });
  double light_total = 0.0;
  for (size_t i : light) light_total += plan.cost[i];
  std::vector<double> room(static_cast<size_t>(N));
  for (int k = 0; k < N; ++k) room[static_cast<size_t>(k)] = std::max(0.0, share - plan.load[static_cast<size_t>(k)]);
  const double room_total = std::accumulate(room.begin(), room.end(), 0.0);
  std::vector<double> cut(static_cast<size_t>(N));  // cut[k]: where shard k's piece of the line ends
  double acc = 0.0;
  for (int k = 0; k < N; ++k) {
    acc += room_total > 0 ? room[static_cast<size_t>(k)] * light_total / room_total : light_total / N;
    cut[static_cast<size_t>(k)] = acc;
  }
  double along = 0.0;
  for (size_t i : light) {
    const double mid = along + plan.cost[i] / 2;
    int k = static_cast<int>(std::upper_bound(cut.begin(), cut.end(), mid) - cut.begin());
    k = std::min(k, N - 1);
    plan.shard[i] = k;
    plan.load[static_cast<size_t>(k)] += plan.cost[i];
    along += plan.cost[i];
  }
  return plan;
}

std::variant<ShardSelection, std::string> select_shard(const std::string& spec, const std::string& costs_path,
                                                       const std::string& scenario_dir,
                                                       const std::vector<Scenario>& selected) {
  if (spec.empty()) return std::string("--shard-costs needs --shard I/N");
  const auto parsed = parse_shard_spec(spec);
  if (const auto* bad = std::get_if<std::string>(&parsed)) return "--shard " + *bad;
  const ShardSpec sh = std::get<ShardSpec>(parsed);
  ShardSelection out;
  out.info.index = sh.index;
  out.info.count = sh.count;
  std::map<std::string, double> recorded;
  std::string source = costs_path;
  if (source.empty()) {
    const std::string fallback =
        (std::filesystem::path(scenario_dir).parent_path() / "baselines" / "host-report.json").string();
    std::error_code ec;
    if (std::filesystem::is_regular_file(fallback, ec)) source = fallback;
  }
  if (!source.empty()) {
    auto loaded = load_recorded_costs(source);
    if (const auto* bad = std::get_if<std::string>(&loaded)) return "--shard-costs: " + *bad;
    recorded = std::get<std::map<std::string, double>>(std::move(loaded));
  }
  out.info.costs = source;
  std::vector<std::string> names;
  for (const Scenario& s : selected) names.push_back(s.name);
  out.info.selection = names;
  const ShardPlan plan = plan_shards(names, recorded, sh.count);
  size_t estimated = 0;
  for (size_t i = 0; i < selected.size(); ++i) {
    estimated += plan.estimated[i] ? 1 : 0;
    if (plan.shard[i] == sh.index - 1) out.scenarios.push_back(selected[i]);
  }
  std::vector<std::string> notes;
  if (source.empty())
    notes.push_back("--shard: no report of durations (" + scenario_dir +
                    "/../baselines/host-report.json is absent; --shard-costs names one): every scenario counts the same");
  else if (estimated > 0)
    notes.push_back("--shard: " + std::to_string(estimated) + " of " + std::to_string(selected.size()) +
                    " scenarios have no duration in " + source + ": counted at the median of the others");
  if (out.scenarios.empty())
    notes.push_back("--shard " + spec + " holds none of the " + std::to_string(selected.size()) + " selected scenarios");
  for (const auto& n : notes) out.note += (out.note.empty() ? "" : "\nmla-check: note: ") + n;
  return out;
}

}  // namespace mla
