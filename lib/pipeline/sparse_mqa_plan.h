// The sparse-MQA work partition ("scheduler metadata", docs/semantics.md §4.1): which thread-block-sized work
// items cover which top-k columns of which token, and where split partials go for the combine.
// Built on the host for exactly the tokens passed to the kernel — the decode subset when prefills
// went dense (building it for the full batch was failure mode 4).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/common/attention_params.h"
#include "lib/checks/buffer_set.h"

namespace mla {

struct SparseMqaPlan {
  std::vector<SparseMqaWorkItem> items;
  std::vector<int32_t> split_offsets;  // [num_tokens + 1]
  int32_t num_tokens = 0;
  int32_t num_partials = 0;
};

// Splits each token's top-k range into column blocks (multiples of 64) when there are fewer
// tokens than target_items (sparse_plan_target below on a GPU), so small decode batches still
// fill the device; otherwise one item per token.
SparseMqaPlan plan_sparse_mqa(int32_t num_tokens, int32_t topk, int32_t target_items);

// The target_items that fills a device: the CUDA kernels run one CTA per (work item, group of 64
// heads) and one CTA per multiprocessor, so items x ceil(num_heads / 64) should make two waves:
// ceil(2 x multiprocessors / head groups). Counting items instead of CTAs over-splits: at batch
// 128 x 2 tokens and 128 heads on 132 SMs it split every token in two, which only added fp32
// partials and the combine (H200: 853 -> 755 us without the split).
int32_t sparse_plan_target(int32_t multiprocessors, int32_t num_heads);

// Uploads the plan into guarded buffers and fills the metadata and split-partial workspace of
// `p` (heads = p.num_heads).
void attach_plan(BufferSet& bufs, const SparseMqaPlan& plan, SparseMqaParams& p);

}  // namespace mla
