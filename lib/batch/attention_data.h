// The attention inputs of a scenario, generated from its seed (identical on every machine):
// projection weights, the new tokens' queries, the top-k positions an indexer would pick, and the
// cache as it stands before this step (context positions packed, new tokens' slots still unused).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/common/mla_dims.h"
#include "lib/batch/batch.h"
#include "lib/batch/cache_data.h"
#include "lib/scenario/scenario.h"

namespace mla {

struct AttentionData {
  int32_t heads = 0;
  int32_t topk = 0;
  std::vector<uint16_t> w_uk;          // [H, 128, 512] bf16: W_UK[h] is [Dn, Dc]
  std::vector<uint16_t> w_uv;          // [H, 128, 512] bf16: W_UV[h] is [Dv, Dc]
  std::vector<uint16_t> q_nope;        // [T, H, 128] bf16, T = new tokens of the batch
  std::vector<uint16_t> q_pe;          // [T, H, 64] bf16 (RoPE applied)
  std::vector<int32_t> topk_pos;       // [T, K] request-local positions, -1 padded
  std::vector<uint16_t> new_kv_c;      // [T, 512] bf16: this step's latent of each new token
  std::vector<uint16_t> new_k_pe;      // [T, 64]
  std::vector<int64_t> new_slots;      // [T] cache slot of each new token
  std::vector<uint8_t> context_cache;  // cache bytes with only context positions packed
};

AttentionData make_attention_data(const Scenario& s, const Batch& b, const CacheData& cache);

// Index of position p of request r in Batch::all_slots / CacheData rows.
inline int64_t cached_row(const Batch& b, int32_t r, int64_t p) { return b.slot_offsets[static_cast<size_t>(r)] + p; }

}  // namespace mla
