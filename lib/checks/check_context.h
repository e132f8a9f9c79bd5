// What every check receives, and the check functions of the cache path (docs/semantics.md §1-§3, 6).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "lib/batch/batch.h"
#include "lib/batch/cache_data.h"
#include "lib/backends/injection.h"
#include "lib/scenario/scenario.h"
#include "lib/checks/verdict.h"

namespace mla {

struct CheckContext {
  Backend& backend;
  const Scenario& scenario;
  const Batch& batch;
  Injection injection = Injection::kNone;
  const CacheData& cache;
};

std::vector<CheckResult> run_pack_check(const CheckContext& ctx);
std::vector<CheckResult> run_gather_checks(const CheckContext& ctx);
std::vector<CheckResult> run_convert_checks(const CheckContext& ctx);
std::vector<CheckResult> run_layout_check(const CheckContext& ctx);

// Runs f, turning exceptions into an ERROR result and timing it.
template <typename F>
CheckResult timed_check(const std::string& id, const std::string& check, F&& f);

}  // namespace mla

#include "lib/checks/check_context_inl.h"
