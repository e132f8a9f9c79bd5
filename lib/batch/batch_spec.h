// The shape of a batch before it is laid out in a cache: per-request lengths, the decode split,
// and batches drawn from a generator's ranges. Decodes first, then prefills (docs/semantics.md §0).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace mla {

// Named random streams of a scenario's seed: every consumer draws from Rng(seed).fork(stream), so
// adding draws to one consumer never changes what another one sees. Streams below
// kRngStreamFirstFree belong to lib/scenario and lib/batch; every other consumer (test data,
// indices) takes fixed numbers of its own from kRngStreamFirstFree up.
inline constexpr uint64_t kRngStreamBatchGeneration = 1;  // "batch": {"generate": ...}
inline constexpr uint64_t kRngStreamPageOrder = 2;        // "page_order": "shuffled"
inline constexpr uint64_t kRngStreamFirstFree = 10;

// Batch: decodes first, then prefills (docs/semantics.md §0). Always explicit after loading.
struct BatchSpec {
  std::vector<int32_t> seq_lens;
  std::vector<int32_t> query_lens;
  int32_t decode_threshold = 1;  // 1, or 1 + draft tokens with multi-token prediction
  // Pinned: the first num_decodes requests are the decodes and the rest prefills, whatever the
  // threshold rule says (docs/scenarios.md "batch"). Unset: count_decodes decides.
  std::optional<int32_t> num_decodes;
};

// "batch": {"generate": ...}: the ranges a batch is drawn from (all bounds inclusive). Kept in
// the Scenario for reports and repro lines; the batch itself is always resolved into BatchSpec.
struct BatchGenerator {
  int32_t num_requests_min = 1, num_requests_max = 1;  // 1 <= min <= max
  int32_t num_decodes_min = 0, num_decodes_max = 0;    // clamped to the number of requests drawn
  int32_t decode_query_len = 1;                        // query_len of every generated decode
  int32_t seq_len_min = 0, seq_len_max = 0;
  int32_t prefill_query_len_min = 0, prefill_query_len_max = 0;  // clamped to the request's seq_len
  int32_t decode_threshold = 1;                        // >= decode_query_len
};

// Draws a batch from Rng(seed).fork(kRngStreamBatchGeneration). The order of draws is part of
// the file format (docs/scenarios.md): changing it changes every generated scenario.
// Precondition: g passes the rules load_scenario applies to "generate".
BatchSpec generate_batch(const BatchGenerator& g, uint64_t seed);

// Cache pages the batch occupies: sum over requests of ceil(seq_len / block_size).
int64_t blocks_needed(const BatchSpec& b, int32_t block_size);

// Decode requests: leading requests with query_len <= threshold and equal to the first one's.
// Requests padded to 0 tokens are not decodes.
int32_t count_decodes(const std::vector<int32_t>& query_lens, int32_t decode_threshold);

// The batch's decode requests: the pinned count when set, else count_decodes.
int32_t decode_requests(const BatchSpec& b);

}  // namespace mla
