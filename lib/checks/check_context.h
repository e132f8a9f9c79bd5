// What every check receives, and the check functions of the cache path (docs/semantics.md §1-§3, 6).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "lib/batch/batch.h"
#include "lib/batch/cache_data.h"
#include "lib/backends/injection.h"
#include "lib/checks/dump_sink.h"
#include "lib/checks/verdict.h"
#include "lib/scenario/scenario.h"

namespace mla {

// What a check reports beside its verdict, when the run asks for it: whether an active
// injection altered anything (the probe), and the arrays of --dump (the sink). Both optional.
struct CheckHooks {
  InjectionProbe* probe = nullptr;
  DumpSink* dump = nullptr;
};

struct CheckContext {
  Backend& backend;
  const Scenario& scenario;
  const Batch& batch;
  Injection injection = Injection::kNone;
  const CacheData& cache;
  CheckHooks hooks = {};
};

std::vector<CheckResult> run_pack_check(const CheckContext& ctx);
std::vector<CheckResult> run_gather_checks(const CheckContext& ctx);
std::vector<CheckResult> run_convert_checks(const CheckContext& ctx);
std::vector<CheckResult> run_layout_check(const CheckContext& ctx);

// Runs f, turning exceptions into an ERROR result and timing it.
template <typename F>
CheckResult timed_check(const std::string& id, const std::string& check, F&& f);

// timed_check with the hooks: the dump sink sees the check begin and end (with its verdict), and
// with a probe the result records whether the injection altered anything while f ran
// (metrics.extra[kInjectionAppliedMetric], 1 or 0).
template <typename F>
CheckResult hooked_check(const CheckHooks& hooks, const std::string& id, const std::string& check, F&& f);

}  // namespace mla

#include "lib/checks/check_context_inl.h"
