#include "lib/batch/attention_data.h"

#include <algorithm>

#include "kernels/common/bf16.h"
#include "lib/batch/rng.h"
#include "lib/batch/topk_indices.h"
#include "reference/cache_reference.h"

namespace mla {

namespace {
constexpr uint64_t kStreamWeights = 21, kStreamQueries = 22, kStreamTopk = 23;

uint16_t bf16_of(double x) { return f32_to_bf16_rne(static_cast<float>(x)); }

}  // namespace

AttentionData make_attention_data(const Scenario& s, const Batch& b, const CacheData& cache) {
  AttentionData d;
  const int32_t H = s.model.heads, K = s.model.topk;
  const int64_t T = b.num_tokens;
  d.heads = H;
  d.topk = K;
  // Weights ~ N(0, 0.1^2); queries uniform in [-1, 1] (docs/semantics.md §8's test data).
  Rng wr = Rng(s.seed).fork(kStreamWeights);
  d.w_uk.resize(static_cast<size_t>(H) * kDn * kDc);
  d.w_uv.resize(static_cast<size_t>(H) * kDv * kDc);
  for (auto& w : d.w_uk) w = bf16_of(wr.normal(0.0, 0.1));
  for (auto& w : d.w_uv) w = bf16_of(wr.normal(0.0, 0.1));
  Rng qr = Rng(s.seed).fork(kStreamQueries);
  d.q_nope.resize(static_cast<size_t>(T) * H * kDn);
  d.q_pe.resize(static_cast<size_t>(T) * H * kDr);
  for (auto& q : d.q_nope) q = bf16_of(qr.uniform(-1.0, 1.0));
  for (auto& q : d.q_pe) q = bf16_of(qr.uniform(-1.0, 1.0));

  if (s.attention.topk_positions) {
    d.topk_pos = pinned_rows(*s.attention.topk_positions, K);
  } else {
    Rng tr = Rng(s.seed).fork(kStreamTopk);
    d.topk_pos.resize(static_cast<size_t>(T) * K);
    for (int64_t t = 0; t < T; ++t) pick_visible_topk(tr, b.token_pos[static_cast<size_t>(t)], K, &d.topk_pos[static_cast<size_t>(t) * K]);
  }

  // New tokens' latent rows and slots; the context-only cache.
  d.new_kv_c.resize(static_cast<size_t>(T) * kDc);
  d.new_k_pe.resize(static_cast<size_t>(T) * kDr);
  d.new_slots.resize(static_cast<size_t>(T));
  std::vector<uint16_t> ctx_kv, ctx_pe;
  std::vector<int64_t> ctx_slots;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t r = b.req_id_per_token[static_cast<size_t>(t)];
    const int64_t row = cached_row(b, r, b.token_pos[static_cast<size_t>(t)]);
    std::copy_n(&cache.kv_c[static_cast<size_t>(row) * kDc], kDc, &d.new_kv_c[static_cast<size_t>(t) * kDc]);
    std::copy_n(&cache.k_pe[static_cast<size_t>(row) * kDr], kDr, &d.new_k_pe[static_cast<size_t>(t) * kDr]);
    d.new_slots[static_cast<size_t>(t)] = b.all_slots[static_cast<size_t>(row)];
  }
  for (int32_t r = 0; r < b.num_reqs; ++r)
    for (int64_t p = 0; p < b.context_lens[static_cast<size_t>(r)]; ++p) {
      const int64_t row = cached_row(b, r, p);
      ctx_kv.insert(ctx_kv.end(), &cache.kv_c[static_cast<size_t>(row) * kDc], &cache.kv_c[static_cast<size_t>(row + 1) * kDc]);
      ctx_pe.insert(ctx_pe.end(), &cache.k_pe[static_cast<size_t>(row) * kDr], &cache.k_pe[static_cast<size_t>(row + 1) * kDr]);
      ctx_slots.push_back(b.all_slots[static_cast<size_t>(row)]);
    }
  d.context_cache.assign(static_cast<size_t>(b.layout.cache_bytes()), kUnusedCacheByte);
  ref::pack(ctx_kv, ctx_pe, ctx_slots, reference_geometry(b.layout), d.context_cache);
  return d;
}

}  // namespace mla
