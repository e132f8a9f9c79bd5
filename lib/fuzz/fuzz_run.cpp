#include "lib/fuzz/fuzz_run.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <map>
#include <stdexcept>

#include "lib/backends/injection.h"
#include "lib/scenario/scenario_writer.h"

namespace mla {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A case the grammar could not produce (its own bug): an ERROR that says so.
ScenarioResult grammar_error(const std::string& name, const std::string& what) {
  ScenarioResult r;
  r.name = name;
  r.error = what;
  r.verdict = Verdict::kError;
  return r;
}

// Runs `scenarios` through the suite runner with the fuzz run's backend, injection and jobs.
std::vector<ScenarioResult> run_group(const FuzzOptions& o, std::vector<Scenario> scenarios, double timeout_s,
                                      const std::function<void(size_t, size_t, const Scenario&)>& on_start,
                                      const std::function<void(size_t, size_t, const ScenarioResult&)>& on_result) {
  SuiteOptions s;
  s.scenarios = std::move(scenarios);
  s.backend = o.suite.backend;
  s.injection = o.suite.injection;
  s.isolate = true;
  s.timeout_s = timeout_s;
  s.jobs = o.suite.jobs;
  s.repro_prefix = o.suite.repro_prefix;
  s.on_start = on_start;
  s.on_result = on_result;
  return run_suite(s);
}

std::string describe(const FuzzOptions& o, const FuzzFinding& f) {
  std::string d = "Found by mla-check --fuzz (seed " + std::to_string(o.seed) + ", case " +
                  std::to_string(f.case_index) + ") on the " + to_string(o.suite.backend) + " backend";
  if (o.suite.injection != Injection::kNone) d += std::string(" with --inject ") + to_string(o.suite.injection);
  d += f.shrunk ? ", shrunk" : ", not shrunk";
  d += ": " + f.signature.to_string() + ".";
  return d;
}

void write_finding(const FuzzOptions& o, FuzzFinding& f, Scenario s, ScenarioResult result, FuzzOutcome& out) {
  namespace fs = std::filesystem;
  const std::string name = finding_name(f.case_name, f.signature);
  s.name = name;
  s.description = describe(o, f);
  s.tags = {"fuzz"};
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  const std::string path = (fs::path(o.out_dir) / (name + ".json")).string();
  const Status st = ec ? Status::error("cannot create '" + o.out_dir + "': " + ec.message()) : write_scenario_file(path, s);
  if (!st.ok()) {
    f.write_error = st.message();
    return;
  }
  f.file = path;
  result.name = name;
  result.file = path;
  result.repro = o.suite.repro_prefix + " --scenario " + path;
  out.results.push_back(std::move(result));
}

}  // namespace

std::string finding_name(const std::string& case_name, const FailureSignature& signature) {
  if (signature.check.empty()) return case_name + (signature.timeout ? "_timeout" : "_error");
  return case_name + "_" + signature.check + "_" + lower(to_string(signature.verdict));
}

FuzzOutcome run_fuzz(const FuzzOptions& o) {
  const auto t0 = Clock::now();
  FuzzOutcome out;
  std::vector<Scenario> ran;  // the scenario of each result (empty name: the grammar failed)
  std::map<uint64_t, double> ended_s;  // by position: when its result arrived
  const size_t group = std::max<size_t>(1, o.suite.jobs);
  // Positions 0 .. cases-1 run the cases first .. first+cases-1; results and progress go by position.
  for (uint64_t next = 0; next < o.cases;) {
    if (since(t0) >= o.budget_s) {
      out.budget_spent = true;
      break;
    }
    const uint64_t end = std::min<uint64_t>(o.cases, next + group);
    std::vector<Scenario> scenarios;
    std::vector<uint64_t> position;
    std::map<uint64_t, ScenarioResult> failed_to_generate;
    for (uint64_t p = next; p < end; ++p) {
      try {
        scenarios.push_back(generate_fuzz_scenario(o.seed, o.first + p, o.grammar));
        position.push_back(p);
      } catch (const std::exception& e) {
        failed_to_generate[p] = grammar_error(fuzz_case_name(o.seed, o.first + p), e.what());
      }
    }
    const auto on_start = [&](size_t i, size_t, const Scenario& s) {
      if (o.suite.on_start) o.suite.on_start(position[i], o.cases, s);
    };
    const auto on_result = [&](size_t i, size_t, const ScenarioResult& r) {
      ended_s[position[i]] = since(t0);
      if (out.first_failure_s < 0 && first_failure(r)) out.first_failure_s = ended_s[position[i]];
      if (o.suite.on_result) o.suite.on_result(position[i], o.cases, r);
    };
    std::vector<ScenarioResult> results = run_group(o, scenarios, o.suite.timeout_s, on_start, on_result);
    size_t k = 0;
    for (uint64_t p = next; p < end; ++p) {
      ScenarioResult r;
      Scenario s;
      if (auto it = failed_to_generate.find(p); it != failed_to_generate.end()) {
        r = it->second;
      } else {
        r = std::move(results[k]);
        s = std::move(scenarios[k]);
        ++k;
      }
      r.repro = o.suite.repro_prefix + " --fuzz 1 --fuzz-start " + std::to_string(o.first + p) + " --seed " +
                std::to_string(o.seed);
      for (CheckKind c : o.grammar.checks) r.repro += std::string(" --check ") + to_string(c);
      out.results.push_back(std::move(r));
      ran.push_back(std::move(s));
    }
    out.cases_run = end;
    next = end;
  }
  out.run_s = since(t0);

  // Findings: the first case of each signature is shrunk and written.
  std::map<std::string, std::string> seen;  // signature -> the case that showed it first
  const size_t cases = out.results.size();
  for (size_t i = 0; i < cases; ++i) {
    const ScenarioResult r = out.results[i];
    const auto sig = first_failure(r);
    if (!sig) continue;
    FuzzFinding f;
    f.case_index = o.first + i;
    f.found_s = ended_s.count(i) ? ended_s[i] : out.run_s;
    f.case_name = r.name;
    f.signature = *sig;
    if (ran[i].name.empty()) {  // the grammar failed: nothing to shrink or write
      out.findings.push_back(std::move(f));
      continue;
    }
    f.before = f.after = scenario_size(ran[i]);
    const auto [it, first] = seen.emplace(sig->to_string(), r.name);
    if (!first) {
      f.duplicate_of = it->second;
      out.findings.push_back(std::move(f));
      continue;
    }
    Scenario result_scenario = ran[i];
    ScenarioResult final_result = r;
    if (!sig->timeout) {
      if (o.log) o.log("shrinking " + r.name + " (" + sig->to_string() + "): " + f.before.to_string());
      // A candidate gets a few times the failing case's own time, at least 10 s, at most the case timeout.
      const double candidate_timeout = std::min(o.suite.timeout_s, std::max(10.0, 5.0 * r.duration_s));
      const ShrinkEvaluate evaluate = [&](const std::vector<Scenario>& candidates) {
        return run_group(o, candidates, candidate_timeout, {}, {});
      };
      ShrinkOptions so;
      so.budget_s = o.shrink_budget_s;
      so.batch = group;
      const ShrinkOutcome sh = shrink_scenario(ran[i], r, *sig, evaluate, so);
      f.shrunk = true;
      f.after = scenario_size(sh.scenario);
      f.candidates_run = sh.candidates_run;
      f.steps = sh.steps;
      f.shrink_budget_spent = sh.budget_spent;
      f.shrink_s = sh.duration_s;
      result_scenario = sh.scenario;
      final_result = sh.result;
      if (o.log)
        o.log("shrunk " + r.name + " in " + std::to_string(static_cast<int>(sh.duration_s + 0.5)) + " s (" +
              std::to_string(sh.candidates_run) + " candidates, " + std::to_string(sh.steps) + " steps" +
              (sh.budget_spent ? ", budget spent" : "") + "): " + f.after.to_string());
    }
    write_finding(o, f, std::move(result_scenario), std::move(final_result), out);
    out.findings.push_back(std::move(f));
  }
  return out;
}

}  // namespace mla
