#include "lib/run/scenario_run.h"

#include <algorithm>
#include <chrono>
#include <exception>

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
                            const std::function<void(const CheckResult&)>& on_check) {
  // Injections that alter a kernel's parameters live in the decorator; the others in the callers.
  InjectingBackend backend(backend_under_test, injection);
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
    const Batch batch = materialise(s);
    const bool ds_mla = canonical_sparse_cache_dtype(s.cache.dtype).value_or("") == "fp8_ds_mla";
    const bool attention = std::any_of(s.checks.begin(), s.checks.end(), is_attention_check);
    const bool attention_inputs = attention || s.attention_checks_removed;
    const CacheData data = ds_mla ? make_cache_data(s, batch, /*large_tiles=*/!attention_inputs) : CacheData{};
    const CheckContext ctx{backend, s, batch, injection, data};
    const AttentionData attn = attention && ds_mla ? make_attention_data(s, batch, data) : AttentionData{};
    const AttentionCheckContext actx{backend, s, batch, injection, data, attn};
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
  int ran = 0, caught = 0;
  std::string first;
  for (const auto& s : results) {
    bool ran_here = false, caught_here = false;
    for (const auto& c : s.checks) {
      if (c.check != info.expected_check || c.verdict == Verdict::kSkip) continue;
      ran_here = true;
      caught_here = caught_here || std::string(to_string(c.verdict)) == info.expected_verdict;
    }
    ran += ran_here;
    caught += caught_here;
    if (caught_here && first.empty()) first = s.name;
  }
  o.exercised = ran > 0;
  o.caught = caught > 0;
  if (o.caught) {
    o.summary = "caught (" + std::string(info.expected_check) + " " + info.expected_verdict + ") in " +
                std::to_string(caught) + " of " + std::to_string(ran) + " scenarios running " + info.expected_check +
                ", e.g. " + first;
  } else if (ran == 0) {
    o.summary = std::string("NOT EXERCISED: no selected scenario runs the ") + info.expected_check +
                " check that catches it";
  } else {
    o.summary = std::string("NOT CAUGHT: ") + std::to_string(ran) + " scenarios ran " + info.expected_check +
                " and none ended in " + info.expected_verdict + " (the harness's own bug, or no scenario exercises it)";
  }
  return o;
}

}  // namespace mla
