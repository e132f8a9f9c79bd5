// What every check receives, and the check functions of the cache path (SPEC 1-3, 6).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "lib/batch.h"
#include "lib/injection.h"
#include "lib/scenario.h"
#include "lib/verdict.h"

namespace mla {

// The latent rows of every cached token of the batch, request-major in the order of
// Batch::all_slots, and the cache the reference packs from them (unused bytes 0xFF).
struct CacheData {
  std::vector<uint16_t> kv_c;  // [tokens, 512] bf16
  std::vector<uint16_t> k_pe;  // [tokens, 64] bf16
  std::vector<uint8_t> ref_cache;  // geometry.bytes()
};

struct CheckContext {
  Backend& backend;
  const Scenario& scenario;
  const Batch& batch;
  Injection injection = Injection::kNone;
  const CacheData& cache;
};

inline constexpr uint8_t kUnusedCacheByte = 0xFF;  // NaN in every field of an entry

// Generated from the scenario seed; identical on every machine. large_tiles adds tiles of
// magnitude ~100 (quantizer saturation and scale range); off for scenarios with attention checks.
CacheData make_cache_data(const Scenario& s, const Batch& b, bool large_tiles);

std::vector<CheckResult> run_pack_check(const CheckContext& ctx);
std::vector<CheckResult> run_gather_checks(const CheckContext& ctx);
std::vector<CheckResult> run_convert_checks(const CheckContext& ctx);
std::vector<CheckResult> run_layout_check(const CheckContext& ctx);

// Runs f, turning exceptions into an ERROR result and timing it.
template <typename F>
CheckResult timed_check(const std::string& id, const std::string& check, F&& f);

}  // namespace mla

#include "lib/checks/check_context_inl.h"
