// The latent rows of every cached token of a batch, generated from the scenario's seed (identical on
// every machine), and the cache the reference packs from them.
#pragma once

#include <cstdint>
#include <vector>

#include "lib/batch/batch.h"
#include "lib/scenario/scenario.h"

namespace mla {

// Request-major in the order of Batch::all_slots.
struct CacheData {
  std::vector<uint16_t> kv_c;      // [tokens, 512] bf16
  std::vector<uint16_t> k_pe;      // [tokens, 64] bf16
  std::vector<uint8_t> ref_cache;  // the paged cache packed by the reference; unused bytes kUnusedCacheByte
};

inline constexpr uint8_t kUnusedCacheByte = 0xFF;  // NaN in every field of an entry

// large_tiles adds tiles of magnitude ~100 (quantizer saturation and scale range); off for
// scenarios with attention checks.
CacheData make_cache_data(const Scenario& s, const Batch& b, bool large_tiles);

}  // namespace mla
