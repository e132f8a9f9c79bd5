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
// tokens than target_items, so small decode batches still fill the device; otherwise one item per
// token. On a GPU the target comes from sparse_plan_splits below (target = tokens x splits).
SparseMqaPlan plan_sparse_mqa(int32_t num_tokens, int32_t topk, int32_t target_items);

// The column splits per token (1 .. ceil(topk / 64)) of least modelled time on a device of
// `multiprocessors` SMs, where the CUDA kernels run one CTA per (work item, group of 64 heads) and
// one CTA per SM. The model, fitted to the split_k sweep on an H100 (scripts/fit_split_plan.py,
// docs/benchmarks.md "Split-K plan"; relative RMS error 6 % over 82 timings of 12 shapes, and
// its pick is the fastest measured split count on all 12):
//   t(s) = waves x (b x tiles + d) + [s > 1] x c x s,
//   tiles = ceil(blocks / s), waves = ceil(tokens x s x ceil(heads / 64) / multiprocessors), with s
//   the items per token plan_sparse_mqa makes of that target (ceil(blocks / tiles), at most s),
// b = 4.40 us per column block of one CTA, d = 17.5 us per wave, c = 0.72 us per split in the
// combine (its partials are merged one after another). Only the ratios matter: the fit's launch
// term a (0.13 us) is the same for every s, and its per-split-launch term e came out 0. Ties go to
// the smaller s. Degenerate inputs (no token, no SM) give 1.
int32_t sparse_plan_splits(int64_t tokens, int32_t heads, int32_t topk, int32_t multiprocessors);

// plan_sparse_mqa with sparse_plan_splits's target.
SparseMqaPlan plan_sparse_mqa_on_device(int32_t num_tokens, int32_t heads, int32_t topk, int32_t multiprocessors);

// Uploads the plan into guarded buffers and fills the metadata and split-partial workspace of
// `p` (heads = p.num_heads).
void attach_plan(BufferSet& bufs, const SparseMqaPlan& plan, SparseMqaParams& p);

}  // namespace mla
