#include "lib/batch/cache_data.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>

#include "kernels/common/bf16.h"
#include "lib/batch/rng.h"
#include "reference/cache_reference.h"

namespace mla {

namespace {
// Streams of the scenario seed used by the cache path (fixed numbers: changing one changes data).
constexpr uint64_t kStreamLatent = 11;

// Values like the model's latent: N(0, 0.1^2) (docs/semantics.md §8), with special tiles that exercise the
// quantizer: an all-zero tile (scale falls back to FLT_MIN), a tile so small that amax / 448 is
// below FLT_MIN, and (edge_tiles) a tile of magnitude ~100, which attention data must not carry:
// it turns every softmax into a one-hot of logits ~50 that no model produces.
void fill_token(Rng& rng, int64_t token, bool large_tiles, uint16_t* kv_c, uint16_t* k_pe) {
  for (int e = 0; e < 512; ++e) kv_c[e] = f32_to_bf16_rne(static_cast<float>(rng.normal(0.0, 0.1)));
  for (int e = 0; e < 64; ++e) k_pe[e] = f32_to_bf16_rne(static_cast<float>(rng.normal(0.0, 0.5)));
  auto scale_tile = [&](int tile, float factor) {
    for (int e = tile * 128; e < tile * 128 + 128; ++e) kv_c[e] = f32_to_bf16_rne(bf16_to_f32(kv_c[e]) * factor);
  };
  if (token % 97 == 5) scale_tile(1, 0.0f);
  if (large_tiles && token % 89 == 3) scale_tile(2, 1000.0f);
  if (token % 83 == 7) scale_tile(3, 1e-36f);
}

// Rescales the 128 values of a tile so that its largest magnitude is exactly `amax` (the values
// keep their signs and proportions, to bf16 rounding, which cannot raise one above amax: amax is a
// bf16 value). amax 0, or a tile of zeros, makes a tile whose only non-zero value is tile[0] = amax.
void set_tile_amax(uint16_t* tile, bf16_t amax) {
  double m = 0.0;
  for (int e = 0; e < 128; ++e) m = std::max(m, std::fabs(static_cast<double>(bf16_to_f32(tile[e]))));
  const double target = bf16_to_f32(amax);
  if (!(m > 0.0) || !std::isfinite(m) || target == 0.0) {
    for (int e = 0; e < 128; ++e) tile[e] = 0;
    tile[0] = amax;
    return;
  }
  for (int e = 0; e < 128; ++e)
    tile[e] = f32_to_bf16_rne(static_cast<float>(static_cast<double>(bf16_to_f32(tile[e])) * (target / m)));
}
}  // namespace

CacheData make_cache_data(const Scenario& s, const Batch& b, bool large_tiles) {
  CacheData d;
  const int64_t tokens = static_cast<int64_t>(b.all_slots.size());
  d.kv_c.resize(static_cast<size_t>(tokens) * 512);
  d.k_pe.resize(static_cast<size_t>(tokens) * 64);
  Rng rng = Rng(s.seed).fork(kStreamLatent);
  for (int64_t t = 0; t < tokens; ++t) fill_token(rng, t, large_tiles, &d.kv_c[t * 512], &d.k_pe[t * 64]);
  for (const FixedScale& f : s.cache.fixed_scales) {
    const int64_t row = b.slot_offsets[static_cast<size_t>(f.request)] + f.position;
    const std::optional<bf16_t> amax = tile_amax_for_scale(f.scale);
    if (!amax) throw std::invalid_argument("make_cache_data: no tile gives the pinned scale (validate_scenario refuses it)");
    set_tile_amax(&d.kv_c[static_cast<size_t>(row * 512 + f.tile * 128)], *amax);
  }
  d.ref_cache.assign(static_cast<size_t>(b.layout.cache_bytes()), kUnusedCacheByte);
  ref::pack(d.kv_c, d.k_pe, b.all_slots, reference_geometry(b.layout), d.ref_cache);
  return d;
}

}  // namespace mla
