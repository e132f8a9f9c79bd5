#include "lib/pipeline/sparse_mqa_plan.h"

#include <algorithm>

namespace mla {

SparseMqaPlan plan_sparse_mqa(int32_t num_tokens, int32_t topk, int32_t target_items) {
  constexpr int32_t kColumnBlock = 64;
  SparseMqaPlan p;
  p.num_tokens = num_tokens;
  p.split_offsets.assign(static_cast<size_t>(num_tokens) + 1, 0);
  if (num_tokens <= 0 || topk <= 0) return p;
  const int32_t blocks = (topk + kColumnBlock - 1) / kColumnBlock;
  const int32_t wanted = (std::max(target_items, 1) + num_tokens - 1) / num_tokens;
  const int32_t splits = std::clamp(wanted, 1, blocks);
  const int32_t blocks_per_split = (blocks + splits - 1) / splits;
  for (int32_t t = 0; t < num_tokens; ++t) {
    p.split_offsets[static_cast<size_t>(t)] = p.num_partials;
    int32_t n = 0;
    for (int32_t b = 0; b < blocks; b += blocks_per_split) ++n;
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

int32_t sparse_plan_target(int32_t multiprocessors, int32_t num_heads) {
  const int32_t head_groups = std::max<int32_t>(1, (num_heads + 63) / 64);
  const int32_t ctas = 2 * std::max<int32_t>(1, multiprocessors);
  return (ctas + head_groups - 1) / head_groups;
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
