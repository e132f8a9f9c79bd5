// The mixed-batch forward step (docs/semantics.md §4.4), written once against the Backend interface so that the
// host backend exercises exactly the orchestration that runs on the GPU:
//   1. split decodes / prefills (uniform decode query length <= threshold);
//   2. pack the new tokens' kv_c / k_pe into the cache;
//   3. route: prefills dense iff every prefill's seq_len <= K and not forced sparse;
//   4. dense MHA on the prefill tokens -> out[N_decode:]: causal over the new tokens, then the
//      cached context gathered in workspace-bounded chunks (seq_starts = i * chunk), unmasked,
//      merged by LSE;
//   5. sparse MQA on q[:N_sparse]: index conversion with req_id sliced to the rows of indices,
//      absorption, scheduler metadata for exactly N_sparse tokens, attention, W_UV projection.
// Every buffer lives in the caller's BufferSet (guarded, audited by the check).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "lib/batch/attention_data.h"
#include "lib/batch/batch.h"
#include "lib/checks/buffer_set.h"
#include "lib/backends/injection.h"

namespace mla {

struct ForwardConfig {
  int32_t decode_threshold = 1;
  // >= 0: the decode count is given (a scenario's pinned /batch/num_decodes) instead of counted by
  // the threshold rule.
  int32_t num_decodes = -1;
  bool force_sparse = false;
  // Dense route: K/V of the new tokens read back from the cache (dequantized) instead of this
  // step's bf16 kv_c. Used by the equivalence check to separate quantization from rounding.
  bool new_tokens_from_cache = false;
  int64_t workspace_rows = 0;   // rows of the context gather workspace; 0 = one chunk per request context
  // Sparse-MQA plan: with plan_multiprocessors > 0, the splits per token of least modelled time on
  // that many SMs (sparse_plan_splits); otherwise split top-k until target_work_items items exist.
  int32_t plan_multiprocessors = 0;
  int32_t target_work_items = 264;
  float scale = 0.0f;
  Injection injection = Injection::kNone;
  InjectionProbe* probe = nullptr;  // told when the injection changed something (may be null)
};

struct ForwardResult {
  std::vector<uint16_t> out;  // [T, H, 128] bf16
  int32_t num_decodes = 0;
  int64_t num_sparse_tokens = 0;  // tokens that went through sparse MQA
  bool prefills_dense = false;
  int64_t context_chunks = 0;
  std::vector<uint8_t> cache;  // the cache after the step (context + the new tokens packed)
};

// Decodes by the non-uniform rule (leading requests with 1 <= query_len <= threshold): the second
// way of computing the split that failure mode 7 lets disagree with count_decodes().
int32_t count_decodes_nonuniform(const std::vector<int32_t>& query_lens, int32_t threshold);

// docs/semantics.md §4.4: true when every prefill (request >= num_decodes) has seq_len <= topk.
bool prefills_fit_topk(const Batch& b, int32_t num_decodes, int32_t topk);

ForwardResult run_forward(Backend& backend, BufferSet& bufs, const Batch& b, const AttentionData& d,
                          const ForwardConfig& cfg);

}  // namespace mla
