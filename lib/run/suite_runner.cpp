#include "lib/run/suite_runner.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "lib/dcp/launch_env.h"
#include "lib/run/suite_runner_children.h"

namespace mla {

namespace {

BackendProbe probe_in_process(const BackendChoice& choice) {
  BackendProbe p;
  p.resolved = resolve_auto(choice);
  auto b = make_backend(p.resolved, &p.error);
  if (!b) {
    p.error = "--backend " + to_string(choice) + ": " + p.error;
    return p;
  }
  p.info = b->info();
  p.on_gpu = b->native_device().kind == NativeDevice::Kind::kCuda;
  if (const auto free = b->free_memory()) p.free_memory = *free;
  if (p.on_gpu) p.device_count = cuda_device_count();
  p.ok = true;
  return p;
}

}  // namespace

BackendProbe probe_backend(const BackendChoice& choice, bool isolate) {
  if (!isolate) return probe_in_process(choice);
  const ChildOutcome c = run_in_child(
      [&](const ChildEmit& emit) {
        const BackendProbe p = probe_in_process(choice);
        emit(nlohmann::json{{"ok", p.ok},
                            {"error", p.error},
                            {"resolved", to_string(p.resolved)},
                            {"on_gpu", p.on_gpu},
                            {"free_memory", p.free_memory ? nlohmann::json(*p.free_memory) : nlohmann::json()},
                            {"device_count", p.device_count},
                            {"info", backend_info_to_json(p.info)}}
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      },
      120.0);
  BackendProbe p;
  if (!c.ok) {
    p.error = "probing the backend failed: " + c.error;
    return p;
  }
  try {
    const auto j = nlohmann::json::parse(c.output);
    p.ok = j.at("ok").get<bool>();
    p.error = j.at("error").get<std::string>();
    p.resolved = choice;
    const std::string problem = parse_backend_choice(j.at("resolved").get<std::string>(), &p.resolved);
    if (!problem.empty()) throw std::runtime_error(problem);
    p.info = backend_info_from_json(j.at("info"));
    p.on_gpu = j.at("on_gpu").get<bool>();
    if (j.at("free_memory").is_number_unsigned()) p.free_memory = j.at("free_memory").get<uint64_t>();
    p.device_count = j.at("device_count").get<int>();
  } catch (const std::exception& e) {
    p.ok = false;
    p.error = std::string("probing the backend failed: unreadable answer: ") + e.what();
  }
  return p;
}

namespace {

// Runs scenario `s` in this process (in a scenario's child, or everything with --no-isolate).
ScenarioResult run_here(const SuiteOptions& opt, const Scenario& s,
                        const std::function<void(const CheckResult&)>& on_check) {
  std::string err;
  auto backend = opt.make_backend ? opt.make_backend(&err) : make_backend(opt.backend, &err);
  if (!backend) {
    ScenarioResult r;
    r.name = s.name;
    r.file = s.file;
    r.error = "cannot create the " + to_string(opt.backend) + " backend: " + err;
    r.verdict = Verdict::kError;
    return r;
  }
  return run_scenario(s, *backend, opt.injection, on_check, opt.dump);
}

// The body of a scenario's child: streams "check JSON" lines as checks finish and one
// "result JSON" line at the end. `device`, when not empty, is its CUDA_VISIBLE_DEVICES, set
// before its backend (and CUDA) exists.
ChildBody scenario_child(const SuiteOptions& opt, const Scenario& s, const std::string& device) {
  return [&opt, &s, device](const ChildEmit& emit) {
    set_multicast_off();
    if (!device.empty()) ::setenv("CUDA_VISIBLE_DEVICES", device.c_str(), 1);
    ScenarioResult result;
    try {
      result = run_here(opt, s, [&](const CheckResult& check) { emit("check " + check_result_to_json(check)); });
    } catch (const std::exception& e) {
      // An exception escaping the scenario becomes its ERROR with the message.
      result.name = s.name;
      result.file = s.file;
      result.error = std::string("scenario process: ") + e.what();
      result.verdict = Verdict::kError;
    }
    emit("result " + scenario_result_to_json(result));
  };
}

// The scenario's result from what its child sent: its "result" line when it ended well, else
// an ERROR (crash, timeout, garbled output) that keeps every check streamed before.
ScenarioResult result_from_child(const Scenario& s, const ChildOutcome& c) {
  std::vector<CheckResult> streamed;
  std::optional<ScenarioResult> final_result;
  std::string parse_error;
  std::istringstream lines(c.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("check ", 0) == 0) {
      if (auto cr = check_result_from_json(line.substr(6), &parse_error)) streamed.push_back(std::move(*cr));
    } else if (line.rfind("result ", 0) == 0) {
      final_result = scenario_result_from_json(line.substr(7), &parse_error);
    }
  }
  if (c.ok && final_result) return std::move(*final_result);
  ScenarioResult r;
  r.name = s.name;
  r.file = s.file;
  r.checks = std::move(streamed);
  r.error = !c.ok ? c.error : "unreadable result from the scenario process: " + parse_error;
  r.duration_s = c.duration_s;
  r.verdict = scenario_verdict(r);
  return r;
}

}  // namespace

std::vector<ScenarioResult> run_suite(const SuiteOptions& opt) {
  const size_t n = opt.scenarios.size();
  std::vector<ScenarioResult> out(n);
  const auto finish = [&](size_t i, ScenarioResult r) {
    r.repro = opt.repro_prefix + " --scenario " + opt.scenarios[i].file;
    out[i] = std::move(r);
    if (opt.on_result) opt.on_result(i, n, out[i]);
  };
  if (!opt.isolate) {
    for (size_t i = 0; i < n; ++i) {
      if (opt.on_start) opt.on_start(i, n, opt.scenarios[i]);
      finish(i, run_here(opt, opt.scenarios[i], {}));
    }
    return out;
  }
  // Scenarios start in suite order as slots free up; each result goes to its scenario's place.
  // Leaving early (an exception from a callback) kills the children still running (~ChildPool).
  ChildPool pool(opt.jobs);
  std::vector<bool> slot_busy(std::max<size_t>(opt.jobs, 1), false);
  std::vector<size_t> slot_of(n, 0);
  size_t next = 0;
  while (next < n || !pool.idle()) {
    for (; next < n && !pool.full(); ++next) {
      if (opt.on_start) opt.on_start(next, n, opt.scenarios[next]);
      const size_t slot = static_cast<size_t>(std::find(slot_busy.begin(), slot_busy.end(), false) - slot_busy.begin());
      slot_busy[slot] = true;
      slot_of[next] = slot;
      pool.start(next, scenario_child(opt, opt.scenarios[next], device_for_slot(opt.devices, slot)), opt.timeout_s);
    }
    for (const ChildPool::Finished& f : pool.wait_any()) {
      slot_busy[slot_of[f.tag]] = false;
      ScenarioResult r = result_from_child(opt.scenarios[f.tag], f.outcome);
      r.cuda_visible_devices = device_for_slot(opt.devices, slot_of[f.tag]);
      finish(f.tag, std::move(r));
    }
  }
  return out;
}

}  // namespace mla
