#include "lib/pipeline/sparse_mqa_plan.h"

#include <algorithm>
#include <climits>

namespace mla {
namespace {

constexpr int32_t kColumnBlock = 64;

// How a token's `blocks` column blocks are cut when `splits` items are asked for: `per_item` blocks
// to an item (the last may have fewer), so `items` items (at most `splits`).
struct ColumnSplit {
  int32_t per_item = 1;
  int32_t items = 1;
};
ColumnSplit split_columns(int32_t blocks, int32_t splits) {
  const int32_t per_item = (blocks + splits - 1) / splits;
  return {per_item, (blocks + per_item - 1) / per_item};
}

}  // namespace

SparseMqaPlan plan_sparse_mqa(int32_t num_tokens, int32_t topk, int32_t target_items) {
  SparseMqaPlan p;
  p.num_tokens = num_tokens;
  p.split_offsets.assign(static_cast<size_t>(num_tokens) + 1, 0);
  if (num_tokens <= 0 || topk <= 0) return p;
  const int32_t blocks = (topk + kColumnBlock - 1) / kColumnBlock;
  const int32_t wanted = (std::max(target_items, 1) + num_tokens - 1) / num_tokens;
  const ColumnSplit cut = split_columns(blocks, std::clamp(wanted, 1, blocks));
  const int32_t blocks_per_split = cut.per_item, n = cut.items;
  for (int32_t t = 0; t < num_tokens; ++t) {
    p.split_offsets[static_cast<size_t>(t)] = p.num_partials;
    for (int32_t b = 0, s = 0; b < blocks; b += blocks_per_split, ++s) {
      SparseMqaWorkItem w;
      w.token = t;
      w.k_begin = b * kColumnBlock;
      w.k_end = std::min(topk, (b + blocks_per_split) * kColumnBlock);
      w.partial = n > 1 ? p.num_partials + s : -1;
      p.items.push_back(w);
    }
    if (n > 1) p.num_partials += n;
  }
  p.split_offsets[static_cast<size_t>(num_tokens)] = p.num_partials;
  return p;
}

int32_t sparse_plan_splits(int64_t tokens, int32_t heads, int32_t topk, int32_t multiprocessors) {
  constexpr double kBlockUs = 4.40, kWaveUs = 17.5, kSplitUs = 0.72;  // sparse_mqa_plan.h
  if (tokens <= 0 || topk <= 0 || multiprocessors <= 0) return 1;
  const int64_t head_groups = std::max<int64_t>(1, (heads + 63) / 64);
  const int32_t blocks = (topk + kColumnBlock - 1) / kColumnBlock;
  int32_t best = 1;
  double best_us = 0.0;
  for (int32_t s = 1; s <= blocks; ++s) {
    // The items plan_sparse_mqa makes of s splits: `tiles` blocks each, `items` (<= s) per token.
    const ColumnSplit cut = split_columns(blocks, s);
    const int64_t tiles = cut.per_item, items = cut.items;
    const int64_t waves = (tokens * items * head_groups + multiprocessors - 1) / multiprocessors;
    const double us = static_cast<double>(waves) * (kBlockUs * static_cast<double>(tiles) + kWaveUs) +
                      (items > 1 ? kSplitUs * static_cast<double>(items) : 0.0);
    if (s == 1 || us < best_us) {
      best = s;
      best_us = us;
    }
  }
  return best;
}

SparseMqaPlan plan_sparse_mqa_on_device(int32_t num_tokens, int32_t heads, int32_t topk, int32_t multiprocessors) {
  const int64_t splits = sparse_plan_splits(num_tokens, heads, topk, multiprocessors);
  const int64_t target = std::min<int64_t>(int64_t{std::max(num_tokens, 1)} * splits, INT32_MAX);
  return plan_sparse_mqa(num_tokens, topk, static_cast<int32_t>(target));
}

void attach_plan(BufferSet& bufs, const SparseMqaPlan& plan, SparseMqaParams& p) {
  p.metadata.items = bufs.input(plan.items);
  p.metadata.num_items = static_cast<int32_t>(plan.items.size());
  p.metadata.split_offsets = bufs.input(plan.split_offsets);
  p.metadata.num_tokens_planned = plan.num_tokens;
  p.metadata.num_partials = plan.num_partials;
  const size_t partials = static_cast<size_t>(std::max(plan.num_partials, 1));
  p.partial_out = bufs.output<float>(partials * p.num_heads * DsMlaEntry::kNopeDims, kPoisonByte).as<float>();
  p.partial_lse = bufs.output<float>(partials * p.num_heads, kPoisonByte).as<float>();
}

}  // namespace mla
