// timed_check: the one place where a check's exceptions become an ERROR verdict.
#pragma once

#include <chrono>
#include <exception>
#include <utility>

#include "lib/checks/buffer_set.h"

namespace mla {

template <typename F>
CheckResult timed_check(const std::string& id, const std::string& check, F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  CheckResult r;
  try {
    r = f();
  } catch (const UnsupportedError& e) {
    r = CheckResult{};
    r.verdict = Verdict::kSkip;
    r.reason = e.what();
  } catch (const std::exception& e) {
    r = CheckResult{};
    r.verdict = Verdict::kError;
    r.reason = e.what();
  }
  r.id = id;
  r.check = check;
  r.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

template <typename F>
CheckResult hooked_check(const CheckHooks& hooks, const std::string& id, const std::string& check, F&& f) {
  const int64_t before = hooks.probe != nullptr ? hooks.probe->count() : 0;
  if (hooks.dump != nullptr) hooks.dump->begin_check(id);
  CheckResult r = timed_check(id, check, std::forward<F>(f));
  if (hooks.probe != nullptr) r.metrics.extra[kInjectionAppliedMetric] = hooks.probe->count() > before ? 1.0 : 0.0;
  if (hooks.dump != nullptr) hooks.dump->end_check(r);
  return r;
}

}  // namespace mla
