// Host sparse MQA (docs/semantics.md §4.1) over the fp8_ds_mla cache: the algorithm of the GPU kernel, one work
// item at a time.
//
// Per work item (token t, top-k columns [k_begin, k_end) clipped to [0, topk)):
//   - q_lat[t, h] of every head is widened to fp32 (576 values: q_nope_lat then q_pe).
//   - Columns are taken in tiles of kAttentionTile (64) consecutive top-k columns, tile starts at
//     k_begin + 64 i. A tile's valid indices (slot in [0, num_slots)) are dequantized once for all
//     heads into fp32, exactly as the gather does (docs/semantics.md §1.2: bf16_rne(e4m3 * scale) for the 512
//     NoPE values, RoPE bits as stored); invalid indices are skipped and their entry never read.
//   - Per head: s_j = dot_f32(q_lat, k_j, 576) * scale; online softmax in fp32 (OnlineSoftmaxRow:
//     the running max and sum are updated once per tile, l += the fp32 sum of the tile's p_j in
//     column order); acc[512] += bf16_rne(p_j) * v_j in fp32, column by column.
//   - item.partial < 0: out_lat = bf16(acc / l), lse = m + ln l (no valid column: 0, -inf).
//     item.partial >= 0: partial_out = acc / l and partial_lse in fp32 (empty: 0, -inf).
// Combine: every planned token t with split_offsets[t + 1] > split_offsets[t] merges its
// partials by LSE in fp32 (weights exp(lse_i - max lse); all -inf: out 0, lse -inf; a NaN LSE
// makes the row NaN, as it does unsplit) into out_lat (bf16) and lse.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/common/ds_mla_entry.h"
#include "kernels/common/online_softmax.h"
#include "kernels/host/host_kernels.h"

namespace mla::host {
namespace {

// docs/semantics.md §1.2 into fp32: the values the gather would write, widened.
void dequant_entry_f32(const uint8_t* entry, float* row) {
  bf16_t bits[DsMlaEntry::kLatentDims];
  dequant_entry(entry, bits);
  for (int e = 0; e < DsMlaEntry::kLatentDims; ++e) row[e] = bf16_to_f32(bits[e]);
}

// Scratch reused across items: q of every head, one dequantized key tile, the accumulators.
struct Scratch {
  std::vector<float> q;     // [H, 576]
  std::vector<float> keys;  // [64, 576], the valid columns of the tile, compacted
  std::vector<float> acc;   // [H, 512]
  std::vector<OnlineSoftmaxRow> rows;  // [H]
};

void run_item(const SparseMqaParams& p, const SparseMqaWorkItem& item, Scratch& s) {
  const int H = p.num_heads;
  const int64_t t = item.token;  // trusted (failure mode 4 shows through the guards)
  const int64_t num_slots = p.cache.num_slots();

  for (int h = 0; h < H; ++h) {
    const bf16_t* qn = p.q_nope_lat + t * p.q_nope_token_stride + h * p.q_nope_head_stride;
    const bf16_t* qr = p.q_pe + t * p.q_pe_token_stride + h * p.q_pe_head_stride;
    float* q = &s.q[static_cast<size_t>(h) * kDl];
    for (int e = 0; e < kDc; ++e) q[e] = bf16_to_f32(qn[e]);
    for (int e = 0; e < kDr; ++e) q[kDc + e] = bf16_to_f32(qr[e]);
    s.rows[static_cast<size_t>(h)] = OnlineSoftmaxRow{};
  }
  std::fill(s.acc.begin(), s.acc.end(), 0.0f);

  const int32_t* idx = p.indices + t * p.indices_row_stride;
  const int32_t k_begin = std::max(item.k_begin, 0);
  const int32_t k_end = std::min(item.k_end, p.topk);
  float scores[kAttentionTile];
  for (int32_t c0 = k_begin; c0 < k_end; c0 += kAttentionTile) {
    const int32_t c1 = std::min(c0 + kAttentionTile, k_end);
    int n = 0;
    for (int32_t c = c0; c < c1; ++c) {
      const int64_t slot = idx[c];
      if (slot < 0 || slot >= num_slots) continue;  // invalid: skipped, never read
      const int64_t offset = (slot / p.cache.block_size) * p.cache.page_stride_bytes +
                             (slot % p.cache.block_size) * DsMlaEntry::kBytes;
      dequant_entry_f32(p.cache.data + offset, &s.keys[static_cast<size_t>(n) * kDl]);
      ++n;
    }
    if (n == 0) continue;

    for (int h = 0; h < H; ++h) {
      // The values are the keys' first 512 elements (MQA over the latent cache).
      softmax_tile<kDl, kDc, kDl>(s.rows[static_cast<size_t>(h)], &s.q[static_cast<size_t>(h) * kDl], s.keys.data(),
                                  s.keys.data(), n, p.scale, scores, &s.acc[static_cast<size_t>(h) * kDc]);
    }
  }

  for (int h = 0; h < H; ++h) {
    const OnlineSoftmaxRow& row = s.rows[static_cast<size_t>(h)];
    const float* acc = &s.acc[static_cast<size_t>(h) * kDc];
    if (item.partial < 0) {
      bf16_t* out = p.out_lat + (t * H + h) * kDc;
      for (int e = 0; e < kDc; ++e) out[e] = f32_to_bf16_rne(row.normalize(acc[e]));
      p.lse[t * H + h] = row.lse();
    } else {
      const int64_t r = static_cast<int64_t>(item.partial) * H + h;  // trusted
      float* out = p.partial_out + r * kDc;
      for (int e = 0; e < kDc; ++e) out[e] = row.normalize(acc[e]);
      p.partial_lse[r] = row.lse();
    }
  }
}

// Merges partials [first, last) of token t into out_lat / lse.
void combine_token(const SparseMqaParams& p, int64_t t, int64_t first, int64_t last, std::vector<float>& weights,
                   std::vector<float>& sum) {
  const int H = p.num_heads;
  const int64_t n = last - first;
  weights.resize(static_cast<size_t>(n));
  for (int h = 0; h < H; ++h) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; ++i) m = fmaxf(m, p.partial_lse[(first + i) * H + h]);
    const float ref = m == -INFINITY ? 0.0f : m;
    float total = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      weights[static_cast<size_t>(i)] = expf(p.partial_lse[(first + i) * H + h] - ref);  // -inf: 0, NaN: NaN
      total += weights[static_cast<size_t>(i)];
    }
    bf16_t* out = p.out_lat + (t * H + h) * kDc;
    if (total == 0.0f) {
      for (int e = 0; e < kDc; ++e) out[e] = 0;
      p.lse[t * H + h] = -INFINITY;
      continue;
    }
    std::fill(sum.begin(), sum.end(), 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const float w = weights[static_cast<size_t>(i)];
      if (w == 0.0f) continue;  // an empty split (or one far below the max) contributes nothing
      const float* __restrict src = p.partial_out + ((first + i) * H + h) * kDc;
      float* __restrict dst = sum.data();
      for (int e = 0; e < kDc; ++e) dst[e] += w * src[e];
    }
    for (int e = 0; e < kDc; ++e) out[e] = f32_to_bf16_rne(sum[static_cast<size_t>(e)] / total);
    p.lse[t * H + h] = ref + logf(total);
  }
}

}  // namespace

void sparse_mqa(const SparseMqaParams& p) {
  const SparseMqaMetadata& md = p.metadata;
  Scratch s;
  s.q.resize(static_cast<size_t>(p.num_heads) * kDl);
  s.keys.resize(static_cast<size_t>(kAttentionTile) * kDl);
  s.acc.resize(static_cast<size_t>(p.num_heads) * kDc);
  s.rows.resize(static_cast<size_t>(p.num_heads));
  for (int32_t i = 0; i < md.num_items; ++i) run_item(p, md.items[i], s);

  std::vector<float> weights, sum(kDc);
  for (int32_t t = 0; t < md.num_tokens_planned; ++t) {
    const int64_t first = md.split_offsets[t], last = md.split_offsets[t + 1];
    if (last > first) combine_token(p, t, first, last, weights, sum);
  }
}

}  // namespace mla::host
