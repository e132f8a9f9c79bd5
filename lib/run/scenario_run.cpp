#include "lib/run/scenario_run.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <optional>

#include "lib/batch/batch.h"
#include "lib/batch/attention_data.h"
#include "lib/backends/injecting_backend.h"
#include "lib/checks/attention_check_context.h"
#include "lib/checks/check_context.h"
#include "lib/checks/kv_cache_spec.h"

namespace mla {

namespace {

CheckResult skipped(CheckKind k, std::string reason) {
  CheckResult r;
  r.id = r.check = to_string(k);
  r.verdict = Verdict::kSkip;
  r.reason = std::move(reason);
  return r;
}

}  // namespace

Verdict scenario_verdict(const ScenarioResult& r) {
  std::vector<Verdict> v;
  for (const auto& c : r.checks) v.push_back(c.verdict);
  if (!r.error.empty()) v.push_back(Verdict::kError);
  return aggregate(v);
}

ScenarioResult run_scenario(const Scenario& s, Backend& backend_under_test, Injection injection,
                            const std::function<void(const CheckResult&)>& on_check, const DumpOptions& dump_options) {
  // Injections that alter a kernel's parameters live in the decorator; the others in the callers.
  // All of them tell the probe when they altered something.
  InjectionProbe probe;
  InjectingBackend backend(backend_under_test, injection, &probe);
  CheckHooks hooks;
  if (injection != Injection::kNone) hooks.probe = &probe;
  const auto t0 = std::chrono::steady_clock::now();
  ScenarioResult res;
  res.name = s.name;
  res.file = s.file;
  try {
    const bool host = backend.native_device().kind == NativeDevice::Kind::kHost;
    if (host && s.gpu_only()) {
      for (CheckKind k : s.checks)
        res.checks.push_back(skipped(k, std::string("tagged ") + kGpuOnlyTag +
                                            ": too large for the host backend; run it with --backend cuda"));
      res.verdict = scenario_verdict(res);
      return res;
    }
    std::optional<DirectoryDump> dump;
    if (!dump_options.dir.empty()) {
      dump.emplace(dump_options, s.name,
                   nlohmann::json{{"scenario", s.name}, {"file", s.file}, {"seed", s.seed},
                                  {"backend", backend.info().name}, {"injection", to_string(injection)}});
      hooks.dump = &*dump;
    }
    const Batch batch = materialise(s);
    const bool ds_mla = canonical_sparse_cache_dtype(s.cache.dtype).value_or("") == "fp8_ds_mla";
    const bool attention = std::any_of(s.checks.begin(), s.checks.end(), is_attention_check);
    const bool attention_inputs = attention || s.attention_checks_removed;
    const CacheData data = ds_mla ? make_cache_data(s, batch, /*large_tiles=*/!attention_inputs) : CacheData{};
    const CheckContext ctx{backend, s, batch, injection, data, hooks};
    const AttentionData attn = attention && ds_mla ? make_attention_data(s, batch, data) : AttentionData{};
    const AttentionCheckContext actx{backend, s, batch, injection, data, attn, hooks};
    for (CheckKind k : s.checks) {
      backend.begin_check(s.name, to_string(k));
      std::vector<CheckResult> rs;
      const bool needs_cache = k != CheckKind::kConvert && k != CheckKind::kLayout;
      if (needs_cache && !ds_mla) {
        rs.push_back(skipped(k, "cache dtype '" + s.cache.dtype +
                                    "' is not fp8_ds_mla; the kernels under test read and write fp8_ds_mla"));
      } else if (is_attention_check(k) && !backend.supports_attention()) {
        rs.push_back(skipped(k, "the " + backend.info().name + " backend has no attention kernels"));
      } else {
        switch (k) {
          case CheckKind::kPack: rs = run_pack_check(ctx); break;
          case CheckKind::kGather: rs = run_gather_checks(ctx); break;
          case CheckKind::kConvert: rs = run_convert_checks(ctx); break;
          case CheckKind::kLayout: rs = run_layout_check(ctx); break;
          case CheckKind::kSparseMqa: rs = run_sparse_mqa_check(actx); break;
          case CheckKind::kDenseMha: rs = run_dense_mha_check(actx); break;
          case CheckKind::kForward: rs = run_forward_check(actx); break;
          case CheckKind::kEquivalence: rs = run_equivalence_check(actx); break;
          case CheckKind::kDcp: rs = run_dcp_check(actx); break;
          case CheckKind::kDeterminism: rs = run_determinism_check(actx); break;
          case CheckKind::kDrift: rs = run_drift_check(actx); break;
          case CheckKind::kMerge: rs = run_merge_check(actx); break;
        }
      }
      const std::vector<std::string> notes = backend.take_notes();
      for (auto& r : rs) {
        r.notes.insert(r.notes.end(), notes.begin(), notes.end());
        if (on_check) on_check(r);
        res.checks.push_back(std::move(r));
      }
    }
  } catch (const std::exception& e) {
    res.error = e.what();
  }
  res.verdict = scenario_verdict(res);
  res.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

InjectionOutcome injection_outcome(Injection injection, const std::vector<ScenarioResult>& results) {
  const InjectionInfo& info = injection_info(injection);
  InjectionOutcome o;
  int exercised = 0, caught = 0;
  std::vector<std::string> missed;              // scenarios where it applied and nothing failed
  std::map<std::string, int> caught_by;         // "check VERDICT" -> scenarios
  std::string first;
  for (const auto& s : results) {
    bool exercised_here = false, caught_here = false;
    for (const auto& c : s.checks) {
      const auto flag = c.metrics.extra.find(kInjectionAppliedMetric);
      if (flag == c.metrics.extra.end() || !(flag->second > 0.0)) continue;
      exercised_here = true;
      if (!is_failure(c.verdict) || c.verdict == Verdict::kError) continue;
      const std::string how = c.check + " " + to_string(c.verdict);
      if (!caught_here) ++caught_by[how];
      caught_here = true;
      o.expected_seen = o.expected_seen || (c.check == info.expected_check && how == std::string(info.expected_check) +
                                                                                    " " + info.expected_verdict);
    }
    exercised += exercised_here;
    caught += caught_here;
    if (caught_here && first.empty()) first = s.name;
    if (exercised_here && !caught_here) missed.push_back(s.name);
  }
  o.exercised = exercised > 0;
  o.caught = caught > 0;
  const std::string expected = std::string(info.expected_check) + " " + info.expected_verdict;
  if (o.caught) {
    std::string how;
    for (const auto& [what, n] : caught_by) how += (how.empty() ? "" : ", ") + what + " in " + std::to_string(n);
    o.summary = "caught in " + std::to_string(caught) + " of " + std::to_string(exercised) +
                " scenarios where it applied (" + how + "), e.g. " + first;
    if (!o.expected_seen) o.summary += "; the expected " + expected + " was not among them";
    if (!missed.empty()) o.summary += "; applied without a failing check in " + missed.front() +
                                      (missed.size() > 1 ? " and " + std::to_string(missed.size() - 1) + " more" : "");
  } else if (!o.exercised) {
    o.summary = std::string("NOT EXERCISED: no selected scenario meets its condition (") + info.condition + ")";
  } else {
    o.summary = "NOT CAUGHT: it altered " + std::to_string(exercised) + " scenarios (e.g. " + missed.front() +
                ") and no check of theirs failed (the harness's own bug)";
  }
  return o;
}

}  // namespace mla
